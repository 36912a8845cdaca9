// Small helpers shared by the linalg kernels (linalg.cc, linalg_einsum.cc).
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "../kernel.h"
#include "../tensor.h"
#include "elementwise_math.h"

namespace mrt {

// Accumulator type: floating types accumulate in themselves; integers in uint64_t so that
// overflow wraps like two's complement machine arithmetic (no undefined behaviour).
template <class T>
using linalg_acc_t = std::conditional_t<std::is_integral<T>::value, uint64_t, T>;

template <class T>
inline linalg_acc_t<T> linalg_to_acc(T v) {
  if constexpr (std::is_integral<T>::value) {
    return static_cast<uint64_t>(static_cast<std::conditional_t<std::is_signed<T>::value, int64_t, uint64_t>>(v));
  } else {
    return v;
  }
}

template <class T>
inline T linalg_from_acc(linalg_acc_t<T> v) {
  return static_cast<T>(v);
}

// For each linear index of `out` (a broadcast result shape), the linear index of the
// element of `src` (right-aligned, size-1 dims broadcast) it reads.
inline std::vector<int64_t> broadcast_index_map(const Shape& src, const Shape& out) {
  const int64_t n = shape_size(out);
  std::vector<int64_t> map(static_cast<size_t>(n), 0);
  const size_t r = out.size(), off = r - src.size();
  std::vector<int64_t> sstride(r, 0);
  int64_t s = 1;
  for (size_t d = src.size(); d-- > 0;) {
    sstride[d + off] = src[d] == 1 ? 0 : s;
    s *= src[d];
  }
  std::vector<int64_t> idx(r, 0);
  int64_t cur = 0;
  for (int64_t i = 0; i < n; ++i) {
    map[static_cast<size_t>(i)] = cur;
    for (size_t d = r; d-- > 0;) {
      if (++idx[d] < out[d]) {
        cur += sstride[d];
        break;
      }
      cur -= sstride[d] * (out[d] - 1);
      idx[d] = 0;
    }
  }
  return map;
}

// float16/bfloat16/float32 tensor -> float32 values.
inline std::vector<float> linalg_to_float(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::kFloat16) {
    halves_to_floats(t.data_as<uint16_t>(), v.data(), t.numel());
  } else if (t.dtype() == DType::kBFloat16) {
    const BFloat16* p = t.data<BFloat16>();
    for (int64_t i = 0; i < t.numel(); ++i) v[i] = bfloat16_to_float(p[i].bits);
  } else {
    const float* p = t.data<float>();
    v.assign(p, p + t.numel());
  }
  return v;
}

// float32 values -> a float16/bfloat16/float32 tensor of the same element count.
inline void linalg_from_float(const std::vector<float>& v, Tensor& t) {
  if (t.dtype() == DType::kFloat16) {
    floats_to_halves(v.data(), t.data_as<uint16_t>(), t.numel());
  } else if (t.dtype() == DType::kBFloat16) {
    BFloat16* p = t.data<BFloat16>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i].bits = float_to_bfloat16(v[i]);
  } else {
    float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = v[i];
  }
}

// Run fn(batch_begin, batch_end) over the output matrices: in parallel over matrices when
// there are many small ones, else serially (each product then threads inside SGEMM).
template <class Fn>
void linalg_for_each_matrix(OpContext& ctx, int64_t batch, double flops_per_matrix, bool inner_threads, const Fn& fn) {
  ThreadPool& pool = ctx.threads();
  if (batch > 1 && pool.size() > 1 && (!inner_threads || flops_per_matrix < 2e6 || batch >= 4 * pool.size())) {
    const int64_t grain = std::max<int64_t>(1, static_cast<int64_t>(2e5 / std::max(flops_per_matrix, 1.0)));
    pool.parallel_for(batch, grain, [&](int64_t b0, int64_t b1) { fn(b0, b1, nullptr); });
  } else {
    fn(0, batch, inner_threads ? &pool : nullptr);
  }
}

}  // namespace mrt
