// Kernel group: shape — newer data-movement ops: BitCast, CenterCropPad, TensorScatter
// (KV-cache updates) and Unique.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string_view>

#include "../kernel.h"
#include "shape_common.h"

namespace mrt {
namespace shape_kernels {
namespace {

// ---- BitCast ----------------------------------------------------------------------------------

DType bitcast_target(const Node& node) {
  const int64_t to = node.require_int("to");
  if (!dtype_is_known(static_cast<int32_t>(to)) || !dtype_is_plain(static_cast<DType>(to)) ||
      dtype_size(static_cast<DType>(to)) == 0)
    fail(MRT_NOT_IMPLEMENTED, node.label(), ": BitCast to element type ", to, " is not supported");
  return static_cast<DType>(to);
}

void bitcast_check(const Node& node, int64_t) { (void)bitcast_target(node); }

void bitcast_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const DType to = bitcast_target(ctx.node());
  MRT_CHECK_IMPL(x.dtype() != DType::kString, "BitCast from string is not supported");
  const size_t es = element_size(x, "BitCast");
  MRT_CHECK_ARG(dtype_size(to) == es, "BitCast from ", dtype_name(x.dtype()), " to ", dtype_name(to),
                " changes the element width");
  Tensor& y = ctx.output(0, to, x.shape());
  if (y.nbytes()) std::memcpy(y.raw(), x.raw(), y.nbytes());
}

// ---- CenterCropPad -------------------------------------------------------------------------------

void center_crop_pad_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& st = ctx.input(1);
  MRT_CHECK_ARG(st.rank() == 1, "shape must be 1-D, got ", st.describe());
  std::vector<int64_t> target = read_int64s(st, "shape");
  const int64_t r = static_cast<int64_t>(x.rank());
  std::vector<int64_t> axes = ctx.node().attr_ints("axes");
  if (!ctx.node().has_attr("axes")) {
    axes.resize(static_cast<size_t>(r));
    std::iota(axes.begin(), axes.end(), 0);
  }
  MRT_CHECK_ARG(axes.size() == target.size(), "shape ", shape_str(target), " must have one entry per axis in ",
                shape_str(axes));
  Shape out = x.shape();
  std::vector<bool> used(static_cast<size_t>(r), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    const size_t a = static_cast<size_t>(checked_axis(axes[i], r, "axes entry"));
    MRT_CHECK_ARG(!used[a], "axes ", shape_str(axes), " repeat an axis");
    used[a] = true;
    MRT_CHECK_ARG(target[i] >= 0, "shape ", shape_str(target), " has a negative dimension");
    out[a] = target[i];
  }
  // The output first: its allocation checks the size against the tensor limit, which then bounds every
  // per-axis map below (an empty output needs none, whatever the other dimensions say).
  Tensor& y = ctx.output(0, x.dtype(), out);
  if (y.numel() == 0) return;
  std::vector<std::vector<int64_t>> maps(static_cast<size_t>(r));
  for (size_t k = 0; k < static_cast<size_t>(r); ++k) {
    const int64_t d = x.dim(k), t = out[k];
    maps[k].resize(static_cast<size_t>(t));
    // Crop: the window starts at floor((d - t) / 2). Pad: floor((t - d) / 2) before.
    const int64_t shift = d >= t ? (d - t) / 2 : -((t - d) / 2);
    for (int64_t o = 0; o < t; ++o) {
      int64_t s = o + shift;
      maps[k][static_cast<size_t>(o)] = s >= 0 && s < d ? s : -1;
    }
  }
  const unsigned char zero[8] = {0};
  gather_by_axis_maps(ctx, x, maps, zero, y);
}

// ---- TensorScatter ---------------------------------------------------------------------------------

void tensor_scatter_check(const Node& node, int64_t) {
  std::string m = node.attr_string("mode", "linear");
  if (m != "linear" && m != "circular")
    fail(MRT_NOT_IMPLEMENTED, node.label(), ": TensorScatter mode '", m, "' is not supported");
}

void tensor_scatter_kernel(OpContext& ctx) {
  const Tensor& past = ctx.input(0);
  const Tensor& upd = ctx.input(1);
  const int64_t r = static_cast<int64_t>(past.rank());
  MRT_CHECK_ARG(r >= 2, "past_cache must have rank >= 2, got ", past.describe());
  MRT_CHECK_ARG(upd.dtype() == past.dtype() && upd.rank() == past.rank(), "update ", upd.describe(),
                " must match past_cache ", past.describe(), " in type and rank");
  const int64_t axis = checked_axis(ctx.node().attr_int("axis", -2), r, "axis");
  MRT_CHECK_ARG(axis >= 1, "axis must not be the batch axis");
  for (int64_t k = 0; k < r; ++k)
    MRT_CHECK_ARG(k == axis || upd.dim(static_cast<size_t>(k)) == past.dim(static_cast<size_t>(k)), "update ",
                  upd.describe(), " differs from past_cache ", past.describe(), " outside axis ", axis);
  const bool circular = ctx.node().attr_string("mode", "linear") == "circular";
  const int64_t batch = past.dim(0);
  const int64_t max_len = past.dim(static_cast<size_t>(axis));
  const int64_t seq = upd.dim(static_cast<size_t>(axis));
  MRT_CHECK_ARG(seq <= max_len, "update ", upd.describe(), " is longer than the cache ", past.describe());
  std::vector<int64_t> wi(static_cast<size_t>(batch), 0);
  if (const Tensor* w = ctx.optional_input(2)) {
    MRT_CHECK_ARG(w->rank() == 1 && w->dim(0) == batch, "write_indices ", w->describe(), " must have shape [",
                  batch, "]");
    wi = read_int64s(*w, "write_indices");
  }
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t w = wi[static_cast<size_t>(b)];
    MRT_CHECK_ARG(w >= 0 && (circular ? w < std::max<int64_t>(max_len, 1) || seq == 0 : w + seq <= max_len),
                  "write index ", w, " for batch ", b, " does not fit ", seq, " entries into a cache of length ",
                  max_len);
  }
  const size_t es = element_size(past, "TensorScatter");
  Tensor& y = ctx.output(0, past.dtype(), past.shape());
  if (y.nbytes()) std::memcpy(y.raw(), past.raw(), y.nbytes());
  if (upd.numel() == 0) return;
  int64_t prefix = 1, inner = 1;
  for (int64_t k = 1; k < axis; ++k) prefix *= past.dim(static_cast<size_t>(k));
  for (int64_t k = axis + 1; k < r; ++k) inner *= past.dim(static_cast<size_t>(k));
  const size_t block = static_cast<size_t>(inner) * es;
  char* dst = static_cast<char*>(y.raw());
  const char* src = static_cast<const char*>(upd.raw());
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t p = 0; p < prefix; ++p) {
      const int64_t row = b * prefix + p;
      for (int64_t s = 0; s < seq; ++s) {
        int64_t c = wi[static_cast<size_t>(b)] + s;
        if (circular) c %= max_len;
        std::memcpy(dst + static_cast<size_t>(row * max_len + c) * block,
                    src + static_cast<size_t>(row * seq + s) * block, block);
      }
    }
}

