// Softmax, LogSoftmax and Hardmax.
//
// Before opset 13 the input is coerced to 2-D at `axis` ([prod(d[:axis]), prod(d[axis:])])
// and the op runs over each row; from opset 13 on it runs over the single axis `axis`.
// Both forms become (outer, n, inner): the op runs along n for every (outer, inner) lane.
// Lanes are processed in blocks of up to kLanes contiguous inner positions so that the
// inner loops walk memory contiguously; blocks are split across threads.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "../gemm/sgemm.h"
#include "elementwise_math.h"
#include "norm_util.h"

namespace mrt {
namespace {

enum class SmKind { kSoftmax, kLogSoftmax, kHardmax };
constexpr int64_t kLanes = 64;

// exp of the max-shifted softmax arguments: the shared vectorizable float exp.
inline float exp_neg(float x) { return fastmath::exp_f(x); }
inline double exp_neg(double x) { return std::exp(x); }

// One contiguous row (inner == 1) of float/double: y may serve as the scratch row.
template <class A, SmKind K>
void softmax_row(const A* x, A* y, int64_t n) {
  A mx = x[0];
  for (int64_t k = 1; k < n; ++k) mx = x[k] > mx ? x[k] : mx;
  for (int64_t k = 0; k < n; ++k)
    if (std::isnan(x[k])) mx = x[k];
  A sum = 0;
  if (K == SmKind::kSoftmax) {
    for (int64_t k = 0; k < n; ++k) {
      const A e = exp_neg(x[k] - mx);
      y[k] = e;
      sum += e;
    }
    const A inv = A(1) / sum;
    for (int64_t k = 0; k < n; ++k) y[k] *= inv;
  } else {
    for (int64_t k = 0; k < n; ++k) sum += exp_neg(x[k] - mx);
    const A lse = std::log(sum);
    for (int64_t k = 0; k < n; ++k) y[k] = (x[k] - mx) - lse;
  }
}

#if defined(__SSE2__)
// A float row on vectors: the maximum (and whether the row holds a NaN, which makes every output NaN as in
// softmax_row), x - max, exp on the whole row (AVX2 when the CPU has it), the sum in 8 partial sums, then
// the scale (Softmax) or the log-sum subtracted (LogSoftmax). The sum's grouping differs from the scalar
// row's, within float rounding.
template <SmKind K>
void softmax_row_f32(const float* x, float* y, int64_t n) {
  int64_t k = 0;
  __m128 vmx = _mm_set1_ps(-std::numeric_limits<float>::infinity()), nan = _mm_setzero_ps();
  for (; k + 4 <= n; k += 4) {
    const __m128 v = _mm_loadu_ps(x + k);
    vmx = _mm_max_ps(v, vmx);
    nan = _mm_or_ps(nan, _mm_cmpunord_ps(v, v));
  }
  alignas(16) float lanes[4];
  _mm_store_ps(lanes, vmx);
  float mx = std::max(std::max(lanes[0], lanes[1]), std::max(lanes[2], lanes[3]));
  bool has_nan = _mm_movemask_ps(nan) != 0;
  for (; k < n; ++k) {
    mx = x[k] > mx ? x[k] : mx;
    has_nan = has_nan || std::isnan(x[k]);
  }
  if (has_nan) {
    softmax_row<float, K>(x, y, n);
    return;
  }
  const __m128 vm = _mm_set1_ps(mx);
  for (k = 0; k + 4 <= n; k += 4) _mm_storeu_ps(y + k, _mm_sub_ps(_mm_loadu_ps(x + k), vm));
  for (; k < n; ++k) y[k] = x[k] - mx;
  // exp of the shifted row: into y for Softmax; LogSoftmax keeps y = x - max and sums exp of it
  static thread_local std::vector<float> scratch;
  float* e = y;
  if (K == SmKind::kLogSoftmax) {
    if (scratch.size() < static_cast<size_t>(n)) scratch.resize(static_cast<size_t>(n));
    e = scratch.data();
  }
#if defined(MOSAICRT_X86_SIMD)
  if (fastmath::cpu_has_avx2_fma()) {
    fastmath::exp_avx2(y, e, n);
  } else
#endif
  {
    for (k = 0; k < n; ++k) e[k] = exp_neg(y[k]);
  }
  __m128 s0 = _mm_setzero_ps(), s1 = s0;
  for (k = 0; k + 8 <= n; k += 8) {
    s0 = _mm_add_ps(s0, _mm_loadu_ps(e + k));
    s1 = _mm_add_ps(s1, _mm_loadu_ps(e + k + 4));
  }
  _mm_store_ps(lanes, _mm_add_ps(s0, s1));
  float sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (; k < n; ++k) sum += e[k];
  if (K == SmKind::kSoftmax) {
    const __m128 inv = _mm_set1_ps(1.f / sum);
    for (k = 0; k + 4 <= n; k += 4) _mm_storeu_ps(y + k, _mm_mul_ps(_mm_loadu_ps(y + k), inv));
    for (; k < n; ++k) y[k] *= 1.f / sum;
  } else {
    const float lse = std::log(sum);
    for (k = 0; k < n; ++k) y[k] -= lse;
  }
}
#endif

template <class T, SmKind K>
void run_softmax(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, ThreadPool& pool) {
  using A = norm::Acc<T>;
  if (inner == 1 && K != SmKind::kHardmax && std::is_same<T, A>::value) {
    const int64_t grain = std::max<int64_t>(1, 8192 / std::max<int64_t>(1, n));
#if defined(MOSAICRT_X86_SIMD)
    // The rows' kernel: with the SGEMM's AVX-512 kernel (MOSAICRT_SGEMM_KERNEL=avx2 tests the AVX2 rows), else
    // with its AVX2 one (MOSAICRT_SGEMM_KERNEL=portable tests the SSE rows below). Decided once, not per row.
    const bool rows512 = sgemm_kernel_is_avx512();
    const bool rows256 = !rows512 && fastmath::cpu_has_avx2_fma() && std::strcmp(sgemm_kernel_name(), "portable") != 0;
#endif
    pool.parallel_for(outer, grain, [&](int64_t rb, int64_t re) {
      for (int64_t r = rb; r < re; ++r) {
#if defined(__SSE2__)
        if constexpr (std::is_same<A, float>::value) {
          const float* xr = reinterpret_cast<const float*>(x) + r * n;
          float* yr = reinterpret_cast<float*>(y) + r * n;
#if defined(MOSAICRT_X86_SIMD)
          if (rows512 ? norm::softmax_row_avx512(xr, yr, n, K == SmKind::kLogSoftmax)
                      : rows256 && norm::softmax_row_avx2(xr, yr, n, K == SmKind::kLogSoftmax))
            continue;
#endif
          softmax_row_f32<K>(xr, yr, n);
          continue;
        }
#endif
        softmax_row<A, K>(reinterpret_cast<const A*>(x) + r * n, reinterpret_cast<A*>(y) + r * n, n);
      }
    });
    return;
  }
  const int64_t blocks_per_outer = (inner + kLanes - 1) / kLanes;
  const int64_t tasks = outer * blocks_per_outer;
  const int64_t work = n * std::min(inner, kLanes);
  const int64_t grain = std::max<int64_t>(1, 8192 / std::max<int64_t>(1, work));
  pool.parallel_for(tasks, grain, [&](int64_t tb, int64_t te) {
    std::vector<A> buf(static_cast<size_t>(n * std::min(inner, kLanes)));
    A mx[kLanes], sum[kLanes];
    int64_t arg[kLanes];
    for (int64_t t = tb; t < te; ++t) {
      const int64_t o = t / blocks_per_outer;
      const int64_t i0 = (t % blocks_per_outer) * kLanes;
      const int64_t w = std::min(kLanes, inner - i0);
      const int64_t base = o * n * inner + i0;
      for (int64_t k = 0; k < n; ++k) {
        const T* src = x + base + k * inner;
        A* dst = buf.data() + k * w;
        for (int64_t i = 0; i < w; ++i) dst[i] = norm::load(src[i]);
      }
      if (K == SmKind::kHardmax) {
        for (int64_t i = 0; i < w; ++i) { mx[i] = buf[i]; arg[i] = 0; }
        for (int64_t k = 1; k < n; ++k) {
          const A* row = buf.data() + k * w;
          for (int64_t i = 0; i < w; ++i) {
            // First maximum wins; a NaN counts as the maximum (like numpy's argmax).
            if (!std::isnan(mx[i]) && (row[i] > mx[i] || std::isnan(row[i]))) { mx[i] = row[i]; arg[i] = k; }
          }
        }
        for (int64_t k = 0; k < n; ++k) {
          T* out = y + base + k * inner;
          for (int64_t i = 0; i < w; ++i) out[i] = norm::store<T>(arg[i] == k ? 1.0 : 0.0);
        }
        continue;
      }
      for (int64_t i = 0; i < w; ++i) { mx[i] = -std::numeric_limits<A>::infinity(); sum[i] = 0; }
      for (int64_t k = 0; k < n; ++k) {
        const A* row = buf.data() + k * w;
        for (int64_t i = 0; i < w; ++i) mx[i] = (row[i] > mx[i] || std::isnan(row[i])) ? row[i] : mx[i];
      }
      if constexpr (std::is_same<T, Float16>::value || std::is_same<T, BFloat16>::value) {
        // 16-bit floats: every step is rounded to the element type, as the reference
        // evaluates it (float16 sums accumulate in float; bfloat16 sums round per add).
        auto rnd = [](float v) { return norm::load(norm::store<T>(v)); };
        for (int64_t k = 0; k < n; ++k) {
          A* row = buf.data() + k * w;
          for (int64_t i = 0; i < w; ++i) row[i] = rnd(std::exp(rnd(row[i] - mx[i])));
        }
        for (int64_t k = 0; k < n; ++k) {
          const A* row = buf.data() + k * w;
          for (int64_t i = 0; i < w; ++i)
            sum[i] = std::is_same<T, BFloat16>::value ? rnd(sum[i] + row[i]) : sum[i] + row[i];
        }
        for (int64_t i = 0; i < w; ++i) sum[i] = rnd(sum[i]);
        for (int64_t k = 0; k < n; ++k) {
          const A* row = buf.data() + k * w;
          T* out = y + base + k * inner;
          for (int64_t i = 0; i < w; ++i) {
            const float p = row[i] / sum[i];
            out[i] = norm::store<T>(K == SmKind::kSoftmax ? p : std::log(rnd(p)));
          }
        }
        continue;
      }
      if (K == SmKind::kSoftmax) {
        for (int64_t k = 0; k < n; ++k) {
          A* row = buf.data() + k * w;
          for (int64_t i = 0; i < w; ++i) {
            const A e = exp_neg(row[i] - mx[i]);
            row[i] = e;
            sum[i] += e;
          }
        }
        for (int64_t i = 0; i < w; ++i) sum[i] = A(1) / sum[i];
        for (int64_t k = 0; k < n; ++k) {
          const A* row = buf.data() + k * w;
          T* out = y + base + k * inner;
          for (int64_t i = 0; i < w; ++i) out[i] = norm::store<T>(row[i] * sum[i]);
        }
      } else {
        for (int64_t k = 0; k < n; ++k) {
          const A* row = buf.data() + k * w;
          for (int64_t i = 0; i < w; ++i) sum[i] += exp_neg(row[i] - mx[i]);
        }
        for (int64_t i = 0; i < w; ++i) sum[i] = std::log(sum[i]);
        for (int64_t k = 0; k < n; ++k) {
          const A* row = buf.data() + k * w;
          T* out = y + base + k * inner;
          for (int64_t i = 0; i < w; ++i) out[i] = norm::store<T>((row[i] - mx[i]) - sum[i]);
        }
      }
    }
  });
}

template <SmKind K>
void softmax_kernel(OpContext& ctx) {
  const Tensor& X = ctx.input(0);
  const Shape& s = X.shape();
  const int64_t rank = static_cast<int64_t>(s.size());
  int64_t outer = 1, n = 1, inner = 1;
  if (rank > 0) {
    if (ctx.opset() < 13) {
      const int64_t axis = normalize_axis(ctx.node().attr_int("axis", 1), rank);
      outer = norm::prod(s, 0, static_cast<size_t>(axis));
      n = norm::prod(s, static_cast<size_t>(axis), s.size());
    } else {
      const int64_t axis = normalize_axis(ctx.node().attr_int("axis", -1), rank);
      outer = norm::prod(s, 0, static_cast<size_t>(axis));
      n = s[static_cast<size_t>(axis)];
      inner = norm::prod(s, static_cast<size_t>(axis) + 1, s.size());
    }
  }
  Tensor& Y = ctx.output(0, X.dtype(), s);
  if (X.numel() == 0) return;
  MRT_NORM_DISPATCH(X.dtype(), ctx.node().op_type.c_str(), {
    run_softmax<T, K>(X.data<T>(), Y.data<T>(), outer, n, inner, ctx.threads());
  });
}

}  // namespace

void register_softmax_kernels(KernelRegistry& r) {
  r.add("Softmax", 1, softmax_kernel<SmKind::kSoftmax>);
  r.add("LogSoftmax", 1, softmax_kernel<SmKind::kLogSoftmax>);
  r.add("Hardmax", 1, softmax_kernel<SmKind::kHardmax>);
}

}  // namespace mrt
