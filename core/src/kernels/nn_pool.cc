// Kernel group: nn — pooling (MaxPool, AveragePool, LpPool and their Global forms),
// MaxUnpool and Col2Im.
//
// Windowed pools promote 1-D/2-D inputs to 3-D (unit leading dims). Without an Indices
// output they run separably, one axis at a time; MaxPool with Indices runs one direct
// loop nest. Per spatial axis a table holds, for every output index, the range of kernel taps
// that land inside the input and how many taps land inside input + explicit padding
// (the AveragePool count_include_pad divisor; ceil_mode windows that run past the
// padding do not count the overhang).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "../gemm/backend_registry.h"
#include "nn_geometry.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace mrt {
namespace {

using nn::AutoPad;
using nn::Window;

enum class PoolKind { kMax, kAverage, kLp };

// float16/bfloat16 pools run in float32 on widened copies.
inline bool is_half(DType t) { return t == DType::kFloat16 || t == DType::kBFloat16; }

struct AxisTable {
  std::vector<int64_t> start, lo, hi, padded;  // per output index
};

struct PoolPlan {
  Window g;  // promoted to 3 spatial dims
  int64_t planes = 0;
  Shape out_shape;
  AxisTable axis[3];
  bool count_include_pad = false;
  int storage_order = 0;
  double p = 2.0;
};

PoolPlan plan_pool(const OpContext& ctx, const Tensor& X, const char* op, bool allow_ceil) {
  const Node& node = ctx.node();
  MRT_CHECK_ARG(X.rank() >= 3, op, ": input X must have rank >= 3 (N, C, spatial...), got ", X.describe());
  const size_t nsp = X.rank() - 2;
  MRT_CHECK_IMPL(nsp <= 3, op, ": ", nsp, " spatial dimensions are not supported (at most 3)");
  PoolPlan p;
  Window& g = p.g;
  nn::read_window_attrs(node, nsp, op, g);
  g.kernel = node.require_ints("kernel_shape");
  MRT_CHECK_ARG(g.kernel.size() == nsp, op, ": kernel_shape ", shape_str(g.kernel), " has ", g.kernel.size(),
                " values but the input ", X.describe(), " has ", nsp, " spatial dimensions");
  g.in.assign(X.shape().begin() + 2, X.shape().end());
  const bool ceil_mode = allow_ceil && node.attr_int("ceil_mode", 0) != 0;
  const AutoPad auto_pad = nn::parse_auto_pad(node);
  nn::resolve_forward(g, auto_pad, ceil_mode && auto_pad == AutoPad::kNotSet, op);
  p.planes = X.dim(0) * X.dim(1);
  p.out_shape = {X.dim(0), X.dim(1)};
  p.out_shape.insert(p.out_shape.end(), g.out.begin(), g.out.end());
  g.promote(3);
  for (size_t d = 0; d < 3; ++d) {
    AxisTable& t = p.axis[d];
    const int64_t n = g.out[d];
    t.start.resize(static_cast<size_t>(n));
    t.lo.resize(static_cast<size_t>(n));
    t.hi.resize(static_cast<size_t>(n));
    t.padded.resize(static_cast<size_t>(n));
    for (int64_t o = 0; o < n; ++o) {
      const int64_t start = o * g.stride[d] - g.pad_begin[d];
      int64_t lo, hi, plo, phi;
      nn::valid_range(g.kernel[d], g.dilation[d], start, g.in[d], lo, hi);
      nn::valid_range(g.kernel[d], g.dilation[d], start + g.pad_begin[d],
                      g.in[d] + g.pad_begin[d] + g.pad_end[d], plo, phi);
      t.start[o] = start;
      t.lo[o] = lo;
      t.hi[o] = hi;
      t.padded[o] = phi - plo;
    }
  }
  return p;
}

template <class T>
T lowest_value() {
  return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                              : std::numeric_limits<T>::lowest();
}

template <class T>
void max_pool_run(const PoolPlan& p, const T* x, T* y, int64_t* indices, ThreadPool& pool) {
  const Window& g = p.g;
  const int64_t D = g.in[0], H = g.in[1], W = g.in[2];
  const int64_t OD = g.out[0], OH = g.out[1], OW = g.out[2];
  const int64_t dd = g.dilation[0], dh = g.dilation[1], dw = g.dilation[2];
  const int64_t isz = D * H * W, osz = OD * OH * OW;
  const AxisTable &ad = p.axis[0], &ah = p.axis[1], &aw = p.axis[2];
  pool.parallel_for(p.planes, 1, [&](int64_t b, int64_t e) {
    for (int64_t plane = b; plane < e; ++plane) {
      const T* xp = x + plane * isz;
      T* yp = y + plane * osz;
      int64_t* ip = indices ? indices + plane * osz : nullptr;
      for (int64_t od = 0; od < OD; ++od)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) {
            T best = lowest_value<T>();
            int64_t arg = -1;
            for (int64_t kd = ad.lo[od]; kd < ad.hi[od]; ++kd) {
              const int64_t id = ad.start[od] + kd * dd;
              for (int64_t kh = ah.lo[oh]; kh < ah.hi[oh]; ++kh) {
                const int64_t ih = ah.start[oh] + kh * dh;
                const T* row = xp + (id * H + ih) * W;
                for (int64_t kw = aw.lo[ow]; kw < aw.hi[ow]; ++kw) {
                  const int64_t iw = aw.start[ow] + kw * dw;
                  const T v = row[iw];
                  if (arg < 0 || v > best) {
                    best = v;
                    arg = (id * H + ih) * W + iw;
                  }
                }
              }
            }
            const int64_t o = (od * OH + oh) * OW + ow;
            yp[o] = best;
            if (ip) {
              if (arg < 0) {
                ip[o] = -1;
              } else if (p.storage_order == 0) {
                ip[o] = plane * isz + arg;
              } else {  // column-major over the spatial dims
                const int64_t iw = arg % W, ih = (arg / W) % H, id = arg / (W * H);
                ip[o] = plane * isz + id + ih * D + iw * D * H;
              }
            }
          }
    }
  });
}

