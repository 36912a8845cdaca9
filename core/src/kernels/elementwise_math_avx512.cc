// float32 erf and the erf form of GELU over whole arrays, compiled for AVX-512 (x86-64 targets only; see
// elementwise_math.h): the same branch-free functions as the AVX2 build, vectorized to 16 lanes.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math", "no-math-errno", "fp-contract=fast")
#endif
#include "elementwise_math.h"

namespace mrt {
namespace fastmath {

// 512-bit vectors for the loop (compilers tuned for some AVX-512 CPUs prefer 256)
#if defined(__clang__)
#define MRT_WIDE __attribute__((min_vector_width(512)))
#elif defined(__GNUC__)
#define MRT_WIDE __attribute__((target("prefer-vector-width=512")))
#else
#define MRT_WIDE
#endif

MRT_WIDE void gelu_erf_avx512(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.f + erf_f(v * 0.70710678118654752f));
  }
}

#undef MRT_WIDE

}  // namespace fastmath
}  // namespace mrt
