// Resize (opsets 10-19+) and Upsample (opsets 7-9).
//
// Resizing is separable: the tensor is resized one axis at a time, in the order of
// `axes` (all axes when absent); an axis whose size and scale do not change is skipped.
// Along one axis every output index o reads n input indices base(o) + j with weights
// w(j - ratio(o)), where x = the output coordinate mapped into the input
// (coordinate_transformation_mode), base = floor(x) (x - 1 when x is an integer, so
// that ratio = x - base lies in (0, 1]) and j runs over [1 - n/2, n/2]. Indices outside
// the input read the edge value (or get weight 0 with exclude_outside, the rest
// renormalized). The tap count and weights by mode:
//   nearest: n = 2, the one tap nearest_mode picks has weight 1;
//   linear:  n = 2, the triangle 1 - |d|; with antialias on a downscale the triangle is
//            widened by 1/scale (n grows) and the weights normalized;
//   cubic:   n = 4, Keys' cubic with cubic_coeff_a; antialias widens it the same way.
// tf_crop_and_resize maps through the roi and writes extrapolation_value where the
// source coordinate falls outside the input. Floating inputs are computed in float
// (double for double); integer inputs in double, rounded half to even and saturated.
// Nearest resizes of any element type are one gather in the element type.
//
// Opset 10 Resize and Upsample use the asymmetric transformation and pick the floor
// index when upscaling, the ceiling when downscaling (onnxruntime's behaviour).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "norm_util.h"

