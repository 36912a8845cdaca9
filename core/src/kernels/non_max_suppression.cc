// NonMaxSuppression (opsets 10/11): per batch and class, boxes whose score exceeds
// score_threshold (when given) are visited by descending score (ties: lower box index
// first); a box is kept unless its IoU with an already kept box of the class exceeds
// iou_threshold, until max_output_boxes_per_class are kept (absent or 0: none).
// center_point_box 0 reads [y1, x1, y2, x2] (either corner order), 1 reads
// [x_center, y_center, width, height]. Output: [kept, 3] int64 (batch, class, box).
#include <algorithm>
#include <numeric>

#include "norm_util.h"

namespace mrt {
namespace {

struct Corners {
  double x0, y0, x1, y1;
};

Corners corners(const double* b, bool center) {
  if (center) return {b[0] - b[2] / 2, b[1] - b[3] / 2, b[0] + b[2] / 2, b[1] + b[3] / 2};
  return {std::min(b[1], b[3]), std::min(b[0], b[2]), std::max(b[1], b[3]), std::max(b[0], b[2])};
}

bool suppresses(const Corners& a, const Corners& b, double iou_threshold) {
  const double ix0 = std::max(a.x0, b.x0), ix1 = std::min(a.x1, b.x1);
  if (ix1 <= ix0) return false;
  const double iy0 = std::max(a.y0, b.y0), iy1 = std::min(a.y1, b.y1);
  if (iy1 <= iy0) return false;
  const double inter = (ix1 - ix0) * (iy1 - iy0);
  const double area_a = (a.x1 - a.x0) * (a.y1 - a.y0), area_b = (b.x1 - b.x0) * (b.y1 - b.y0);
  const double uni = area_a + area_b - inter;
  if (inter <= 0 || area_a <= 0 || area_b <= 0 || uni <= 0) return false;
  return inter / uni > iou_threshold;
}

void nms_check(const Node& n, int64_t) {
  const int64_t c = n.attr_int("center_point_box", 0);
  MRT_ENFORCE(c == 0 || c == 1, MRT_INVALID_MODEL, n.label(), ": attribute center_point_box must be 0 or 1, got ", c);
}

void nms_kernel(OpContext& ctx) {
  const Tensor& boxes = ctx.input(0);
  const Tensor& scores = ctx.input(1);
  const bool center = ctx.node().attr_int("center_point_box", 0) != 0;
  MRT_CHECK_ARG(boxes.rank() == 3 && boxes.dim(2) == 4, "NonMaxSuppression: boxes must be [batch, boxes, 4], got ",
                boxes.describe());
  MRT_CHECK_ARG(scores.rank() == 3 && scores.dim(0) == boxes.dim(0) && scores.dim(2) == boxes.dim(1),
                "NonMaxSuppression: scores ", scores.describe(), " must be [", boxes.dim(0), ", classes, ",
                boxes.dim(1), "]");
  int64_t max_out = 0;
  if (const Tensor* m = ctx.optional_input(2); m && m->numel() > 0) max_out = std::max<int64_t>(m->int_at(0), 0);
  double iou = 0, score_th = 0;
  if (const Tensor* t = ctx.optional_input(3); t && t->numel() > 0) iou = t->scalar_as_double(0);
  MRT_CHECK_ARG(iou >= 0 && iou <= 1, "NonMaxSuppression: iou_threshold ", iou, " is outside [0, 1]");
  const Tensor* st = ctx.optional_input(4);
  const bool has_score_th = st && st->numel() > 0;
  if (has_score_th) score_th = st->scalar_as_double(0);
  const std::vector<double> bx = norm::to_doubles(boxes, "NonMaxSuppression boxes");
  const std::vector<double> sc = norm::to_doubles(scores, "NonMaxSuppression scores");
  const int64_t B = boxes.dim(0), N = boxes.dim(1), C = scores.dim(1);
  std::vector<int64_t> out;
  std::vector<Corners> cs(static_cast<size_t>(N));
  std::vector<int64_t> order, kept;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t i = 0; i < N; ++i) cs[static_cast<size_t>(i)] = corners(&bx[static_cast<size_t>((b * N + i) * 4)], center);
    for (int64_t c = 0; c < C && max_out > 0; ++c) {
      const double* s = &sc[static_cast<size_t>((b * C + c) * N)];
      order.clear();
      for (int64_t i = 0; i < N; ++i)
        if (!has_score_th || s[i] > score_th) order.push_back(i);
      std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return s[x] > s[y]; });
      kept.clear();
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
        bool keep = true;
        for (int64_t k : kept)
          if (suppresses(cs[static_cast<size_t>(i)], cs[static_cast<size_t>(k)], iou)) {
            keep = false;
            break;
          }
        if (!keep) continue;
        kept.push_back(i);
        out.insert(out.end(), {b, c, i});
      }
    }
  }
  Tensor& Y = ctx.output(0, DType::kInt64, Shape{static_cast<int64_t>(out.size() / 3), 3});
  if (!out.empty()) std::copy(out.begin(), out.end(), Y.data<int64_t>());
}

}  // namespace

void register_nms_kernels(KernelRegistry& r) { r.add("NonMaxSuppression", 10, nms_kernel, nms_check); }

}  // namespace mrt