// ---- Unique -------------------------------------------------------------------------------------------

template <class T> inline auto unique_key(T v) { return v; }
inline float unique_key(Float16 v) { return half_to_float(v.bits); }
inline float unique_key(BFloat16 v) { return bfloat16_to_float(v.bits); }
inline std::string_view unique_key(const std::string* v) { return v ? std::string_view(*v) : std::string_view(); }

// Strict weak order with NaN after every number (NaNs compare equal to each other).
template <class K>
inline bool key_less(K a, K b) {
  if constexpr (std::is_floating_point<K>::value) {
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
  }
  return a < b;
}

template <class T>
void unique_typed(OpContext& ctx, const Tensor& x, bool has_axis, int64_t axis, bool sorted) {
  const T* p = static_cast<const T*>(x.raw());
  // Items are elements (no axis) or the slices x[..., i, ...] along axis, compared as
  // rows of `outer x inner` elements.
  int64_t n, outer = 1, inner = 1;
  if (has_axis) {
    n = x.dim(static_cast<size_t>(axis));
    for (int64_t k = 0; k < axis; ++k) outer *= x.dim(static_cast<size_t>(k));
    for (size_t k = static_cast<size_t>(axis) + 1; k < x.rank(); ++k) inner *= x.dim(k);
  } else {
    n = x.numel();
  }
  auto at = [&](int64_t item, int64_t j) {  // element j of item's row
    return unique_key(p[((j / inner) * n + item) * inner + j % inner]);
  };
  const int64_t width = outer * inner;
  auto less = [&](int64_t a, int64_t b) {
    for (int64_t j = 0; j < width; ++j) {
      auto va = at(a, j), vb = at(b, j);
      if (key_less(va, vb)) return true;
      if (key_less(vb, va)) return false;
    }
    return false;
  };
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), less);
  // Groups of equal items; stable sorting puts each group's first occurrence first.
  std::vector<int64_t> first, count, group_of(static_cast<size_t>(n));
  for (size_t i = 0; i < order.size(); ++i) {
    if (i == 0 || less(order[i - 1], order[i])) {
      first.push_back(order[i]);
      count.push_back(0);
    }
    ++count.back();
    group_of[static_cast<size_t>(order[i])] = static_cast<int64_t>(first.size()) - 1;
  }
  const int64_t u = static_cast<int64_t>(first.size());
  std::vector<int64_t> rank(static_cast<size_t>(u));  // group -> output position
  std::iota(rank.begin(), rank.end(), 0);
  if (!sorted) {
    std::vector<int64_t> g(static_cast<size_t>(u));
    std::iota(g.begin(), g.end(), 0);
    std::sort(g.begin(), g.end(),
              [&](int64_t a, int64_t b) { return first[static_cast<size_t>(a)] < first[static_cast<size_t>(b)]; });
    for (int64_t i = 0; i < u; ++i) rank[static_cast<size_t>(g[static_cast<size_t>(i)])] = i;
  }
  std::vector<int64_t> pos_first(static_cast<size_t>(u)), pos_count(static_cast<size_t>(u));
  for (int64_t g = 0; g < u; ++g) {
    pos_first[static_cast<size_t>(rank[static_cast<size_t>(g)])] = first[static_cast<size_t>(g)];
    pos_count[static_cast<size_t>(rank[static_cast<size_t>(g)])] = count[static_cast<size_t>(g)];
  }
  Shape yshape = has_axis ? x.shape() : Shape{u};
  if (has_axis) yshape[static_cast<size_t>(axis)] = u;
  Tensor& y = ctx.output(0, x.dtype(), yshape);
  T* yp = static_cast<T*>(y.raw());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < u; ++i)
      for (int64_t j = 0; j < inner; ++j)
        yp[(o * u + i) * inner + j] = p[(o * n + pos_first[static_cast<size_t>(i)]) * inner + j];
  auto write = [&](size_t idx, const std::vector<int64_t>& v) {
    if (ctx.output_count() <= idx || !ctx.has_output(idx)) return;
    Tensor& t = ctx.output(idx, DType::kInt64, {static_cast<int64_t>(v.size())});
    if (!v.empty()) std::memcpy(t.raw(), v.data(), v.size() * sizeof(int64_t));
  };
  write(1, pos_first);
  if (ctx.output_count() > 2 && ctx.has_output(2)) {
    std::vector<int64_t> inv(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      inv[static_cast<size_t>(i)] = rank[static_cast<size_t>(group_of[static_cast<size_t>(i)])];
    write(2, inv);
  }
  write(3, pos_count);
}