// Separable pooling (every kind without an Indices output). A box window's max or sum is
// the max/sum along W of the max/sums along H of ..., and the box's tap count is the
// product of the per-axis counts, so each plane is reduced one axis at a time: first
// along W (rows of the plane), then along H and D (whole rows at once, vectorizable).

template <class T, bool kMax>
inline T combine(T a, T b) {
  if constexpr (kMax) {
    return b > a ? b : a;
  } else {
    return a + b;
  }
}

// Pool along the innermost axis: in [rows, W] -> out [rows, OW]; `pre` maps each input.
template <class T, bool kMax, class Pre>
void pass_inner(const T* in, int64_t rows, int64_t W, T* out, int64_t OW, int64_t s, int64_t d, int64_t pb,
                int64_t K, Pre pre) {
  const T ident = kMax ? lowest_value<T>() : T(0);
  for (int64_t r = 0; r < rows; ++r) {
    const T* x = in + r * W;
    T* y = out + r * OW;
    std::fill(y, y + OW, ident);
    for (int64_t k = 0; k < K; ++k) {
      const int64_t off = k * d - pb;
      int64_t l, h;
      nn::valid_range(OW, s, off, W, l, h);
      const T* xs = x + off;
      if (s == 1) {
        for (int64_t o = l; o < h; ++o) y[o] = combine<T, kMax>(y[o], pre(xs[o]));
      } else if (s == 2) {
        for (int64_t o = l; o < h; ++o) y[o] = combine<T, kMax>(y[o], pre(xs[2 * o]));
      } else {
        for (int64_t o = l; o < h; ++o) y[o] = combine<T, kMax>(y[o], pre(xs[o * s]));
      }
    }
  }
}

// Pool along a middle axis: in [outer, n, inner] -> out [outer, on, inner].
template <class T, bool kMax>
void pass_outer(const T* in, int64_t outer, int64_t n, int64_t inner, T* out, int64_t on, int64_t s, int64_t d,
                int64_t pb, int64_t K) {
  const T ident = kMax ? lowest_value<T>() : T(0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t oi = 0; oi < on; ++oi) {
      T* y = out + (o * on + oi) * inner;
      int64_t lo, hi;
      nn::valid_range(K, d, oi * s - pb, n, lo, hi);
      if (lo >= hi) {
        std::fill(y, y + inner, ident);
        continue;
      }
      const T* x0 = in + (o * n + oi * s - pb + lo * d) * inner;
      std::copy(x0, x0 + inner, y);
      for (int64_t k = lo + 1; k < hi; ++k) {
        const T* x = in + (o * n + oi * s - pb + k * d) * inner;
        for (int64_t i = 0; i < inner; ++i) y[i] = combine<T, kMax>(y[i], x[i]);
      }
    }
}