namespace mrt {
namespace {

enum class Mode { kNearest, kLinear, kCubic };
enum class Coord { kHalfPixel, kHalfPixelSymmetric, kPytorchHalfPixel, kAlignCorners, kAsymmetric, kTfCropAndResize };
enum class Nearest { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kSimple };
enum class Aspect { kStretch, kNotLarger, kNotSmaller };

struct Attrs {
  Mode mode = Mode::kNearest;
  Coord coord = Coord::kHalfPixel;
  Nearest nearest = Nearest::kRoundPreferFloor;
  Aspect aspect = Aspect::kStretch;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0.0;
  bool antialias = false;
  std::vector<int64_t> axes;
};

template <class E>
E pick(const Node& n, const char* attr, const std::string& value, std::initializer_list<std::pair<const char*, E>> options) {
  std::string names;
  for (const auto& o : options) {
    if (value == o.first) return o.second;
    names += names.empty() ? "" : ", ";
    names += o.first;
  }
  fail(MRT_INVALID_MODEL, n.label(), ": attribute ", attr, " is '", value, "'; expected one of ", names);
}

Attrs read_attrs(const Node& n, int64_t opset) {
  Attrs a;
  const bool upsample = n.op_type == "Upsample";
  std::string mode = n.attr_string("mode", "nearest");
  if (upsample && mode == "bilinear") mode = "linear";  // Upsample-7's spelling
  a.mode = pick<Mode>(n, "mode", mode, {{"nearest", Mode::kNearest}, {"linear", Mode::kLinear}, {"cubic", Mode::kCubic}});
  if (upsample || opset < 11) {
    MRT_ENFORCE(a.mode != Mode::kCubic, MRT_INVALID_MODEL, n.label(), ": mode 'cubic' needs Resize opset 11 or later");
    a.coord = Coord::kAsymmetric;
    a.nearest = Nearest::kSimple;
    return a;
  }
  a.coord = pick<Coord>(n, "coordinate_transformation_mode", n.attr_string("coordinate_transformation_mode", "half_pixel"),
                        {{"half_pixel", Coord::kHalfPixel},
                         {"half_pixel_symmetric", Coord::kHalfPixelSymmetric},
                         {"pytorch_half_pixel", Coord::kPytorchHalfPixel},
                         {"align_corners", Coord::kAlignCorners},
                         {"asymmetric", Coord::kAsymmetric},
                         {"tf_crop_and_resize", Coord::kTfCropAndResize}});
  MRT_ENFORCE(a.coord != Coord::kHalfPixelSymmetric || opset >= 19, MRT_INVALID_MODEL, n.label(),
              ": coordinate_transformation_mode 'half_pixel_symmetric' needs opset 19, the model has ", opset);
  a.nearest = pick<Nearest>(n, "nearest_mode", n.attr_string("nearest_mode", "round_prefer_floor"),
                            {{"round_prefer_floor", Nearest::kRoundPreferFloor},
                             {"round_prefer_ceil", Nearest::kRoundPreferCeil},
                             {"floor", Nearest::kFloor},
                             {"ceil", Nearest::kCeil}});
  a.cubic_a = n.attr_float("cubic_coeff_a", -0.75f);
  a.exclude_outside = n.attr_int("exclude_outside", 0) != 0;
  a.extrapolation = n.attr_float("extrapolation_value", 0.f);
  if (opset >= 18) {
    a.antialias = n.attr_int("antialias", 0) != 0;
    a.axes = n.attr_ints("axes");
    a.aspect = pick<Aspect>(n, "keep_aspect_ratio_policy", n.attr_string("keep_aspect_ratio_policy", "stretch"),
                            {{"stretch", Aspect::kStretch}, {"not_larger", Aspect::kNotLarger},
                             {"not_smaller", Aspect::kNotSmaller}});
  }
  MRT_ENFORCE(!(a.antialias && a.mode == Mode::kNearest), MRT_INVALID_MODEL, n.label(),
              ": antialias=1 applies to the linear and cubic modes, not to 'nearest'");
  return a;
}

void resize_check(const Node& n, int64_t opset) {
  const Attrs a = read_attrs(n, opset);
  std::vector<int64_t> seen;
  for (int64_t ax : a.axes) {
    MRT_ENFORCE(std::find(seen.begin(), seen.end(), ax) == seen.end(), MRT_INVALID_MODEL, n.label(),
                ": attribute axes repeats axis ", ax);
    seen.push_back(ax);
  }
  if (n.op_type == "Upsample" && opset < 9) {
    const std::vector<float> s = n.attr_floats("scales");
    MRT_ENFORCE(!s.empty(), MRT_INVALID_MODEL, n.label(), ": Upsample-7 needs the 'scales' attribute");
    for (float v : s)
      MRT_ENFORCE(v >= 1.f, MRT_INVALID_MODEL, n.label(), ": Upsample scale ", v, " must be >= 1");
  }
}

// How one axis is resized.
struct AxisPlan {
  size_t axis = 0;
  int64_t in = 0, out = 0;
  double scale = 1.0;
  double roi_start = 0.0, roi_end = 1.0;
};

// Output coordinate o mapped into the input, computed in float32 as onnxruntime does (a
// nearest index can depend on it: 3.5f / 0.7f - 0.5f is exactly 4.5).
double source_coord(const Attrs& a, const AxisPlan& p, int64_t o) {
  const float x = static_cast<float>(o);
  const float in = static_cast<float>(p.in);
  const float scale = static_cast<float>(p.scale);
  const float out_f = scale * in;  // the unrounded output length
  const float rs = static_cast<float>(p.roi_start), re = static_cast<float>(p.roi_end);
  switch (a.coord) {
    case Coord::kHalfPixel: return (x + 0.5f) / scale - 0.5f;
    case Coord::kHalfPixelSymmetric: {
      const float adjustment = static_cast<float>(p.out) / out_f;
      const float offset = in / 2 * (1 - adjustment);
      return offset + (x + 0.5f) / scale - 0.5f;
    }
    case Coord::kPytorchHalfPixel: return out_f == 1 ? -0.5f : (x + 0.5f) / scale - 0.5f;
    case Coord::kAlignCorners: return out_f == 1 ? 0.0f : x * (in - 1) / (out_f - 1);
    case Coord::kAsymmetric: return x / scale;
    case Coord::kTfCropAndResize: {
      const float r = out_f == 1 ? (re - rs) * (in - 1) / 2 : x * (re - rs) * (in - 1) / (out_f - 1);
      return r + rs * (in - 1);
    }
  }
  return 0.0;
}

double cubic_weight(double d, double A) {
  d = std::fabs(d);
  if (d <= 1) return ((A + 2) * d - (A + 3)) * d * d + 1;
  if (d < 2) return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A;
  return 0.0;
}

// Per output index of one axis: n taps (clamped input indices) and their weights, and
// whether the output is extrapolated (tf_crop_and_resize outside the input).
struct Taps {
  int n = 0;
  std::vector<int64_t> idx;
  std::vector<double> w;
  std::vector<uint8_t> extrapolated;
};

Taps make_taps(const Attrs& a, const AxisPlan& p) {
  Taps t;
  const double s = std::min(p.scale, 1.0);
  const bool aa = a.antialias && a.mode != Mode::kNearest;
  // an antialiasing filter spans 1/scale input samples on each side: bounded so the tap count is an int
  MRT_CHECK_ARG(!aa || s * double(1 << 20) >= 1.0, "Resize: antialias with scale ", p.scale,
                " needs more than 2^20 taps per output");
  int half;  // taps are j in [1 - half, half]
  switch (a.mode) {
    case Mode::kNearest: half = 1; break;
    case Mode::kLinear: half = aa ? static_cast<int>(-(std::floor(-1 / s) + 1)) + 1 : 1; break;
    default: half = aa ? static_cast<int>(-(std::floor(-2 / s) + 1)) + 1 : 2; break;
  }
  t.n = 2 * half;
  t.idx.resize(static_cast<size_t>(p.out * t.n));
  t.w.resize(static_cast<size_t>(p.out * t.n));
  t.extrapolated.assign(static_cast<size_t>(p.out), 0);
  for (int64_t o = 0; o < p.out; ++o) {
    const double x = source_coord(a, p, o);
    if (a.coord == Coord::kTfCropAndResize && (x < 0 || x > static_cast<double>(p.in - 1)))
      t.extrapolated[static_cast<size_t>(o)] = 1;
    // Far outside the input (or NaN): every tap is outside and clamped or excluded whatever the exact value,
    // so the coordinate is kept a few taps out, where the conversions below are defined.
    const double margin = static_cast<double>(t.n + 2);
    const double xc = !(x >= -margin) ? -margin : (x > static_cast<double>(p.in) + margin ? p.in + margin : x);
    const double fl = std::floor(xc);
    const bool integral = fl == xc;
    const int64_t base = integral ? static_cast<int64_t>(fl) - 1 : static_cast<int64_t>(fl);
    const double ratio = integral ? 1.0 : xc - fl;
    int64_t* ip = &t.idx[static_cast<size_t>(o * t.n)];
    double* wp = &t.w[static_cast<size_t>(o * t.n)];
    double sum = 0;
    for (int k = 0; k < t.n; ++k) {
      const int j = k + 1 - half;
      const double d = j - ratio;
      double w = 0;
      switch (a.mode) {
        case Mode::kNearest: {
          bool second;  // pick base + 1 rather than base
          switch (a.nearest) {
            case Nearest::kRoundPreferFloor: second = integral || ratio > 0.5; break;
            case Nearest::kRoundPreferCeil: second = integral || ratio >= 0.5; break;
            case Nearest::kFloor: second = integral; break;
            case Nearest::kCeil: second = true; break;
            default: second = integral || p.scale < 1.0; break;  // kSimple
          }
          w = (j == (second ? 1 : 0)) ? 1.0 : 0.0;
          break;
        }
        case Mode::kLinear: w = aa ? std::max(0.0, 1 - std::fabs(d * s)) : (j == 0 ? 1 - ratio : ratio); break;
        case Mode::kCubic: w = cubic_weight(aa ? d * s : d, a.cubic_a); break;
      }
      const int64_t src = base + j;
      if (a.exclude_outside && (src < 0 || src >= p.in)) w = 0;
      ip[k] = std::min<int64_t>(std::max<int64_t>(src, 0), p.in - 1);
      wp[k] = w;
      sum += w;
    }
    if ((aa || a.exclude_outside) && sum != 0)
      for (int k = 0; k < t.n; ++k) wp[k] /= sum;
  }
  return t;
}

// One axis: in [outer, p.in, inner] -> out [outer, p.out, inner], in compute type C.
template <class C>
void resize_axis(const Attrs& a, const AxisPlan& p, const C* in, C* out, int64_t outer, int64_t inner,
                 ThreadPool& pool) {
  const Taps t = make_taps(a, p);
  const std::vector<C> wts(t.w.begin(), t.w.end());
  const C extrap = static_cast<C>(a.extrapolation);
  pool.parallel_for(outer * p.out, std::max<int64_t>(1, 2048 / std::max<int64_t>(1, inner)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t ob = r / p.out, o = r % p.out;
      C* y = out + r * inner;
      if (t.extrapolated[static_cast<size_t>(o)]) {
        std::fill(y, y + inner, extrap);
        continue;
      }
      const C* xb = in + ob * p.in * inner;
      const int64_t* ip = &t.idx[static_cast<size_t>(o * t.n)];
      const C* wp = &wts[static_cast<size_t>(o * t.n)];
      if (inner == 1) {  // the innermost axis: one dot product per output
        C acc = 0;
        for (int k = 0; k < t.n; ++k) acc += wp[k] * xb[ip[k]];
        *y = acc;
        continue;
      }
      std::fill(y, y + inner, C(0));
      for (int k = 0; k < t.n; ++k) {
        if (wp[k] == 0) continue;
        const C w = wp[k];
        const C* x = xb + ip[k] * inner;
        for (int64_t i = 0; i < inner; ++i) y[i] += w * x[i];
      }
    }
  });
}

// The last two axes together (an image's height and width: the common case), ph then pw: per output row, the input
// rows its taps read are blended into one row (in L1), then that row is resized along the width. The same
// operations in the same order as the two passes of resize_axis, without the intermediate tensor between them
// (written and read back once per axis: 64 x 56 x 56 to 112 x 112, linear, took twice onnxruntime's time).
template <class C>
void resize_last_two(const Attrs& a, const AxisPlan& ph, const AxisPlan& pw, const C* in, C* out, int64_t outer,
                     ThreadPool& pool) {
  const Taps th = make_taps(a, ph), tw = make_taps(a, pw);
  const std::vector<C> wh(th.w.begin(), th.w.end()), ww(tw.w.begin(), tw.w.end());
  const C extrap = static_cast<C>(a.extrapolation);
  const int64_t H = ph.in, W = pw.in, OH = ph.out, OW = pw.out;
  pool.parallel_for(outer * OH, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, OW + W)), [&](int64_t b, int64_t e) {
    thread_local std::vector<C> blended;
    if (blended.size() < static_cast<size_t>(W)) blended.resize(static_cast<size_t>(W));
    C* row = blended.data();
    for (int64_t r = b, ob = b / OH, oh = b % OH; r < e; ++r) {
      C* y = out + r * OW;
      const C* xb = in + ob * H * W;
      const size_t at = static_cast<size_t>(oh);
      if (++oh == OH) oh = 0, ++ob;
      if (th.extrapolated[at]) {
        std::fill(y, y + OW, extrap);
        continue;
      }
      std::fill(row, row + W, C(0));
      for (int k = 0; k < th.n; ++k) {
        const C w = wh[at * static_cast<size_t>(th.n) + static_cast<size_t>(k)];
        if (w == 0) continue;
        const C* x = xb + th.idx[at * static_cast<size_t>(th.n) + static_cast<size_t>(k)] * W;
        for (int64_t i = 0; i < W; ++i) row[i] += w * x[i];
      }
      const int64_t* ip = tw.idx.data();
      const C* wp = ww.data();
      for (int64_t o = 0; o < OW; ++o, ip += tw.n, wp += tw.n) {
        if (tw.extrapolated[static_cast<size_t>(o)]) {
          y[o] = extrap;
          continue;
        }
        C acc = 0;
        for (int k = 0; k < tw.n; ++k) acc += wp[k] * row[ip[k]];
        y[o] = acc;
      }
    }
  });
}