void unique_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const bool has_axis = ctx.node().has_attr("axis");
  int64_t axis = 0;
  if (has_axis) axis = checked_axis(ctx.node().attr_int("axis", 0), static_cast<int64_t>(x.rank()), "axis");
  const bool sorted = ctx.node().attr_int("sorted", 1) != 0;
  switch (x.dtype()) {
    MRT_DTYPE_CASE(kFloat, float, unique_typed<T>(ctx, x, has_axis, axis, sorted))
    MRT_DTYPE_CASE(kDouble, double, unique_typed<T>(ctx, x, has_axis, axis, sorted))
    MRT_DTYPE_CASE(kBool, bool, unique_typed<T>(ctx, x, has_axis, axis, sorted))
    MRT_DTYPE_CASE(kFloat16, Float16, unique_typed<T>(ctx, x, has_axis, axis, sorted))
    MRT_DTYPE_CASE(kBFloat16, BFloat16, unique_typed<T>(ctx, x, has_axis, axis, sorted))
    MRT_DTYPE_CASE(kString, const std::string*, unique_typed<T>(ctx, x, has_axis, axis, sorted))
    MRT_DISPATCH_INTEGER_CASES(unique_typed<T>(ctx, x, has_axis, axis, sorted))
    MRT_DISPATCH_FAIL(x.dtype(), "Unique");
  }
}

}  // namespace

void register_extra_ops(KernelRegistry& r) {
  r.add("BitCast", 26, bitcast_kernel, bitcast_check);
  r.add("CenterCropPad", 18, center_crop_pad_kernel);
  r.add("TensorScatter", 24, tensor_scatter_kernel, tensor_scatter_check);
  r.add("Unique", 11, unique_kernel);
}

}  // namespace shape_kernels
}  // namespace mrt