template <class T, bool kMax, class Pre>
void separable_pool_run(const PoolPlan& p, PoolKind kind, const T* x, T* y, ThreadPool& pool, Pre pre) {
  const Window& g = p.g;
  const int64_t D = g.in[0], H = g.in[1], W = g.in[2];
  const int64_t OD = g.out[0], OH = g.out[1], OW = g.out[2];
  const int64_t isz = D * H * W, osz = OD * OH * OW;
  const bool need_d = !(OD == D && g.kernel[0] == 1 && g.stride[0] == 1 && g.pad_begin[0] == 0);
  // Divisor per output (average): product of per-axis tap counts.
  std::vector<T> div_w, div_h, div_d;
  if (kind == PoolKind::kAverage) {
    auto counts = [&](const AxisTable& t, std::vector<T>& out) {
      for (size_t i = 0; i < t.lo.size(); ++i)
        out.push_back(static_cast<T>(p.count_include_pad ? t.padded[i] : t.hi[i] - t.lo[i]));
    };
    counts(p.axis[0], div_d);
    counts(p.axis[1], div_h);
    counts(p.axis[2], div_w);
  }
  pool.parallel_for(p.planes, 1, [&](int64_t b, int64_t e) {
    std::vector<T> t1(static_cast<size_t>(D * H * OW)), t2(need_d ? static_cast<size_t>(D * OH * OW) : 0);
    for (int64_t plane = b; plane < e; ++plane) {
      const T* xp = x + plane * isz;
      T* yp = y + plane * osz;
      pass_inner<T, kMax>(xp, D * H, W, t1.data(), OW, g.stride[2], g.dilation[2], g.pad_begin[2], g.kernel[2], pre);
      if (need_d) {
        pass_outer<T, kMax>(t1.data(), D, H, OW, t2.data(), OH, g.stride[1], g.dilation[1], g.pad_begin[1],
                            g.kernel[1]);
        pass_outer<T, kMax>(t2.data(), 1, D, OH * OW, yp, OD, g.stride[0], g.dilation[0], g.pad_begin[0],
                            g.kernel[0]);
      } else {
        pass_outer<T, kMax>(t1.data(), D, H, OW, yp, OH, g.stride[1], g.dilation[1], g.pad_begin[1], g.kernel[1]);
      }
      if (kind == PoolKind::kAverage) {
        for (int64_t od = 0; od < OD; ++od)
          for (int64_t oh = 0; oh < OH; ++oh) {
            T* yr = yp + (od * OH + oh) * OW;
            const T dh = div_d[od] * div_h[oh];
            for (int64_t ow = 0; ow < OW; ++ow) {
              const T c = dh * div_w[ow];
              yr[ow] = c > T(0) ? yr[ow] / c : T(0);
            }
          }
      } else if (kind == PoolKind::kLp) {
        if (p.p == 2.0) {
          for (int64_t i = 0; i < osz; ++i) yp[i] = std::sqrt(yp[i]);
        } else if (p.p != 1.0) {
          for (int64_t i = 0; i < osz; ++i) yp[i] = static_cast<T>(std::pow(static_cast<double>(yp[i]), 1.0 / p.p));
        }
      }
    }
  });
}

template <bool kMax>
void pool_2d_float(const PoolPlan& p, const float* x, float* y, ThreadPool& pool);

// An AveragePool's taps per output row and per output column (2-D plans), padding counted or not.
void pool_2d_divisors(const PoolPlan& p, std::vector<float>& div_h, std::vector<float>& div_w) {
  for (int a = 1; a <= 2; ++a) {
    const AxisTable& t = p.axis[a];
    std::vector<float>& d = a == 1 ? div_h : div_w;
    d.clear();
    for (size_t i = 0; i < t.lo.size(); ++i)
      d.push_back(static_cast<float>(p.count_include_pad ? t.padded[i] : t.hi[i] - t.lo[i]));
  }
}

// Whether the plan is 2-D pooling over planes (one depth step, no dilation): the geometry of pool_2d_float and of
// the AVX2 and AVX-512 kernels.
bool is_planes_2d(const PoolPlan& p) {
  const Window& g = p.g;
  return g.in[0] == 1 && g.out[0] == 1 && g.kernel[0] == 1 && g.dilation[1] == 1 && g.dilation[2] == 1;
}

#if defined(MOSAICRT_X86_SIMD)
// The 2-D geometry of the AVX-512 pooling kernels (nn_pool_avx512.cc) from a plan of one depth step.
nn::MaxPool2d pool_2d_geometry(const PoolPlan& p) {
  const Window& g = p.g;
  return {p.planes,    g.in[1],     g.in[2],     g.out[1],      g.out[2],     g.kernel[1],
          g.kernel[2], g.stride[1], g.stride[2], g.pad_begin[1], g.pad_begin[2]};
}
#endif

template <class T>
void avg_lp_pool_run(const PoolPlan& p, PoolKind kind, const T* x, T* y, ThreadPool& pool) {
  if constexpr (std::is_same<T, float>::value) {
    if (kind == PoolKind::kAverage && is_planes_2d(p)) {
#if defined(MOSAICRT_X86_SIMD)
      if (cpu_has(kCpuAvx512)) {
        std::vector<float> div_h, div_w;
        pool_2d_divisors(p, div_h, div_w);
        if (nn::avg_pool_2d_float_avx512(pool_2d_geometry(p), div_h.data(), div_w.data(), x, y, pool)) return;
      }
#endif
      pool_2d_float<false>(p, x, y, pool);
      return;
    }
  }
  if (kind == PoolKind::kAverage) {
    separable_pool_run<T, false>(p, kind, x, y, pool, [](T v) { return v; });
  } else if (p.p == 2.0) {
    separable_pool_run<T, false>(p, kind, x, y, pool, [](T v) { return v * v; });
  } else if (p.p == 1.0) {
    separable_pool_run<T, false>(p, kind, x, y, pool, [](T v) { return static_cast<T>(std::fabs(v)); });
  } else {
    const double pw = p.p;
    separable_pool_run<T, false>(p, kind, x, y, pool, [pw](T v) {
      return static_cast<T>(std::pow(std::fabs(static_cast<double>(v)), pw));
    });
  }
}