bool is_identity(const AxisPlan& p) {
  return std::fabs(p.scale - 1.0) <= 1e-9 && p.out == p.in && std::fabs(p.roi_start) <= 1e-9 &&
         std::fabs(p.roi_end - 1.0) <= 1e-9;
}

// Nearest resize of every axis in one pass: per axis a table maps each output index to its
// source index; rows of the innermost axis are gathered element by element.
template <class E>
void gather_rows(const E* x, E* y, const std::vector<std::vector<int64_t>>& src, const Shape& in, const Shape& out,
                 ThreadPool& pool) {
  const size_t r = out.size();
  const int64_t ow = out[r - 1], iw = in[r - 1];
  const int64_t rows = shape_size(out) / std::max<int64_t>(ow, 1);
  const std::vector<int64_t>& last = src[r - 1];
  pool.parallel_for(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(ow, 1)), [&](int64_t b, int64_t e) {
    int64_t prev = -1;
    for (int64_t row = b; row < e; ++row) {
      int64_t rem = row, off = 0, mul = iw;
      for (size_t d = r - 1; d-- > 0;) {
        const int64_t o = rem % out[d];
        rem /= out[d];
        off += src[d][static_cast<size_t>(o)] * mul;
        mul *= in[d];
      }
      E* yr = y + row * ow;
      if (row > b && off == prev) {  // the row above read the same input row (an upscale): a copy of it
        std::memcpy(yr, yr - ow, sizeof(E) * static_cast<size_t>(ow));
        continue;
      }
      prev = off;
      const E* xr = x + off;
      for (int64_t w = 0; w < ow; ++w) yr[w] = xr[last[static_cast<size_t>(w)]];
    }
  });
}

