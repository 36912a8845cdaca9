// Kernel group: shape — TopK (opset 1: k attribute; 10+: k input; 11+: largest/sorted).
// Ties keep the lower index first; the result is always sorted (allowed when sorted=0).
#include <algorithm>
#include <cmath>

#include "../kernel.h"
#include "shape_common.h"

namespace mrt {
namespace shape_kernels {
namespace {

template <class T> inline auto topk_key(T v) { return v; }
inline float topk_key(Float16 v) { return half_to_float(v.bits); }
inline float topk_key(BFloat16 v) { return bfloat16_to_float(v.bits); }

// Up to this k, the best k are kept by insertion (keep_best below) instead of a partial sort of the whole row.
constexpr int64_t kSmallK = 16;

template <class T>
void topk_typed(OpContext& ctx, const Tensor& x, int64_t axis, int64_t k, bool largest, Tensor& vals, Tensor& inds) {
  const Shape& s = x.shape();
  const int64_t n = s[static_cast<size_t>(axis)];
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= s[static_cast<size_t>(i)];
  for (size_t i = static_cast<size_t>(axis) + 1; i < s.size(); ++i) inner *= s[i];
  const T* src = static_cast<const T*>(x.raw());
  T* vo = static_cast<T*>(vals.raw());
  int64_t* io = inds.data<int64_t>();
  using K = decltype(topk_key(T{}));
  maybe_parallel(ctx, outer * inner, x.numel() * 4, [&](int64_t b, int64_t e) {
    std::vector<std::pair<K, int64_t>> buf(static_cast<size_t>(n));
    for (int64_t it = b; it < e; ++it) {
      const int64_t o = it / inner, in = it % inner;
      const T* p = src + o * n * inner + in;
      const bool small_k = k <= kSmallK && k < n;
      for (int64_t j = 0; j < (small_k ? k : n); ++j) buf[static_cast<size_t>(j)] = {topk_key(p[j * inner]), j};
      // NaN ranks above every number for largest and below for smallest is not
      // specified by ONNX; NaNs are treated as the largest value either way.
      auto greater = [](const std::pair<K, int64_t>& a, const std::pair<K, int64_t>& c) {
        if constexpr (std::is_floating_point<K>::value) {
          bool an = std::isnan(a.first), cn = std::isnan(c.first);
          if (an || cn) return an && !cn ? true : (an && cn ? a.second < c.second : false);
        }
        return a.first > c.first || (a.first == c.first && a.second < c.second);
      };
      auto less = [](const std::pair<K, int64_t>& a, const std::pair<K, int64_t>& c) {
        if constexpr (std::is_floating_point<K>::value) {
          bool an = std::isnan(a.first), cn = std::isnan(c.first);
          if (an || cn) return !an && cn ? true : (an && cn ? a.second < c.second : false);
        }
        return a.first < c.first || (a.first == c.first && a.second < c.second);
      };
      if (small_k) {
        // a few of many (a classifier's top 5): the best k so far kept sorted in buf[0, k), each later value
        // compared with the k-th and inserted in order when it goes before it (most are not: a plain comparison
        // with the k-th value turns them away, NaN and equal values going on to the full order); ties keep the
        // lower index first, as the partial sort's order does
        auto keep_best = [&](auto before, auto turned_away) {
          std::sort(buf.begin(), buf.begin() + k, before);
          K kth = buf[static_cast<size_t>(k - 1)].first;
          for (int64_t j = k; j < n; ++j) {
            const K key = topk_key(p[j * inner]);
            if (turned_away(key, kth)) continue;
            const std::pair<K, int64_t> v{key, j};
            if (!before(v, buf[static_cast<size_t>(k - 1)])) continue;
            int64_t at = k - 1;
            for (; at > 0 && before(v, buf[static_cast<size_t>(at - 1)]); --at) buf[static_cast<size_t>(at)] = buf[static_cast<size_t>(at - 1)];
            buf[static_cast<size_t>(at)] = v;
            kth = buf[static_cast<size_t>(k - 1)].first;
          }
        };
        // (false for NaN on either side: the full order decides)
        if (largest) keep_best(greater, [](K a, K b) { return a < b; });
        else keep_best(less, [](K a, K b) { return a > b; });
      } else if (largest) {
        std::partial_sort(buf.begin(), buf.begin() + k, buf.end(), greater);
      } else {
        std::partial_sort(buf.begin(), buf.begin() + k, buf.end(), less);
      }
      T* vrow = vo + o * k * inner + in;
      int64_t* irow = io + o * k * inner + in;
      for (int64_t j = 0; j < k; ++j) {
        const int64_t src_j = buf[static_cast<size_t>(j)].second;
        vrow[j * inner] = p[src_j * inner];
        irow[j * inner] = src_j;
      }
    }
  });
}

void topk_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Node& node = ctx.node();
  const int64_t r = static_cast<int64_t>(x.rank());
  MRT_CHECK_ARG(r >= 1, "input must have rank >= 1, got ", x.describe());
  const int64_t axis = checked_axis(node.attr_int("axis", -1), r, "axis");
  int64_t k;
  if (ctx.opset() < 10) {
    k = node.require_int("k");
  } else {
    const Tensor& kt = ctx.input(1);
    MRT_CHECK_ARG(kt.numel() == 1, "K must hold one value, got ", kt.describe());
    k = kt.int_at(0);
  }
  const int64_t n = x.dim(static_cast<size_t>(axis));
  MRT_CHECK_ARG(k >= 0 && k <= n, "k ", k, " is out of range for axis ", axis, " of ", x.describe());
  const bool largest = ctx.opset() < 11 || node.attr_int("largest", 1) != 0;
  Shape out = x.shape();
  out[static_cast<size_t>(axis)] = k;
  Tensor& vals = ctx.output(0, x.dtype(), out);
  Tensor& inds = ctx.output(1, DType::kInt64, out);
  if (vals.numel() == 0) return;
  switch (x.dtype()) {
    MRT_DTYPE_CASE(kFloat, float, topk_typed<T>(ctx, x, axis, k, largest, vals, inds))
    MRT_DTYPE_CASE(kDouble, double, topk_typed<T>(ctx, x, axis, k, largest, vals, inds))
    MRT_DTYPE_CASE(kFloat16, Float16, topk_typed<T>(ctx, x, axis, k, largest, vals, inds))
    MRT_DTYPE_CASE(kBFloat16, BFloat16, topk_typed<T>(ctx, x, axis, k, largest, vals, inds))
    MRT_DISPATCH_INTEGER_CASES(topk_typed<T>(ctx, x, axis, k, largest, vals, inds))
    MRT_DISPATCH_FAIL(x.dtype(), "TopK");
  }
}

}  // namespace

void register_topk_ops(KernelRegistry& r) { r.add("TopK", 1, topk_kernel); }

}  // namespace shape_kernels
}  // namespace mrt