// 2-D float MaxPool / AveragePool without dilation, one output row at a time: the max (sum) over the
// window's input rows (whole rows, vectorized) into a row buffer bordered with the identity (-inf, 0),
// then across each output's columns, 8 outputs a step (stride 1 and 2: the even elements of loaded
// vectors). The max ignores NaN inputs as the separable path does: max(x, acc) keeps acc when x is NaN.
// The average divides by the window's tap count per axis (padding included or not: the plan's tables).
template <bool kMax>
void pool_2d_float(const PoolPlan& p, const float* x, float* y, ThreadPool& pool) {
  const Window& g = p.g;
  // (locals: the float stores below may alias anything reached through a reference)
  const int64_t H = g.in[1], W = g.in[2], OH = g.out[1], OW = g.out[2];
  const int64_t KH = g.kernel[1], KW = g.kernel[2], sh = g.stride[1], sw = g.stride[2];
  const int64_t ph = g.pad_begin[1], pw = g.pad_begin[2];
  const float ident = kMax ? lowest_value<float>() : 0.f;
  const int64_t width = std::max(pw + W, (OW - 1) * sw + KW) + 24;
  std::vector<float> div_h, div_w;  // taps per output row / column (average)
  if (!kMax) pool_2d_divisors(p, div_h, div_w);
  const float* dh = div_h.data();
  const float* dw = div_w.data();
  // every window counting the same power of two taps (2x2 windows without padding): a product with its
  // reciprocal is exactly the quotient
  [[maybe_unused]] float uniform_inv = 0.f;  // (read by the SSE2 loop only)
  if (!kMax && !div_h.empty() && !div_w.empty()) {
    const float c = div_h[0] * div_w[0];
    int exp2 = 0;
    const bool uniform = std::all_of(div_h.begin(), div_h.end(), [&](float v) { return v == div_h[0]; }) &&
                         std::all_of(div_w.begin(), div_w.end(), [&](float v) { return v == div_w[0]; });
    if (uniform && c > 0.f && std::frexp(c, &exp2) == 0.5f) uniform_inv = 1.f / c;
  }
#if defined(__SSE2__)
  auto vcombine = [](__m128 v, __m128 acc) { return kMax ? _mm_max_ps(v, acc) : _mm_add_ps(acc, v); };
#endif
  auto combine = [](float v, float acc) { return kMax ? (v > acc ? v : acc) : acc + v; };
  pool.parallel_for(p.planes * OH, nn::pool_rows_per_item(KH, W), [=](int64_t b, int64_t e) {
    thread_local std::vector<float> buf;  // per thread, so that a run allocates nothing after its first
    thread_local std::vector<const float*> rows;
    buf.assign(static_cast<size_t>(width), ident);
    if (rows.size() < static_cast<size_t>(KH)) rows.resize(static_cast<size_t>(KH));
    float* row = buf.data() + pw;  // row[w] for w in [-pw, width - pw)
    for (int64_t item = b; item < e; ++item) {
      const int64_t plane = item / OH, oh = item % OH;
      const float* xp = x + plane * H * W;
      float* yr = y + plane * OH * OW + oh * OW;
      const int64_t h0 = oh * sh - ph, ih0 = std::max<int64_t>(0, h0), ih1 = std::min(H, h0 + KH);
      const int64_t nr = std::max<int64_t>(0, ih1 - ih0);
      for (int64_t r = 0; r < nr; ++r) rows[static_cast<size_t>(r)] = xp + (ih0 + r) * W;
      const float* const* rp = rows.data();
      int64_t w = 0;
#if defined(__SSE2__)
      for (; w + 16 <= W; w += 16) {  // four independent chains: the latency hides behind the loads
        __m128 a0 = _mm_set1_ps(ident), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t r = 0; r < nr; ++r) {
          const float* s = rp[r] + w;
          a0 = vcombine(_mm_loadu_ps(s), a0);
          a1 = vcombine(_mm_loadu_ps(s + 4), a1);
          a2 = vcombine(_mm_loadu_ps(s + 8), a2);
          a3 = vcombine(_mm_loadu_ps(s + 12), a3);
        }
        _mm_storeu_ps(row + w, a0);
        _mm_storeu_ps(row + w + 4, a1);
        _mm_storeu_ps(row + w + 8, a2);
        _mm_storeu_ps(row + w + 12, a3);
      }
      for (; w + 4 <= W; w += 4) {
        __m128 acc = _mm_set1_ps(ident);
        for (int64_t r = 0; r < nr; ++r) acc = vcombine(_mm_loadu_ps(rp[r] + w), acc);
        _mm_storeu_ps(row + w, acc);
      }
#endif
      for (; w < W; ++w) {
        float acc = ident;
        for (int64_t r = 0; r < nr; ++r) acc = combine(rp[r][w], acc);
        row[w] = acc;
      }
      const float* r0 = buf.data();  // output ow reads r0[ow * sw + kw]
      int64_t ow = 0;
#if defined(__SSE2__)
      if (sw == 1 || sw == 2) {
        for (; ow + 8 <= OW; ow += 8) {
          __m128 a0 = _mm_set1_ps(ident), a1 = a0;
          for (int64_t kw = 0; kw < KW; ++kw) {
            const float* s = r0 + ow * sw + kw;
            if (sw == 1) {
              a0 = vcombine(_mm_loadu_ps(s), a0);
              a1 = vcombine(_mm_loadu_ps(s + 4), a1);
            } else {
              a0 = vcombine(_mm_shuffle_ps(_mm_loadu_ps(s), _mm_loadu_ps(s + 4), _MM_SHUFFLE(2, 0, 2, 0)), a0);
              a1 = vcombine(_mm_shuffle_ps(_mm_loadu_ps(s + 8), _mm_loadu_ps(s + 12), _MM_SHUFFLE(2, 0, 2, 0)), a1);
            }
          }
          _mm_storeu_ps(yr + ow, a0);
          _mm_storeu_ps(yr + ow + 4, a1);
        }
      }
#endif
      for (; ow < OW; ++ow) {
        float acc = ident;
        for (int64_t kw = 0; kw < KW; ++kw) acc = combine(r0[ow * sw + kw], acc);
        yr[ow] = acc;
      }
      if (!kMax) {  // the window sums divided by their tap counts (0 where a window has none)
        int64_t o = 0;
#if defined(__SSE2__)
        const __m128 vh = _mm_set1_ps(dh[oh]), zero = _mm_setzero_ps(), vinv = _mm_set1_ps(uniform_inv);
        if (uniform_inv != 0.f)
          for (; o + 4 <= OW; o += 4) _mm_storeu_ps(yr + o, _mm_mul_ps(_mm_loadu_ps(yr + o), vinv));
        for (; o + 4 <= OW; o += 4) {
          const __m128 c = _mm_mul_ps(vh, _mm_loadu_ps(dw + o));
          _mm_storeu_ps(yr + o, _mm_and_ps(_mm_div_ps(_mm_loadu_ps(yr + o), c), _mm_cmpgt_ps(c, zero)));
        }
#endif
        for (; o < OW; ++o) {
          const float c = dh[oh] * dw[o];
          yr[o] = c > 0.f ? yr[o] / c : 0.f;
        }
      }
    }
  });
}