void nearest_gather(OpContext& ctx, const Attrs& a, const std::vector<AxisPlan>& plan, const Tensor& X, Tensor& Y) {
  const size_t r = X.rank();
  if (r == 0 || Y.numel() == 0) {
    if (Y.nbytes()) std::memcpy(Y.raw(), X.raw(), Y.nbytes());
    return;
  }
  std::vector<std::vector<int64_t>> src(r);
  for (size_t d = 0; d < r; ++d) {
    src[d].resize(static_cast<size_t>(Y.dim(d)));
    for (int64_t o = 0; o < Y.dim(d); ++o) src[d][static_cast<size_t>(o)] = o;
  }
  for (const AxisPlan& p : plan) {
    if (is_identity(p)) continue;
    const Taps t = make_taps(a, p);
    for (int64_t o = 0; o < p.out; ++o)
      for (int k = 0; k < t.n; ++k)
        if (t.w[static_cast<size_t>(o * t.n + k)] != 0) src[p.axis][static_cast<size_t>(o)] = t.idx[static_cast<size_t>(o * t.n + k)];
  }
  switch (dtype_size(X.dtype())) {
    case 1: gather_rows(X.data_as<uint8_t>(), Y.data_as<uint8_t>(), src, X.shape(), Y.shape(), ctx.threads()); break;
    case 2: gather_rows(X.data_as<uint16_t>(), Y.data_as<uint16_t>(), src, X.shape(), Y.shape(), ctx.threads()); break;
    case 4: gather_rows(X.data_as<uint32_t>(), Y.data_as<uint32_t>(), src, X.shape(), Y.shape(), ctx.threads()); break;
    default: gather_rows(X.data_as<uint64_t>(), Y.data_as<uint64_t>(), src, X.shape(), Y.shape(), ctx.threads()); break;
  }
}

