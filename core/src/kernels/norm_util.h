// Helpers shared by the normalization and softmax kernels (norm*.cc): element
// conversion to the compute type and a dispatch over the floating element types.
#pragma once
#include <cmath>
#include <type_traits>
#include <vector>

#include "../kernel.h"

namespace mrt {
namespace norm {

// Compute type: double for double tensors, float for float and the 16-bit floats.
template <class T>
using Acc = std::conditional_t<std::is_same<T, double>::value, double, float>;

inline float load(float v) { return v; }
inline double load(double v) { return v; }
inline float load(Float16 v) { return half_to_float(v.bits); }
inline float load(BFloat16 v) { return bfloat16_to_float(v.bits); }

template <class T> inline T store(double v);
template <> inline float store<float>(double v) { return static_cast<float>(v); }
template <> inline double store<double>(double v) { return v; }
template <> inline Float16 store<Float16>(double v) { return Float16{float_to_half(static_cast<float>(v))}; }
template <> inline BFloat16 store<BFloat16>(double v) { return BFloat16{float_to_bfloat16(static_cast<float>(v))}; }

// All elements of a floating tensor (float/double/float16/bfloat16) as double.
inline std::vector<double> to_doubles(const Tensor& t, const char* what) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  switch (t.dtype()) {
    case DType::kFloat: { const float* p = t.data<float>(); for (size_t i = 0; i < out.size(); ++i) out[i] = p[i]; break; }
    case DType::kDouble: { const double* p = t.data<double>(); for (size_t i = 0; i < out.size(); ++i) out[i] = p[i]; break; }
    case DType::kFloat16: { const Float16* p = t.data<Float16>(); for (size_t i = 0; i < out.size(); ++i) out[i] = load(p[i]); break; }
    case DType::kBFloat16: { const BFloat16* p = t.data<BFloat16>(); for (size_t i = 0; i < out.size(); ++i) out[i] = load(p[i]); break; }
    default: fail(MRT_INVALID_ARGUMENT, what, " must be a floating tensor, got ", t.describe());
  }
  return out;
}

// Write doubles into a floating tensor of the same element count.
inline void from_doubles(Tensor& t, const std::vector<double>& v) {
  const size_t n = static_cast<size_t>(t.numel());
  switch (t.dtype()) {
    case DType::kFloat: { float* p = t.data<float>(); for (size_t i = 0; i < n; ++i) p[i] = static_cast<float>(v[i]); break; }
    case DType::kDouble: { double* p = t.data<double>(); for (size_t i = 0; i < n; ++i) p[i] = v[i]; break; }
    case DType::kFloat16: { Float16* p = t.data<Float16>(); for (size_t i = 0; i < n; ++i) p[i] = store<Float16>(v[i]); break; }
    case DType::kBFloat16: { BFloat16* p = t.data<BFloat16>(); for (size_t i = 0; i < n; ++i) p[i] = store<BFloat16>(v[i]); break; }
    default: fail(MRT_NOT_IMPLEMENTED, "output element type ", dtype_name(t.dtype()), " is not a floating type");
  }
}

inline int64_t prod(const Shape& s, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end && i < s.size(); ++i) p *= s[i];
  return p;
}

#if defined(MOSAICRT_X86_SIMD)
// Softmax (log_softmax false) or LogSoftmax of one contiguous float row of n > 0 values on AVX-512
// (norm_softmax_avx512.cc): the maximum, exp of the shifted values with their sum, then the scale or the log-sum,
// in 16 lanes. False, with y untouched, when the row holds a NaN (every output is then NaN: the caller's own row
// makes them). y may be x.
bool softmax_row_avx512(const float* x, float* y, int64_t n, bool log_softmax);
// The same in 8 lanes on AVX2 + FMA (norm_softmax_avx2.cc).
bool softmax_row_avx2(const float* x, float* y, int64_t n, bool log_softmax);
// sum(x) and sum((x - mean)^2) of a float row in double, 8 lanes at a time (norm_softmax_avx512.cc).
double row_sum_f64_avx512(const float* p, int64_t n);
double row_sq_dev_f64_avx512(const float* p, int64_t n, double mean);
#endif

}  // namespace norm
}  // namespace mrt

// float, double, float16 and bfloat16
#define MRT_NORM_DISPATCH(dt, what, ...)                         \
  switch (dt) {                                                  \
    MRT_DTYPE_CASE(kFloat, float, __VA_ARGS__)                   \
    MRT_DTYPE_CASE(kDouble, double, __VA_ARGS__)                 \
    MRT_DTYPE_CASE(kFloat16, ::mrt::Float16, __VA_ARGS__)        \
    MRT_DTYPE_CASE(kBFloat16, ::mrt::BFloat16, __VA_ARGS__)      \
    MRT_DISPATCH_FAIL(dt, what);                                 \
  }