template <class T>
void max_pool_dispatch(const PoolPlan& p, const T* x, T* y, int64_t* indices, ThreadPool& pool) {
  const bool planes = !indices && is_planes_2d(p);
#if defined(MOSAICRT_X86_SIMD)
  if constexpr (std::is_same<T, float>::value || sizeof(T) == 1) {
    if (cpu_has(kCpuAvx512) && planes) {
      const nn::MaxPool2d m = pool_2d_geometry(p);
      if constexpr (std::is_same<T, float>::value)
        nn::max_pool_2d_float_avx512(m, x, y, pool);
      else
        nn::max_pool_2d_bytes_avx512(m, reinterpret_cast<const uint8_t*>(x), std::is_signed<T>::value,
                                     reinterpret_cast<uint8_t*>(y), pool);
      return;
    }
    // 8-bit planes on AVX2: QDQ ResNet-18's 3x3 stride-2 pool of 64 x 112 x 112 on an AMD Zen 3 core, 327 us on
    // the separable path, 99 (onnxruntime's NHWC pool 82)
    if constexpr (sizeof(T) == 1) {
      if (cpu_has(kCpuAvx2Fma) && planes) {
        nn::max_pool_2d_bytes_avx2(pool_2d_geometry(p), reinterpret_cast<const uint8_t*>(x), std::is_signed<T>::value,
                                   reinterpret_cast<uint8_t*>(y), pool);
        return;
      }
    }
  }
#endif
  if constexpr (std::is_same<T, float>::value) {
    if (planes) {
#if defined(MOSAICRT_X86_SIMD)
      if (cpu_has(kCpuAvx2Fma) && nn::max_pool_2d_float_avx2(pool_2d_geometry(p), x, y, pool)) return;
#endif
      pool_2d_float<true>(p, x, y, pool);
      return;
    }
  }
  if (indices)
    max_pool_run<T>(p, x, y, indices, pool);
  else
    separable_pool_run<T, true>(p, PoolKind::kMax, x, y, pool, [](T v) { return v; });
}

double read_p(const Node& node) {
  const Attribute* a = node.attr("p");
  if (!a) return 2.0;
  const double p = a->type == AttrType::kFloat ? static_cast<double>(a->f) : static_cast<double>(a->i);
  MRT_CHECK_ARG(p > 0, "p must be positive, got ", p);
  return p;
}