std::vector<double> float_values(const Tensor& t, const char* what) {
  if (t.dtype() == DType::kInt64 || t.dtype() == DType::kInt32) {
    std::vector<double> v;
    for (int64_t x : t.to_int64_vector()) v.push_back(static_cast<double>(x));
    return v;
  }
  return norm::to_doubles(t, what);
}

// The axes to resize (in order) with their output sizes, scales and roi.
// An output length computed in double; refused unless it is a size a tensor can have.
int64_t output_size(double len, int64_t axis) {
  MRT_CHECK_ARG(std::isfinite(len) && len >= 0 && len < 4.0e18, "axis ", axis, " would get size ", len);
  return static_cast<int64_t>(len);
}

std::vector<AxisPlan> plan_resize(const OpContext& ctx, const Attrs& a, const Tensor& X) {
  const Node& n = ctx.node();
  const bool upsample = n.op_type == "Upsample";
  const size_t rank = X.rank();
  std::vector<size_t> axes;
  for (int64_t ax : a.axes) axes.push_back(static_cast<size_t>(normalize_axis(ax, static_cast<int64_t>(rank), "axes")));
  if (a.axes.empty())
    for (size_t i = 0; i < rank; ++i) axes.push_back(i);
  for (size_t i = 0; i < axes.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      MRT_CHECK_ARG(axes[i] != axes[j], "attribute axes names axis ", axes[i], " twice");

  const Tensor* roi_t = nullptr;
  const Tensor* scales_t = nullptr;
  const Tensor* sizes_t = nullptr;
  std::vector<double> scales;
  if (upsample && ctx.opset() < 9) {
    for (float f : n.attr_floats("scales")) scales.push_back(f);
  } else if (upsample || ctx.opset() < 11) {
    scales_t = &ctx.input(1);
  } else {
    roi_t = ctx.optional_input(1);
    scales_t = ctx.optional_input(2);
    sizes_t = ctx.optional_input(3);
  }
  if (scales_t && scales_t->numel() > 0) scales = float_values(*scales_t, "scales");
  std::vector<int64_t> sizes;
  if (sizes_t && sizes_t->numel() > 0) sizes = sizes_t->to_int64_vector();
  MRT_CHECK_ARG(scales.empty() != sizes.empty(), "exactly one of scales and sizes must be given (scales has ",
                scales.size(), " values, sizes ", sizes.size(), ")");
  const size_t want = axes.size();
  MRT_CHECK_ARG(scales.empty() || scales.size() == want, "scales has ", scales.size(), " values but ", want,
                " axes are resized (input ", X.describe(), ")");
  MRT_CHECK_ARG(sizes.empty() || sizes.size() == want, "sizes has ", sizes.size(), " values but ", want,
                " axes are resized (input ", X.describe(), ")");
  std::vector<double> roi;
  if (a.coord == Coord::kTfCropAndResize) {
    MRT_CHECK_ARG(roi_t && roi_t->numel() == static_cast<int64_t>(2 * want), "coordinate_transformation_mode "
                  "tf_crop_and_resize needs an roi of ", 2 * want, " values, got ",
                  roi_t ? roi_t->describe() : std::string("none"));
    roi = float_values(*roi_t, "roi");
  }

  std::vector<AxisPlan> plan(want);
  for (size_t i = 0; i < want; ++i) {
    AxisPlan& p = plan[i];
    p.axis = axes[i];
    p.in = X.dim(axes[i]);
    if (!roi.empty()) {
      p.roi_start = roi[i];
      p.roi_end = roi[want + i];
    }
  }
  if (!scales.empty()) {
    for (size_t i = 0; i < want; ++i) {
      MRT_CHECK_ARG(scales[i] > 0 && std::isfinite(scales[i]), "scale ", scales[i], " for axis ", plan[i].axis,
                    " must be positive");
      plan[i].scale = scales[i];
      // float32 scales multiply in float32 (as onnxruntime does: 0.7f * 10 is 7, not 6.99...)
      const double len = scales_t && scales_t->dtype() == DType::kFloat
                             ? static_cast<double>(static_cast<float>(scales[i]) * static_cast<float>(plan[i].in))
                             : scales[i] * static_cast<double>(plan[i].in);
      plan[i].out = output_size(std::floor(len), plan[i].axis);
    }
  } else {
    for (size_t i = 0; i < want; ++i) {
      MRT_CHECK_ARG(sizes[i] >= 0, "size ", sizes[i], " for axis ", plan[i].axis, " is negative");
      MRT_CHECK_ARG(plan[i].in > 0 || sizes[i] == 0, "cannot resize the empty axis ", plan[i].axis, " of ",
                    X.describe(), " to ", sizes[i]);
      plan[i].scale = plan[i].in ? static_cast<double>(sizes[i]) / static_cast<double>(plan[i].in) : 1.0;
      plan[i].out = sizes[i];
    }
    if (a.aspect != Aspect::kStretch) {
      double s = plan[0].scale;
      for (const AxisPlan& p : plan) s = a.aspect == Aspect::kNotLarger ? std::min(s, p.scale) : std::max(s, p.scale);
      for (AxisPlan& p : plan) {
        p.scale = s;
        p.out = output_size(s * static_cast<double>(p.in) + 0.5, p.axis);
      }
    }
  }
  for (const AxisPlan& p : plan)
    MRT_CHECK_ARG(p.out > 0 || p.in == 0 || p.out == 0, "axis ", p.axis, " would get size ", p.out);
  return plan;
}

template <class C, class T>
void resize_numeric(OpContext& ctx, const Attrs& a, const std::vector<AxisPlan>& plan, const Tensor& X, Tensor& Y) {
  constexpr bool kSame = std::is_same<C, T>::value;  // float/double: read X and write Y in place
  std::vector<const AxisPlan*> passes;
  for (const AxisPlan& p : plan)
    if (!is_identity(p)) passes.push_back(&p);
  if (passes.empty()) {
    std::memcpy(Y.raw(), X.raw(), Y.nbytes());
    return;
  }
  Shape shape = X.shape();
  std::vector<C> widened, cur, next;
  const C* src;
  if constexpr (kSame) {
    src = X.data<T>();
  } else {
    widened.resize(static_cast<size_t>(X.numel()));
    const T* x = X.data<T>();
    for (size_t i = 0; i < widened.size(); ++i) widened[i] = static_cast<C>(norm::load(x[i]));
    src = widened.data();
  }
  const size_t rank = shape.size();
  if (passes.size() == 2 && rank >= 2 && passes[0]->axis == rank - 2 && passes[1]->axis == rank - 1) {
    C* dst = nullptr;
    if constexpr (kSame) {
      dst = reinterpret_cast<C*>(Y.data<T>());
    } else {
      cur.resize(static_cast<size_t>(Y.numel()));
      dst = cur.data();
    }
    if (Y.numel() > 0) resize_last_two<C>(a, *passes[0], *passes[1], src, dst, norm::prod(shape, 0, rank - 2), ctx.threads());
    passes.clear();
  }
  for (size_t k = 0; k < passes.size(); ++k) {
    const AxisPlan& p = *passes[k];
    const int64_t outer = norm::prod(shape, 0, p.axis), inner = norm::prod(shape, p.axis + 1, shape.size());
    const bool last = k + 1 == passes.size();
    C* dst;
    if (last && kSame) {
      dst = reinterpret_cast<C*>(Y.data<T>());
    } else {
      next.resize(static_cast<size_t>(outer * p.out * inner));
      dst = next.data();
    }
    if (outer * p.out * inner > 0) resize_axis<C>(a, p, src, dst, outer, inner, ctx.threads());
    shape[p.axis] = p.out;
    if (!(last && kSame)) {
      cur.swap(next);
      src = cur.data();
    }
  }
  if constexpr (!kSame) {
    T* y = Y.data<T>();
    for (size_t i = 0; i < cur.size(); ++i) y[i] = norm::store<T>(cur[i]);
  }
}

template <class T>
void resize_integer(OpContext& ctx, const Attrs& a, const std::vector<AxisPlan>& plan, const Tensor& X, Tensor& Y) {
  Shape shape = X.shape();
  std::vector<double> cur(static_cast<size_t>(X.numel()));
  const T* x = X.data<T>();
  for (size_t i = 0; i < cur.size(); ++i) cur[i] = static_cast<double>(x[i]);
  std::vector<double> next;
  for (const AxisPlan& p : plan) {
    if (is_identity(p)) continue;
    const int64_t outer = norm::prod(shape, 0, p.axis), inner = norm::prod(shape, p.axis + 1, shape.size());
    next.assign(static_cast<size_t>(outer * p.out * inner), 0.0);
    if (!next.empty()) resize_axis<double>(a, p, cur.data(), next.data(), outer, inner, ctx.threads());
    cur.swap(next);
    shape[p.axis] = p.out;
  }
  T* y = Y.data<T>();
  const double lo = static_cast<double>(std::numeric_limits<T>::lowest());
  const double hi = static_cast<double>(std::numeric_limits<T>::max());
  for (size_t i = 0; i < cur.size(); ++i) {
    const double r = std::nearbyint(cur[i]);
    y[i] = static_cast<T>(r < lo ? lo : r > hi ? hi : r);
  }
}

void resize_kernel(OpContext& ctx) {
  const Attrs a = read_attrs(ctx.node(), ctx.opset());
  const Tensor& X = ctx.input(0);
  const std::vector<AxisPlan> plan = plan_resize(ctx, a, X);
  Shape out_shape = X.shape();
  for (const AxisPlan& p : plan) out_shape[p.axis] = p.out;
  Tensor& Y = ctx.output(0, X.dtype(), out_shape);
  if (Y.numel() == 0) return;
  if (a.mode == Mode::kNearest) {
    MRT_CHECK_IMPL(dtype_is_storable(X.dtype()) && X.dtype() != DType::kString, "Resize: element type ",
                   dtype_name(X.dtype()), " is not supported");
    nearest_gather(ctx, a, plan, X, Y);
    return;
  }
  switch (X.dtype()) {
    case DType::kFloat: resize_numeric<float, float>(ctx, a, plan, X, Y); break;
    case DType::kDouble: resize_numeric<double, double>(ctx, a, plan, X, Y); break;
    case DType::kFloat16: resize_numeric<float, Float16>(ctx, a, plan, X, Y); break;
    case DType::kBFloat16: resize_numeric<float, BFloat16>(ctx, a, plan, X, Y); break;
    case DType::kInt8: resize_integer<int8_t>(ctx, a, plan, X, Y); break;
    case DType::kUInt8: resize_integer<uint8_t>(ctx, a, plan, X, Y); break;
    case DType::kInt16: resize_integer<int16_t>(ctx, a, plan, X, Y); break;
    case DType::kUInt16: resize_integer<uint16_t>(ctx, a, plan, X, Y); break;
    case DType::kInt32: resize_integer<int32_t>(ctx, a, plan, X, Y); break;
    case DType::kUInt32: resize_integer<uint32_t>(ctx, a, plan, X, Y); break;
    case DType::kInt64: resize_integer<int64_t>(ctx, a, plan, X, Y); break;
    case DType::kUInt64: resize_integer<uint64_t>(ctx, a, plan, X, Y); break;
    default:
      fail(MRT_NOT_IMPLEMENTED, "Resize: ", a.mode == Mode::kLinear ? "linear" : "cubic", " mode on element type ",
           dtype_name(X.dtype()), " is not supported");
  }
}

}  // namespace

void register_resize_kernels(KernelRegistry& r) {
  r.add("Resize", 10, resize_kernel, resize_check);
  r.add("Upsample", 7, resize_kernel, resize_check, 9);
}

}  // namespace mrt
