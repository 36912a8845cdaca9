// GridSample (opset 16: 4-D input, modes bilinear/nearest/bicubic; opset 20: any number
// of spatial dims, modes linear/nearest/cubic). Each output point reads the input at the
// grid's normalized coordinates ([-1, 1], the grid's last axis ordered x, y, z..., i.e.
// innermost spatial axis first), denormalized with or without align_corners; padding_mode
// zeros reads 0 outside, border clamps, reflection mirrors about the borders. Linear and
// cubic interpolate separably (cubic: Keys with a = -0.75); nearest rounds half to even.
// Cubic with border padding clamps each tap rather than the coordinate.
// Computed in double, stored in the input's element type.
#include <cmath>
#include <limits>
#include <vector>

#include "../resource_limits.h"
#include "norm_util.h"

namespace mrt {
namespace {

enum class GsMode { kNearest, kLinear, kCubic };
enum class GsPad { kZeros, kBorder, kReflection };

struct GsAttrs {
  GsMode mode = GsMode::kLinear;
  GsPad pad = GsPad::kZeros;
  bool align = false;
};

GsAttrs read_gs_attrs(const Node& n, int64_t opset) {
  GsAttrs a;
  const std::string mode = n.attr_string("mode", opset >= 20 ? "linear" : "bilinear");
  const bool v20 = opset >= 20;
  if (mode == (v20 ? "linear" : "bilinear")) a.mode = GsMode::kLinear;
  else if (mode == "nearest") a.mode = GsMode::kNearest;
  else if (mode == (v20 ? "cubic" : "bicubic")) a.mode = GsMode::kCubic;
  else fail(MRT_INVALID_MODEL, n.label(), ": attribute mode is '", mode, "'; opset ", opset, " expects ",
            v20 ? "linear, nearest or cubic" : "bilinear, nearest or bicubic");
  const std::string pad = n.attr_string("padding_mode", "zeros");
  if (pad == "zeros") a.pad = GsPad::kZeros;
  else if (pad == "border") a.pad = GsPad::kBorder;
  else if (pad == "reflection") a.pad = GsPad::kReflection;
  else fail(MRT_INVALID_MODEL, n.label(), ": attribute padding_mode is '", pad, "'; expected zeros, border or reflection");
  a.align = n.attr_int("align_corners", 0) != 0;
  return a;
}

void gs_check(const Node& n, int64_t opset) { (void)read_gs_attrs(n, opset); }

// Reflects x into [lo, hi] (in doubles throughout: x may be any float the grid holds; a result that is not
// finite is handled by the caller).
double reflect(double x, double lo, double hi) {
  const double range = hi - lo;
  if (!(range > 0)) return lo;
  if (x < lo || x > hi) {
    const double dx = x < lo ? lo - x : x - hi;
    const double k = std::floor(dx / range);
    const double r = dx - k * range;
    const bool even = std::fmod(k, 2.0) == 0;
    return x < lo ? (even ? lo + r : hi - r) : (even ? hi - r : lo + r);
  }
  return x;
}

void cubic_coeffs(double t, double* c) {
  const double A = -0.75;
  t = std::fabs(t);
  c[0] = ((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A;
  c[1] = ((A + 2) * t - (A + 3)) * t * t + 1;
  c[2] = ((A + 2) * (1 - t) - (A + 3)) * (1 - t) * (1 - t) + 1;
  c[3] = ((A * (2 - t) - 5 * A) * (2 - t) + 8 * A) * (2 - t) - 4 * A;
}

void gs_kernel(OpContext& ctx) {
  const GsAttrs a = read_gs_attrs(ctx.node(), ctx.opset());
  const Tensor& X = ctx.input(0);
  const Tensor& G = ctx.input(1);
  MRT_CHECK_ARG(X.rank() >= 3, "GridSample: X must have rank >= 3, got ", X.describe());
  const size_t nd = X.rank() - 2;
  MRT_CHECK_IMPL(ctx.opset() >= 20 || nd == 2, "GridSample: opset ", ctx.opset(), " takes 4-D input, got ",
                 X.describe());
  MRT_CHECK_ARG(G.rank() == nd + 2 && G.dim(0) == X.dim(0) && G.dim(nd + 1) == static_cast<int64_t>(nd),
                "GridSample: grid ", G.describe(), " must be [", X.dim(0), ", out spatial..., ", nd, "] for input ",
                X.describe());
  const int64_t N = X.dim(0), C = X.dim(1);
  Shape out_shape{N, C};
  int64_t P = 1;  // output points per (n, c)
  for (size_t i = 1; i <= nd; ++i) {
    out_shape.push_back(G.dim(i));
    P *= G.dim(i);
  }
  std::vector<int64_t> dims(X.shape().begin() + 2, X.shape().end());
  int64_t plane = 1;
  for (int64_t d : dims) plane *= d;
  std::vector<int64_t> stride(nd, 1);
  for (size_t i = nd - 1; i-- > 0;) stride[i] = stride[i + 1] * dims[i + 1];
  std::vector<double> grid = norm::to_doubles(G, "GridSample grid");
  std::vector<double> x(static_cast<size_t>(X.numel()));
  for (size_t i = 0; i < x.size(); ++i) x[i] = X.scalar_as_double(static_cast<int64_t>(i));
  std::vector<double> y(checked_scratch({N, C, P}, sizeof(double), "GridSample output"));
  if (plane == 0) {
    // An empty input plane has no sample to clamp or reflect to; with zero padding every sample is 0.
    MRT_CHECK_ARG(a.pad == GsPad::kZeros || y.empty(), "GridSample: input ", X.describe(),
                  " has an empty spatial axis, which only padding_mode 'zeros' can sample");
  }
  const int64_t samples = plane == 0 ? 0 : N * P;  // an empty plane leaves y at zero
  const int taps = a.mode == GsMode::kNearest ? 1 : a.mode == GsMode::kLinear ? 2 : 4;
  int64_t corners = 1;
  for (size_t i = 0; i < nd; ++i) corners *= taps;

  ctx.threads().parallel_for(samples, 16, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> idx(nd * taps);
    std::vector<double> w(nd * taps);
    std::vector<uint8_t> inside(nd * taps);
    for (int64_t np_ = begin; np_ < end; ++np_) {
      const int64_t n = np_ / P, p = np_ % P;
      const double* g = &grid[static_cast<size_t>(np_ * static_cast<int64_t>(nd))];
      for (size_t d = 0; d < nd; ++d) {
        const double len = static_cast<double>(dims[d]);
        const double gv = g[nd - 1 - d];  // grid's last axis is x (innermost) first
        double c = a.align ? (gv + 1) / 2.0 * (len - 1) : ((gv + 1) * len - 1) / 2.0;
        const double lo = a.align ? 0.0 : -0.5, hi = a.align ? len - 1 : len - 0.5;
        if (a.mode == GsMode::kNearest) c = std::nearbyint(c);
        if (c < lo || c > hi) {
          // cubic with border padding clamps each tap, not the coordinate (PyTorch's and
          // onnxruntime's behaviour; the node cases have no cubic + border case)
          if (a.pad == GsPad::kBorder && a.mode != GsMode::kCubic) c = std::min(std::max(c, 0.0), len - 1);
          else if (a.pad == GsPad::kReflection) c = reflect(c, lo, hi);
        }
        // Far outside, infinite or NaN: every tap is outside (or clamped to the same border sample, whose cubic
        // weights sum to 1) whatever the exact value, so it is kept where the integer conversions are defined.
        if (!(c >= lo - 8)) c = lo - 8;
        else if (c > hi + 8) c = hi + 8;
        auto tap = [&](int k, int64_t i, double wt) {
          const size_t s = d * static_cast<size_t>(taps) + static_cast<size_t>(k);
          bool in = i >= 0 && i < dims[d];
          if (!in && a.pad == GsPad::kBorder) {
            i = std::min<int64_t>(std::max<int64_t>(i, 0), dims[d] - 1);
            in = true;
          } else if (!in && a.pad == GsPad::kReflection) {
            i = static_cast<int64_t>(reflect(static_cast<double>(i), lo, hi));
            i = std::min<int64_t>(std::max<int64_t>(i, 0), dims[d] - 1);
            in = true;
          }
          idx[s] = i;
          w[s] = wt;
          inside[s] = in;
        };
        if (a.mode == GsMode::kNearest) {
          tap(0, static_cast<int64_t>(c), 1.0);
        } else {
          const double f = std::floor(c);
          const int64_t i0 = static_cast<int64_t>(f);
          const double t = c - f;
          if (a.mode == GsMode::kLinear) {
            tap(0, i0, 1 - t);
            tap(1, i0 + 1, t);
          } else {
            double cc[4];
            cubic_coeffs(t, cc);
            for (int k = 0; k < 4; ++k) tap(k, i0 - 1 + k, cc[k]);
          }
        }
      }
      for (int64_t ch = 0; ch < C; ++ch) {
        const double* xp = &x[static_cast<size_t>((n * C + ch) * plane)];
        double acc = 0;
        for (int64_t corner = 0; corner < corners; ++corner) {
          int64_t rem = corner, off = 0;
          double wt = 1;
          bool in = true;
          for (size_t d = nd; d-- > 0;) {
            const size_t s = d * static_cast<size_t>(taps) + static_cast<size_t>(rem % taps);
            rem /= taps;
            wt *= w[s];
            in = in && inside[s];
            off += idx[s] * stride[d];
          }
          if (in && wt != 0) acc += wt * xp[off];
        }
        y[static_cast<size_t>((n * C + ch) * P + p)] = acc;
      }
    }
  });
  Tensor& Y = ctx.output(0, X.dtype(), out_shape);
  switch (X.dtype()) {
    case DType::kFloat: case DType::kDouble: case DType::kFloat16: case DType::kBFloat16: norm::from_doubles(Y, y); break;
    default:
      MRT_DISPATCH_INTEGER(X.dtype(), "GridSample", {
        T* yp = Y.data<T>();
        // Cubic weights overshoot: the result is saturated to T's range before the conversion.
        const double lo = static_cast<double>(std::numeric_limits<T>::lowest());
        const double hi = static_cast<double>(std::numeric_limits<T>::max());
        for (size_t i = 0; i < y.size(); ++i) {
          const double v = std::nearbyint(y[i]);
          yp[i] = v != v ? T(0) : v <= lo ? std::numeric_limits<T>::lowest()
                                          : v >= hi ? std::numeric_limits<T>::max() : static_cast<T>(v);
        }
      });
  }
}

}  // namespace

void register_grid_sample_kernels(KernelRegistry& r) { r.add("GridSample", 16, gs_kernel, gs_check); }

}  // namespace mrt