void max_pool_kernel(OpContext& ctx) {
  const Tensor& X = ctx.input(0);
  PoolPlan p = plan_pool(ctx, X, "MaxPool", true);
  p.storage_order = static_cast<int>(ctx.node().attr_int("storage_order", 0));
  Tensor& Y = ctx.output(0, X.dtype(), p.out_shape);
  int64_t* indices = nullptr;
  if (ctx.has_output(1)) indices = ctx.output(1, DType::kInt64, p.out_shape).data<int64_t>();
  if (is_half(X.dtype())) {
    std::vector<float> xf = nn::widen(X), yf(static_cast<size_t>(Y.numel()));
    max_pool_dispatch<float>(p, xf.data(), yf.data(), indices, ctx.threads());
    nn::narrow(yf.data(), Y);
    return;
  }
  switch (X.dtype()) {
    MRT_DTYPE_CASE(kFloat, float, max_pool_dispatch<T>(p, X.data<T>(), Y.data<T>(), indices, ctx.threads()))
    MRT_DTYPE_CASE(kDouble, double, max_pool_dispatch<T>(p, X.data<T>(), Y.data<T>(), indices, ctx.threads()))
    MRT_DTYPE_CASE(kInt8, int8_t, max_pool_dispatch<T>(p, X.data<T>(), Y.data<T>(), indices, ctx.threads()))
    MRT_DTYPE_CASE(kUInt8, uint8_t, max_pool_dispatch<T>(p, X.data<T>(), Y.data<T>(), indices, ctx.threads()))
    MRT_DISPATCH_FAIL(X.dtype(), "MaxPool");
  }
}

template <class T>
void global_pool_run(PoolKind kind, double pw, int64_t planes, int64_t size, const T* x, T* y, ThreadPool& pool);

// A window that is the whole input with no padding (ResNet's final 7x7 AveragePool on 7x7 maps): one output per
// plane, which the global pool's plane reduction makes (2048 planes of 7x7: 75 -> 20 us).
bool window_is_whole_input(const PoolPlan& p) {
  const Window& g = p.g;
  for (size_t d = 0; d < 3; ++d)
    if (g.out[d] != 1 || g.kernel[d] != g.in[d] || g.pad_begin[d] != 0 || g.pad_end[d] != 0 || g.dilation[d] != 1)
      return false;
  return true;
}

void average_pool_kernel(OpContext& ctx) {
  const Tensor& X = ctx.input(0);
  PoolPlan p = plan_pool(ctx, X, "AveragePool", true);
  p.count_include_pad = ctx.node().attr_int("count_include_pad", 0) != 0;
  Tensor& Y = ctx.output(0, X.dtype(), p.out_shape);
  if (window_is_whole_input(p) && (X.dtype() == DType::kFloat || X.dtype() == DType::kDouble)) {
    const int64_t size = p.g.in[0] * p.g.in[1] * p.g.in[2];
    if (X.dtype() == DType::kFloat)
      global_pool_run<float>(PoolKind::kAverage, 0, p.planes, size, X.data<float>(), Y.data<float>(), ctx.threads());
    else
      global_pool_run<double>(PoolKind::kAverage, 0, p.planes, size, X.data<double>(), Y.data<double>(), ctx.threads());
    return;
  }
  if (is_half(X.dtype())) {
    std::vector<float> xf = nn::widen(X), yf(static_cast<size_t>(Y.numel()));
    avg_lp_pool_run<float>(p, PoolKind::kAverage, xf.data(), yf.data(), ctx.threads());
    nn::narrow(yf.data(), Y);
    return;
  }
  MRT_DISPATCH_FLOATING(X.dtype(), "AveragePool",
                        { avg_lp_pool_run<T>(p, PoolKind::kAverage, X.data<T>(), Y.data<T>(), ctx.threads()); });
}

void lp_pool_kernel(OpContext& ctx) {
  const Tensor& X = ctx.input(0);
  PoolPlan p = plan_pool(ctx, X, "LpPool", true);
  p.p = read_p(ctx.node());
  Tensor& Y = ctx.output(0, X.dtype(), p.out_shape);
  if (is_half(X.dtype())) {
    std::vector<float> xf = nn::widen(X), yf(static_cast<size_t>(Y.numel()));
    avg_lp_pool_run<float>(p, PoolKind::kLp, xf.data(), yf.data(), ctx.threads());
    nn::narrow(yf.data(), Y);
    return;
  }
  MRT_DISPATCH_FLOATING(X.dtype(), "LpPool",
                        { avg_lp_pool_run<T>(p, PoolKind::kLp, X.data<T>(), Y.data<T>(), ctx.threads()); });
}

void pool_check(const Node& node, int64_t) {
  (void)nn::parse_auto_pad(node);
  (void)node.require_ints("kernel_shape");
  const int64_t so = node.attr_int("storage_order", 0);
  MRT_ENFORCE(so == 0 || so == 1, MRT_INVALID_MODEL, "storage_order must be 0 or 1, got ", so);
}

// ---------------------------------------------------------------------------------------
// Global pools: one reduction per (n, c) plane.

// Max or sum of x[0, n) with 16 independent partial results (lets the compiler vectorize).
template <class T, bool kMax, class Pre>
T reduce_plane(const T* x, int64_t n, Pre pre) {
  constexpr int kLanes = 16;
  const T ident = kMax ? lowest_value<T>() : T(0);
  T acc[kLanes];
  for (int j = 0; j < kLanes; ++j) acc[j] = ident;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) acc[j] = combine<T, kMax>(acc[j], pre(x[i + j]));
  T r = ident;
  for (int j = 0; j < kLanes; ++j) r = combine<T, kMax>(r, acc[j]);
  for (; i < n; ++i) r = combine<T, kMax>(r, pre(x[i]));
  return r;
}

