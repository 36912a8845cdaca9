// RoiAlign (opsets 10/16/22): per region of interest [x1, y1, x2, y2] (scaled by
// spatial_scale, shifted by half a pixel with coordinate_transformation_mode
// half_pixel, opset 16+; output_half_pixel keeps them and clamps the size to >= 1) and
// output bin, a sampling_ratio x sampling_ratio grid (adaptive ceil(size / bins) when 0)
// of bilinear samples is averaged (mode avg) or reduced with max (mode max: the largest
// of the four weighted corner terms, onnxruntime's definition). Samples more than one
// pixel outside the input contribute 0.
#include <algorithm>
#include <cmath>

#include "../resource_limits.h"
#include "norm_util.h"

namespace mrt {
namespace {

struct RoiAttrs {
  bool max_mode = false;
  bool half_pixel = true;
  int64_t oh = 1, ow = 1, sampling = 0;
  double scale = 1.0;
};

RoiAttrs read_roi_attrs(const Node& n, int64_t opset) {
  RoiAttrs a;
  const std::string mode = n.attr_string("mode", "avg");
  MRT_ENFORCE(mode == "avg" || mode == "max", MRT_INVALID_MODEL, n.label(), ": attribute mode is '", mode,
              "'; expected avg or max");
  a.max_mode = mode == "max";
  const std::string ctm = n.attr_string("coordinate_transformation_mode", opset >= 16 ? "half_pixel" : "output_half_pixel");
  MRT_ENFORCE(ctm == "half_pixel" || ctm == "output_half_pixel", MRT_INVALID_MODEL, n.label(),
              ": attribute coordinate_transformation_mode is '", ctm, "'; expected half_pixel or output_half_pixel");
  a.half_pixel = ctm == "half_pixel";
  a.oh = n.attr_int("output_height", 1);
  a.ow = n.attr_int("output_width", 1);
  a.sampling = n.attr_int("sampling_ratio", 0);
  a.scale = n.attr_float("spatial_scale", 1.f);
  MRT_ENFORCE(a.oh > 0 && a.ow > 0, MRT_INVALID_MODEL, n.label(), ": output_height/output_width must be positive, got ",
              a.oh, "x", a.ow);
  MRT_ENFORCE(a.sampling >= 0, MRT_INVALID_MODEL, n.label(), ": sampling_ratio must be >= 0, got ", a.sampling);
  return a;
}

void roi_check(const Node& n, int64_t opset) { (void)read_roi_attrs(n, opset); }

void roi_kernel(OpContext& ctx) {
  const RoiAttrs a = read_roi_attrs(ctx.node(), ctx.opset());
  const Tensor& X = ctx.input(0);
  const Tensor& R = ctx.input(1);
  const Tensor& BI = ctx.input(2);
  MRT_CHECK_ARG(X.rank() == 4, "RoiAlign: X must be [N, C, H, W], got ", X.describe());
  MRT_CHECK_ARG(R.rank() == 2 && R.dim(1) == 4, "RoiAlign: rois must be [num_rois, 4], got ", R.describe());
  MRT_CHECK_ARG(BI.rank() == 1 && BI.dim(0) == R.dim(0), "RoiAlign: batch_indices ", BI.describe(), " must have ",
                R.dim(0), " values");
  const int64_t N = X.dim(0), C = X.dim(1), H = X.dim(2), W = X.dim(3), K = R.dim(0);
  const std::vector<double> x = norm::to_doubles(X, "RoiAlign X");
  const std::vector<double> rois = norm::to_doubles(R, "RoiAlign rois");
  std::vector<double> y(checked_scratch({K, C, a.oh, a.ow}, sizeof(double), "RoiAlign output"));
  for (int64_t k = 0; k < K; ++k) {
    const int64_t b = BI.int_at(k);
    MRT_CHECK_ARG(b >= 0 && b < N, "RoiAlign: batch index ", b, " is outside [0, ", N, ")");
    const double off = a.half_pixel ? 0.5 : 0.0;
    const double* r = &rois[static_cast<size_t>(k * 4)];
    const double x0 = r[0] * a.scale - off, y0 = r[1] * a.scale - off;
    double rw = r[2] * a.scale - off - x0, rh = r[3] * a.scale - off - y0;
    if (!a.half_pixel) {
      rw = std::max(rw, 1.0);
      rh = std::max(rh, 1.0);
    }
    MRT_CHECK_ARG(std::isfinite(x0) && std::isfinite(y0) && std::isfinite(rw) && std::isfinite(rh), "RoiAlign: roi ",
                  k, " is not finite");
    const double bh = rh / static_cast<double>(a.oh), bw = rw / static_cast<double>(a.ow);
    // Adaptive sampling grid: ceil(roi extent / output extent) per axis; an inverted roi (possible with
    // half_pixel) samples nothing, and its bins are 0.
    const double gh_d = a.sampling > 0 ? static_cast<double>(a.sampling) : std::max(0.0, std::ceil(bh));
    const double gw_d = a.sampling > 0 ? static_cast<double>(a.sampling) : std::max(0.0, std::ceil(bw));
    const double total = gh_d * gw_d * static_cast<double>(a.oh) * static_cast<double>(a.ow);
    constexpr double kMaxSamples = double(int64_t{1} << 22);  // 4M samples (256 MB of weights) per roi
    MRT_CHECK_ARG(total <= kMaxSamples && gh_d <= kMaxSamples && gw_d <= kMaxSamples, "RoiAlign: roi ", k, " needs ",
                  gh_d, " x ", gw_d, " samples per bin, more than ", kMaxSamples,
                  " in all (a roi far larger than its output grid; set sampling_ratio)");
    const int64_t gh = static_cast<int64_t>(gh_d), gw = static_cast<int64_t>(gw_d);
    const double count = static_cast<double>(std::max<int64_t>(gh * gw, 1));
    struct Sample { int64_t p[4]; double w[4]; };
    std::vector<Sample> samples;
    for (int64_t ph = 0; ph < a.oh; ++ph)
      for (int64_t pw = 0; pw < a.ow; ++pw)
        for (int64_t iy = 0; iy < gh; ++iy)
          for (int64_t ix = 0; ix < gw; ++ix) {
            double yy = y0 + ph * bh + (iy + 0.5) * bh / static_cast<double>(gh);
            double xx = x0 + pw * bw + (ix + 0.5) * bw / static_cast<double>(gw);
            Sample s{{0, 0, 0, 0}, {0, 0, 0, 0}};
            if (!(yy < -1.0 || yy > H || xx < -1.0 || xx > W)) {
              yy = std::max(yy, 0.0);
              xx = std::max(xx, 0.0);
              int64_t yl = static_cast<int64_t>(yy), xl = static_cast<int64_t>(xx), yh, xh;
              if (yl >= H - 1) { yh = yl = H - 1; yy = static_cast<double>(yl); } else { yh = yl + 1; }
              if (xl >= W - 1) { xh = xl = W - 1; xx = static_cast<double>(xl); } else { xh = xl + 1; }
              const double ly = yy - yl, lx = xx - xl, hy = 1 - ly, hx = 1 - lx;
              s = {{yl * W + xl, yl * W + xh, yh * W + xl, yh * W + xh}, {hy * hx, hy * lx, ly * hx, ly * lx}};
            }
            samples.push_back(s);
          }
    for (int64_t c = 0; c < C; ++c) {
      const double* xp = &x[static_cast<size_t>((b * C + c) * H * W)];
      size_t si = 0;
      for (int64_t bin = 0; bin < a.oh * a.ow; ++bin) {
        double acc = 0;
        bool first = true;
        for (int64_t g = 0; g < gh * gw; ++g, ++si) {
          const Sample& s = samples[si];
          if (a.max_mode) {
            const double v = std::max({s.w[0] * xp[s.p[0]], s.w[1] * xp[s.p[1]], s.w[2] * xp[s.p[2]],
                                       s.w[3] * xp[s.p[3]]});
            acc = first ? v : std::max(acc, v);
            first = false;
          } else {
            acc += s.w[0] * xp[s.p[0]] + s.w[1] * xp[s.p[1]] + s.w[2] * xp[s.p[2]] + s.w[3] * xp[s.p[3]];
          }
        }
        y[static_cast<size_t>((k * C + c) * a.oh * a.ow + bin)] = a.max_mode ? acc : acc / count;
      }
    }
  }
  Tensor& Y = ctx.output(0, X.dtype(), Shape{K, C, a.oh, a.ow});
  norm::from_doubles(Y, y);
}

}  // namespace

void register_roi_align_kernels(KernelRegistry& r) { r.add("RoiAlign", 10, roi_kernel, roi_check); }

}  // namespace mrt
