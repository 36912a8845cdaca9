// float32 exp/tanh/sigmoid/erf over whole arrays, compiled with -mavx2 -mfma (x86-64
// targets only; see elementwise_math.h). The loops auto-vectorize to 8 lanes. Only
// static inline helpers are used here so no AVX2 code leaks into shared symbols.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math", "no-math-errno", "fp-contract=fast")
#endif
#include "elementwise_math.h"

namespace mrt {
namespace fastmath {

void exp_avx2(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = exp_f(x[i]);
}
void tanh_avx2(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = tanh_f(x[i]);
}
void sigmoid_avx2(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = sigmoid_f(x[i]);
}
void erf_avx2(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = erf_f(x[i]);
}

}  // namespace fastmath
}  // namespace mrt