template <class T>
void global_pool_run(PoolKind kind, double pw, int64_t planes, int64_t size, const T* x, T* y, ThreadPool& pool) {
  pool.parallel_for(planes, 4, [&](int64_t b, int64_t e) {
    for (int64_t plane = b; plane < e; ++plane) {
      const T* xp = x + plane * size;
      T r;
      if (kind == PoolKind::kMax) {
        r = reduce_plane<T, true>(xp, size, [](T v) { return v; });
      } else if (kind == PoolKind::kAverage) {
        r = size > 0 ? reduce_plane<T, false>(xp, size, [](T v) { return v; }) / static_cast<T>(size) : T(0);
      } else if (pw == 2.0) {
        r = static_cast<T>(std::sqrt(reduce_plane<T, false>(xp, size, [](T v) { return v * v; })));
      } else {
        const T s = reduce_plane<T, false>(
            xp, size, [pw](T v) { return static_cast<T>(std::pow(std::fabs(static_cast<double>(v)), pw)); });
        r = static_cast<T>(std::pow(static_cast<double>(s), 1.0 / pw));
      }
      y[plane] = r;
    }
  });
}

template <PoolKind kKind>
void global_pool_kernel(OpContext& ctx) {
  const Tensor& X = ctx.input(0);
  const char* op = kKind == PoolKind::kMax ? "GlobalMaxPool" : kKind == PoolKind::kAverage ? "GlobalAveragePool"
                                                                                          : "GlobalLpPool";
  MRT_CHECK_ARG(X.rank() >= 3, op, ": input X must have rank >= 3 (N, C, spatial...), got ", X.describe());
  Shape out(X.rank(), 1);
  out[0] = X.dim(0);
  out[1] = X.dim(1);
  const int64_t planes = X.dim(0) * X.dim(1);
  const int64_t size = planes > 0 ? X.numel() / planes : 0;
  const double pw = kKind == PoolKind::kLp ? read_p(ctx.node()) : 2.0;
  Tensor& Y = ctx.output(0, X.dtype(), out);
  if (is_half(X.dtype())) {
    std::vector<float> xf = nn::widen(X), yf(static_cast<size_t>(Y.numel()));
    global_pool_run<float>(kKind, pw, planes, size, xf.data(), yf.data(), ctx.threads());
    nn::narrow(yf.data(), Y);
    return;
  }
  if (kKind == PoolKind::kMax) {
    switch (X.dtype()) {
      MRT_DTYPE_CASE(kFloat, float, global_pool_run<T>(kKind, pw, planes, size, X.data<T>(), Y.data<T>(), ctx.threads()))
      MRT_DTYPE_CASE(kDouble, double, global_pool_run<T>(kKind, pw, planes, size, X.data<T>(), Y.data<T>(), ctx.threads()))
      MRT_DTYPE_CASE(kInt8, int8_t, global_pool_run<T>(kKind, pw, planes, size, X.data<T>(), Y.data<T>(), ctx.threads()))
      MRT_DTYPE_CASE(kUInt8, uint8_t, global_pool_run<T>(kKind, pw, planes, size, X.data<T>(), Y.data<T>(), ctx.threads()))
      MRT_DISPATCH_FAIL(X.dtype(), op);
    }
  } else {
    MRT_DISPATCH_FLOATING(X.dtype(), op,
                          { global_pool_run<T>(kKind, pw, planes, size, X.data<T>(), Y.data<T>(), ctx.threads()); });
  }
}

// ---------------------------------------------------------------------------------------
// MaxUnpool: scatter X into zeros at the flat positions given by the MaxPool indices.
// Indices address the default (inferred) output shape; an explicit output_shape may be
// larger, and the inferred block then sits at its origin.

