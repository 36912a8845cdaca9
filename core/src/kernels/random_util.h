// Random streams of the random operators (RandomUniform/Normal[Like], Bernoulli, Multinomial, Dropout in
// training mode).
//
// Each node owns one stream: a counter-based generator (splitmix64 evaluated at a position), keyed by the
// node's `seed` attribute when it has one (the same sequence in every session, on every platform: no
// standard-library distribution is involved) and by the machine's entropy otherwise. A run reserves the
// positions it draws, so successive runs continue the sequence (as onnxruntime's seeded kernels do), runs on
// several threads get disjoint parts of it, and one run can fill its output in parallel.
#pragma once
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <random>

#include "../kernel.h"

namespace mrt {
namespace rng {

inline uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// 64 random bits at position `pos` of the stream `key`.
inline uint64_t bits(uint64_t key, uint64_t pos) { return mix(key + (pos + 1) * 0x9E3779B97F4A7C15ULL); }

// Uniform in [0, 1) with 53 random bits.
inline double uniform01(uint64_t key, uint64_t pos) { return static_cast<double>(bits(key, pos) >> 11) * 0x1.0p-53; }

// Standard normal (Box-Muller) from positions 2*pos and 2*pos+1.
inline double normal(uint64_t key, uint64_t pos) {
  const double u1 = (static_cast<double>(bits(key, 2 * pos) >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]: log is finite
  const double u2 = uniform01(key, 2 * pos + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

struct Stream {
  uint64_t key = 0;
  std::atomic<uint64_t> next{0};
};

inline uint64_t key_of_seed(double seed) {
  uint64_t b = 0;
  std::memcpy(&b, &seed, sizeof b);
  return mix(b ^ 0x6D6F7361696372ULL);
}

inline uint64_t entropy_key() {
  uint64_t k = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  try {
    std::random_device dev;
    k ^= (static_cast<uint64_t>(dev()) << 32) ^ dev();
  } catch (...) {  // no entropy device: the clock alone
  }
  static std::atomic<uint64_t> streams{0};  // two unseeded nodes made in the same tick still differ
  return mix(k + streams.fetch_add(1) * 0x9E3779B97F4A7C15ULL);
}

// Reserves `draws` positions of the node's stream for this run; returns the stream's key and sets `first`.
inline uint64_t reserve(const OpContext& ctx, std::optional<double> seed, uint64_t draws, uint64_t* first) {
  std::shared_ptr<Stream> s = ctx.node_cache<Stream>([seed] {
    auto st = std::make_shared<Stream>();
    st->key = seed ? key_of_seed(*seed) : entropy_key();
    return st;
  });
  *first = s->next.fetch_add(draws);
  return s->key;
}

}  // namespace rng
}  // namespace mrt