void max_unpool_kernel(OpContext& ctx) {
  const char* op = "MaxUnpool";
  const Tensor& X = ctx.input(0);
  const Tensor& I = ctx.input(1);
  MRT_CHECK_ARG(X.rank() >= 3, op, ": input X must have rank >= 3 (N, C, spatial...), got ", X.describe());
  MRT_CHECK_ARG(I.shape() == X.shape(), op, ": indices I ", I.describe(), " must have the shape of X ",
                X.describe());
  MRT_CHECK_ARG(I.dtype() == DType::kInt64, op, ": indices I must be int64, got ", dtype_name(I.dtype()));
  const size_t nsp = X.rank() - 2;
  Window g;
  nn::read_window_attrs(ctx.node(), nsp, op, g);
  std::vector<int64_t> kernel = ctx.node().require_ints("kernel_shape");
  MRT_CHECK_ARG(kernel.size() == nsp, op, ": kernel_shape ", shape_str(kernel), " must have ", nsp, " values");
  Shape inferred = {X.dim(0), X.dim(1)};
  for (size_t d = 0; d < nsp; ++d) {
    const int64_t v = (X.dim(d + 2) - 1) * g.stride[d] + kernel[d] - g.pad_begin[d] - g.pad_end[d];
    MRT_CHECK_ARG(v >= 0, op, ": inferred output size ", v, " along spatial axis ", d, " is negative");
    inferred.push_back(v);
  }
  Shape out = inferred;
  if (const Tensor* os = ctx.optional_input(2)) {
    out = os->to_int64_vector();
    MRT_CHECK_ARG(out.size() == X.rank(), op, ": output_shape ", shape_str(out), " must have ", X.rank(),
                  " values");
    for (size_t d = 0; d < out.size(); ++d)
      MRT_CHECK_ARG(d < 2 ? out[d] == inferred[d] : out[d] >= inferred[d], op, ": output_shape ", shape_str(out),
                    " is incompatible with the inferred shape ", shape_str(inferred));
  }
  Tensor& Y = ctx.output(0, X.dtype(), out);
  std::memset(Y.raw(), 0, Y.nbytes());
  const int64_t inferred_size = shape_size(inferred);
  const std::vector<int64_t> istr = shape_strides(inferred), ostr = shape_strides(out);
  const int64_t* idx = I.data<int64_t>();
  const size_t elem = dtype_size(X.dtype());
  const char* xs = static_cast<const char*>(X.raw());
  char* ys = static_cast<char*>(Y.raw());
  const bool same = out == inferred;
  for (int64_t i = 0; i < X.numel(); ++i) {
    int64_t k = idx[i];
    MRT_CHECK_ARG(k >= 0 && k < inferred_size, op, ": index ", k, " at position ", i, " is outside [0, ",
                  inferred_size, ")");
    int64_t dst = k;
    if (!same) {
      dst = 0;
      for (size_t d = 0; d < istr.size(); ++d) {
        dst += (k / istr[d]) * ostr[d];
        k %= istr[d];
      }
    }
    std::memcpy(ys + dst * static_cast<int64_t>(elem), xs + i * static_cast<int64_t>(elem), elem);
  }
}

// ---------------------------------------------------------------------------------------
// Col2Im: input [N, C * prod(block), L] -> output [N, C, image...].

void col2im_kernel(OpContext& ctx) {
  const char* op = "Col2Im";
  const Tensor& X = ctx.input(0);
  const std::vector<int64_t> image = ctx.input(1).to_int64_vector();
  const std::vector<int64_t> block = ctx.input(2).to_int64_vector();
  MRT_CHECK_ARG(X.rank() == 3, op, ": input must have rank 3 [N, C*prod(block_shape), L], got ", X.describe());
  const size_t nsp = image.size();
  MRT_CHECK_ARG(nsp >= 1 && block.size() == nsp, op, ": image_shape ", shape_str(image), " and block_shape ",
                shape_str(block), " must have the same, non-zero length");
  Window g;
  nn::read_window_attrs(ctx.node(), nsp, op, g);
  g.in = image;
  g.kernel = block;
  for (size_t d = 0; d < nsp; ++d) {
    MRT_CHECK_ARG(image[d] >= 1 && block[d] >= 1, op, ": image_shape and block_shape values must be >= 1");
  }
  nn::resolve_forward(g, AutoPad::kNotSet, false, op);
  // shape_size refuses a product past int64 (block_shape values are arbitrary input)
  const int64_t ksize = shape_size(block), blocks = shape_size(g.out);
  MRT_CHECK_ARG(X.dim(1) % ksize == 0, op, ": input dim 1 (", X.dim(1), ") is not divisible by prod(block_shape) ",
                ksize);
  MRT_CHECK_ARG(X.dim(2) == blocks, op, ": input dim 2 (", X.dim(2), ") must equal the number of sliding blocks ",
                blocks, " (", shape_str(g.out), ")");
  const int64_t N = X.dim(0), C = X.dim(1) / ksize, isz = shape_size(image);
  Shape out = {N, C};
  out.insert(out.end(), image.begin(), image.end());
  Tensor& Y = ctx.output(0, X.dtype(), out);
  std::memset(Y.raw(), 0, Y.nbytes());
  const int64_t csz = X.dim(1) * X.dim(2);
  for (int64_t n = 0; n < N; ++n) {
    if (X.dtype() == DType::kFloat) {
      nn::col2im_float(X.data<float>() + n * csz, C, g, Y.data<float>() + n * C * isz);
    } else if (X.dtype() == DType::kDouble) {
      nn::col2im_double(X.data<double>() + n * csz, C, g, Y.data<double>() + n * C * isz);
    } else {
      fail(MRT_NOT_IMPLEMENTED, op, ": element type ", dtype_name(X.dtype()), " is not supported");
    }
  }
}

}  // namespace

void register_nn_pool_kernels(KernelRegistry& r) {
  r.add("MaxPool", 1, max_pool_kernel, pool_check);
  r.add("AveragePool", 1, average_pool_kernel, pool_check);
  r.add("LpPool", 1, lp_pool_kernel, pool_check);
  r.add("GlobalMaxPool", 1, global_pool_kernel<PoolKind::kMax>);
  r.add("GlobalAveragePool", 1, global_pool_kernel<PoolKind::kAverage>);
  r.add("GlobalLpPool", 1, global_pool_kernel<PoolKind::kLp>);
  r.add("MaxUnpool", 9, max_unpool_kernel, pool_check);
  r.add("Col2Im", 18, col2im_kernel);
}

}  // namespace mrt
