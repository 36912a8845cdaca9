// Kernel group: shape — index-driven kernels: Gather, GatherElements, GatherND,
// ScatterElements (and the old Scatter), ScatterND, OneHot, NonZero, Compress.
// Every index is bounds-checked; a bad one is an INVALID_ARGUMENT naming it.
#include <algorithm>
#include <cmath>

#include "../kernel.h"
#include "shape_common.h"

namespace mrt {
namespace shape_kernels {
namespace {

// Wrap a possibly negative index into [0, d) or fail naming it.
inline int64_t checked_index(int64_t idx, int64_t d, const char* what, int64_t axis) {
  if (idx < -d || idx >= d)
    fail(MRT_INVALID_ARGUMENT, what, " ", idx, " is out of bounds for axis ", axis, " of size ", d);
  return idx < 0 ? idx + d : idx;
}

int64_t prod(const Shape& s, size_t b, size_t e) {
  int64_t p = 1;
  for (size_t i = b; i < e; ++i) p *= s[i];
  return p;
}

// ---- Gather ------------------------------------------------------------------------------------

void gather_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& it = ctx.input(1);
  const int64_t r = static_cast<int64_t>(x.rank());
  MRT_CHECK_ARG(r >= 1, "data must have rank >= 1, got ", x.describe());
  const int64_t axis = checked_axis(ctx.node().attr_int("axis", 0), r, "axis");
  const int64_t d = x.dim(static_cast<size_t>(axis));
  std::vector<int64_t> idx = read_int64s(it, "indices");
  for (int64_t& v : idx) v = checked_index(v, d, "index", axis);
  Shape out(x.shape().begin(), x.shape().begin() + axis);
  out.insert(out.end(), it.shape().begin(), it.shape().end());
  out.insert(out.end(), x.shape().begin() + axis + 1, x.shape().end());
  size_t es = element_size(x, "Gather");
  Tensor& y = ctx.output(0, x.dtype(), out);
  if (y.numel() == 0) return;
  const int64_t outer = prod(x.shape(), 0, static_cast<size_t>(axis));
  const int64_t inner = prod(x.shape(), static_cast<size_t>(axis) + 1, x.rank());
  const int64_t n = static_cast<int64_t>(idx.size());
  dispatch_by_size(es, "Gather", [&](auto tag) {
    using T = decltype(tag);
    const T* src = static_cast<const T*>(x.raw());
    T* dst = static_cast<T*>(y.raw());
    maybe_parallel(ctx, outer * n, y.numel(), [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k) {
        const int64_t o = k / n, j = k % n;
        const T* s = src + (o * d + idx[static_cast<size_t>(j)]) * inner;
        T* t = dst + k * inner;
        if (inner == 1)
          *t = *s;
        else
          std::memcpy(t, s, static_cast<size_t>(inner) * sizeof(T));
      }
    });
  });
}

// ---- GatherElements ------------------------------------------------------------------------------

void gather_elements_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& it = ctx.input(1);
  const size_t r = x.rank();
  MRT_CHECK_ARG(r >= 1 && it.rank() == r, "data ", x.describe(), " and indices ", it.describe(),
                " must have the same rank >= 1");
  const size_t axis =
      static_cast<size_t>(checked_axis(ctx.node().attr_int("axis", 0), static_cast<int64_t>(r), "axis"));
  for (size_t k = 0; k < r; ++k)
    MRT_CHECK_ARG(k == axis || it.dim(k) <= x.dim(k), "indices ", it.describe(), " exceed data ", x.describe(),
                  " on axis ", k);
  MRT_CHECK_ARG(it.dtype() == DType::kInt64 || it.dtype() == DType::kInt32, "indices must be int32 or int64, got ",
                it.describe());
  const int64_t d = x.dim(axis);
  size_t es = element_size(x, "GatherElements");
  Tensor& y = ctx.output(0, x.dtype(), it.shape());
  if (y.numel() == 0) return;
  std::vector<int64_t> xs = shape_strides(x.shape());
  const Shape& is = it.shape();
  // Rows of the indices' last axis: a row's offset in x (the axis's coordinate left out) found once per row, then
  // its elements gathered in one loop (an offset update per element, with a carry loop over every axis, took 4x
  // onnxruntime's time); rows split between the threads.
  const int64_t inner = is[r - 1], rows = y.numel() / inner;
  const int64_t step = axis == r - 1 ? 0 : xs[r - 1], along = xs[axis];
  dispatch_by_size(es, "GatherElements", [&](auto tag) {
    using T = decltype(tag);
    const T* src = static_cast<const T*>(x.raw());
    T* dst = static_cast<T*>(y.raw());
    ctx.threads().parallel_for(rows, std::max<int64_t>(1, 16384 / inner), [&](int64_t b, int64_t e) {
      for (int64_t row = b; row < e; ++row) {
        int64_t base = 0;  // offset of the row's coordinates in x, excluding the axis
        for (int64_t k = static_cast<int64_t>(r) - 2, rest = row; k >= 0; --k) {
          const int64_t ck = rest % is[static_cast<size_t>(k)];
          rest /= is[static_cast<size_t>(k)];
          if (static_cast<size_t>(k) != axis) base += ck * xs[static_cast<size_t>(k)];
        }
        T* out = dst + row * inner;
        // the indices read as they are (int32 or int64), checked and wrapped on the way
        auto gather = [&](const auto* ix) {
          for (int64_t j = 0; j < inner; ++j) {
            const int64_t v = checked_index(static_cast<int64_t>(ix[j]), d, "index", static_cast<int64_t>(axis));
            out[j] = src[base + j * step + v * along];
          }
        };
        if (it.dtype() == DType::kInt64) gather(it.data<int64_t>() + row * inner);
        else gather(it.data<int32_t>() + row * inner);
      }
    });
  });
}

// ---- GatherND ------------------------------------------------------------------------------------

void gather_nd_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& it = ctx.input(1);
  const int64_t b = ctx.node().attr_int("batch_dims", 0);
  const int64_t r = static_cast<int64_t>(x.rank()), q = static_cast<int64_t>(it.rank());
  MRT_CHECK_ARG(r >= 1 && q >= 1, "data ", x.describe(), " and indices ", it.describe(), " must have rank >= 1");
  MRT_CHECK_ARG(b >= 0 && b < std::min(r, q), "batch_dims ", b, " must be less than both ranks");
  const int64_t m = it.dim(static_cast<size_t>(q - 1));
  MRT_CHECK_ARG(m >= 1 && m <= r - b, "last dim of indices ", it.describe(), " must be in [1, ", r - b, "]");
  for (int64_t k = 0; k < b; ++k)
    MRT_CHECK_ARG(x.dim(static_cast<size_t>(k)) == it.dim(static_cast<size_t>(k)), "batch dims of data ", x.describe(),
                  " and indices ", it.describe(), " differ");
  Shape out(it.shape().begin(), it.shape().end() - 1);
  out.insert(out.end(), x.shape().begin() + b + m, x.shape().end());
  std::vector<int64_t> idx = read_int64s(it, "indices");
  size_t es = element_size(x, "GatherND");
  Tensor& y = ctx.output(0, x.dtype(), out);
  if (y.numel() == 0) return;
  const int64_t nbatch = prod(x.shape(), 0, static_cast<size_t>(b));
  const int64_t groups = prod(it.shape(), static_cast<size_t>(b), static_cast<size_t>(q - 1));
  const int64_t block = prod(x.shape(), static_cast<size_t>(b + m), x.rank());
  const int64_t batch_stride = prod(x.shape(), static_cast<size_t>(b), x.rank());
  std::vector<int64_t> xs = shape_strides(x.shape());
  const size_t bytes = static_cast<size_t>(block) * es;
  const char* src = static_cast<const char*>(x.raw());
  char* dst = static_cast<char*>(y.raw());
  for (int64_t bi = 0; bi < nbatch; ++bi)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t* tup = idx.data() + (bi * groups + g) * m;
      int64_t off = bi * batch_stride;
      for (int64_t j = 0; j < m; ++j) {
        const size_t a = static_cast<size_t>(b + j);
        off += checked_index(tup[j], x.dim(a), "index", static_cast<int64_t>(a)) * xs[a];
      }
      std::memcpy(dst + static_cast<size_t>(bi * groups + g) * bytes, src + static_cast<size_t>(off) * es, bytes);
    }
}

// ---- Scatter reductions -------------------------------------------------------------------------

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

Reduction reduction_of(const Node& node) {
  std::string s = node.attr_string("reduction", "none");
  if (s == "none") return Reduction::kNone;
  if (s == "add") return Reduction::kAdd;
  if (s == "mul") return Reduction::kMul;
  if (s == "max") return Reduction::kMax;
  if (s == "min") return Reduction::kMin;
  fail(MRT_NOT_IMPLEMENTED, node.label(), ": reduction '", s, "' is not supported");
}

void scatter_check(const Node& node, int64_t) { (void)reduction_of(node); }

template <class T>
inline T combine(Reduction red, T a, T b) {
  switch (red) {
    case Reduction::kAdd: return static_cast<T>(a + b);
    case Reduction::kMul: return static_cast<T>(a * b);
    case Reduction::kMax: return std::max(a, b);
    case Reduction::kMin: return std::min(a, b);
    default: return b;
  }
}
template <>
inline bool combine<bool>(Reduction red, bool a, bool b) {
  switch (red) {
    case Reduction::kAdd: case Reduction::kMax: return a || b;
    case Reduction::kMul: case Reduction::kMin: return a && b;
    default: return b;
  }
}
template <>
inline Float16 combine<Float16>(Reduction red, Float16 a, Float16 b) {
  if (red == Reduction::kNone) return b;
  return Float16{float_to_half(combine(red, half_to_float(a.bits), half_to_float(b.bits)))};
}
template <>
inline BFloat16 combine<BFloat16>(Reduction red, BFloat16 a, BFloat16 b) {
  if (red == Reduction::kNone) return b;
  return BFloat16{float_to_bfloat16(combine(red, bfloat16_to_float(a.bits), bfloat16_to_float(b.bits)))};
}

// Calls apply(dst_offset, src_offset) for each update; data copy is done by the caller.
template <class Apply>
void with_reduction(DType dt, Reduction red, size_t es, void* out, const void* upd, Apply&& walk) {
  if (red == Reduction::kNone) {
    dispatch_by_size(es, "Scatter", [&](auto tag) {
      using T = decltype(tag);
      T* o = static_cast<T*>(out);
      const T* u = static_cast<const T*>(upd);
      walk([&](int64_t dst, int64_t src) { o[dst] = u[src]; });
    });
    return;
  }
  MRT_DISPATCH_ALL(dt, "Scatter reduction", {
    T* o = static_cast<T*>(out);
    const T* u = static_cast<const T*>(upd);
    walk([&](int64_t dst, int64_t src) { o[dst] = combine<T>(red, o[dst], u[src]); });
  });
}

// ---- ScatterElements / Scatter ------------------------------------------------------------------------

void scatter_elements_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& it = ctx.input(1);
  const Tensor& up = ctx.input(2);
  const size_t r = x.rank();
  MRT_CHECK_ARG(r >= 1 && it.rank() == r, "data ", x.describe(), " and indices ", it.describe(),
                " must have the same rank >= 1");
  MRT_CHECK_ARG(up.shape() == it.shape(), "updates ", up.describe(), " must have the shape of indices ", it.describe());
  MRT_CHECK_ARG(up.dtype() == x.dtype(), "updates ", up.describe(), " must have the type of data ", x.describe());
  const size_t axis =
      static_cast<size_t>(checked_axis(ctx.node().attr_int("axis", 0), static_cast<int64_t>(r), "axis"));
  for (size_t k = 0; k < r; ++k)
    MRT_CHECK_ARG(k == axis || it.dim(k) <= x.dim(k), "indices ", it.describe(), " exceed data ", x.describe(),
                  " on axis ", k);
  const Reduction red = ctx.node().op_type == "Scatter" ? Reduction::kNone : reduction_of(ctx.node());
  std::vector<int64_t> idx = read_int64s(it, "indices");
  const int64_t d = x.dim(axis);
  for (int64_t& v : idx) v = checked_index(v, d, "index", static_cast<int64_t>(axis));
  size_t es = element_size(x, "ScatterElements");
  Tensor& y = ctx.output(0, x.dtype(), x.shape());
  if (y.numel()) std::memcpy(y.raw(), x.raw(), y.nbytes());
  if (it.numel() == 0) return;
  std::vector<int64_t> xs = shape_strides(x.shape());
  const Shape& is = it.shape();
  with_reduction(x.dtype(), red, es, y.raw(), up.raw(), [&](auto&& apply) {
    std::vector<int64_t> c(r, 0);
    int64_t base = 0;
    for (int64_t i = 0; i < it.numel(); ++i) {
      apply(base + idx[static_cast<size_t>(i)] * xs[axis], i);
      for (size_t k = r; k-- > 0;) {
        ++c[k];
        if (k != axis) base += xs[k];
        if (c[k] < is[k]) break;
        if (k != axis) base -= xs[k] * is[k];
        c[k] = 0;
      }
    }
  });
}

// ---- ScatterND ------------------------------------------------------------------------------------

void scatter_nd_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& it = ctx.input(1);
  const Tensor& up = ctx.input(2);
  const int64_t r = static_cast<int64_t>(x.rank()), q = static_cast<int64_t>(it.rank());
  MRT_CHECK_ARG(r >= 1 && q >= 1, "data ", x.describe(), " and indices ", it.describe(), " must have rank >= 1");
  const int64_t k = it.dim(static_cast<size_t>(q - 1));
  MRT_CHECK_ARG(k >= 1 && k <= r, "last dim of indices ", it.describe(), " must be in [1, ", r, "]");
  Shape ushape(it.shape().begin(), it.shape().end() - 1);
  ushape.insert(ushape.end(), x.shape().begin() + k, x.shape().end());
  MRT_CHECK_ARG(up.shape() == ushape, "updates ", up.describe(), " must have shape ", shape_str(ushape));
  MRT_CHECK_ARG(up.dtype() == x.dtype(), "updates ", up.describe(), " must have the type of data ", x.describe());
  const Reduction red = reduction_of(ctx.node());
  std::vector<int64_t> idx = read_int64s(it, "indices");
  const int64_t n = prod(it.shape(), 0, static_cast<size_t>(q - 1));
  const int64_t block = prod(x.shape(), static_cast<size_t>(k), x.rank());
  std::vector<int64_t> xs = shape_strides(x.shape());
  std::vector<int64_t> offs(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (int64_t j = 0; j < k; ++j)
      off += checked_index(idx[static_cast<size_t>(i * k + j)], x.dim(static_cast<size_t>(j)), "index", j) *
             xs[static_cast<size_t>(j)];
    offs[static_cast<size_t>(i)] = off;
  }
  size_t es = element_size(x, "ScatterND");
  Tensor& y = ctx.output(0, x.dtype(), x.shape());
  if (y.numel()) std::memcpy(y.raw(), x.raw(), y.nbytes());
  if (n == 0 || block == 0) return;
  with_reduction(x.dtype(), red, es, y.raw(), up.raw(), [&](auto&& apply) {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t e = 0; e < block; ++e) apply(offs[static_cast<size_t>(i)] + e, i * block + e);
  });
}

// ---- OneHot ---------------------------------------------------------------------------------------

void onehot_kernel(OpContext& ctx) {
  const Tensor& it = ctx.input(0);
  const Tensor& dt = ctx.input(1);
  const Tensor& vals = ctx.input(2);
  MRT_CHECK_ARG(dt.numel() == 1, "depth must be a scalar, got ", dt.describe());
  MRT_CHECK_ARG(vals.numel() == 2, "values must hold [off_value, on_value], got ", vals.describe());
  const double depth_d = dt.scalar_as_double(0);
  MRT_CHECK_ARG(std::isfinite(depth_d) && depth_d >= 1 && depth_d < 9.0e15, "depth ", depth_d, " must be positive");
  const int64_t depth = static_cast<int64_t>(depth_d);
  const int64_t r = static_cast<int64_t>(it.rank());
  int64_t axis = ctx.node().attr_int("axis", -1);
  if (axis < 0) axis += r + 1;
  MRT_CHECK_ARG(axis >= 0 && axis <= r, "axis ", ctx.node().attr_int("axis", -1), " is out of range for output rank ",
                r + 1);
  Shape out = it.shape();
  out.insert(out.begin() + axis, depth);
  size_t es = element_size(vals, "OneHot");
  Tensor& y = ctx.output(0, vals.dtype(), out);
  if (y.numel() == 0) return;
  const char* v = static_cast<const char*>(vals.raw());
  fill_elements(y.raw(), v, es, y.numel());
  const int64_t inner = prod(it.shape(), static_cast<size_t>(axis), it.rank());
  char* dst = static_cast<char*>(y.raw());
  const bool integral = !dtype_is_float(it.dtype());
  for (int64_t i = 0; i < it.numel(); ++i) {
    int64_t k;
    if (integral) {
      k = it.int_at(i);
    } else {
      double f = it.scalar_as_double(i);
      if (!std::isfinite(f) || std::fabs(f) > 9.0e15) continue;
      k = static_cast<int64_t>(f);
    }
    if (k < 0) k += depth;
    if (k < 0 || k >= depth) continue;
    const int64_t o = i / inner, in = i % inner;
    std::memcpy(dst + static_cast<size_t>((o * depth + k) * inner + in) * es, v + es, es);
  }
}

// ---- NonZero ---------------------------------------------------------------------------------------

template <class T> inline bool nonzero(T v) { return v != T(0); }
template <> inline bool nonzero<Float16>(Float16 v) { return (v.bits & 0x7fff) != 0; }
template <> inline bool nonzero<BFloat16>(BFloat16 v) { return (v.bits & 0x7fff) != 0; }

void nonzero_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> hits;
  MRT_DISPATCH_ALL(x.dtype(), "NonZero", {
    const T* p = static_cast<const T*>(x.raw());
    for (int64_t i = 0; i < x.numel(); ++i)
      if (nonzero<T>(p[i])) hits.push_back(i);
  });
  const size_t r = std::max<size_t>(1, x.rank());
  const int64_t n = static_cast<int64_t>(hits.size());
  Tensor& y = ctx.output(0, DType::kInt64, {static_cast<int64_t>(r), n});
  if (n == 0) return;
  int64_t* out = y.data<int64_t>();
  Shape shp = x.rank() ? x.shape() : Shape{1};
  for (int64_t j = 0; j < n; ++j) {
    int64_t rem = hits[static_cast<size_t>(j)];
    for (size_t k = r; k-- > 0;) {
      out[static_cast<int64_t>(k) * n + j] = rem % shp[k];
      rem /= shp[k];
    }
  }
}

// ---- Compress ---------------------------------------------------------------------------------------

void compress_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& cond = ctx.input(1);
  MRT_CHECK_ARG(cond.rank() == 1, "condition must be 1-D, got ", cond.describe());
  std::vector<bool> keep(static_cast<size_t>(cond.numel()));
  for (int64_t i = 0; i < cond.numel(); ++i) keep[static_cast<size_t>(i)] = cond.scalar_as_double(i) != 0.0;
  const bool has_axis = ctx.node().has_attr("axis");
  int64_t outer = 1, dim = x.numel(), inner = 1, axis = 0;
  if (has_axis) {
    MRT_CHECK_ARG(x.rank() >= 1, "input must have rank >= 1 when axis is given, got ", x.describe());
    axis = checked_axis(ctx.node().attr_int("axis", 0), static_cast<int64_t>(x.rank()), "axis");
    outer = prod(x.shape(), 0, static_cast<size_t>(axis));
    dim = x.dim(static_cast<size_t>(axis));
    inner = prod(x.shape(), static_cast<size_t>(axis) + 1, x.rank());
  }
  std::vector<int64_t> sel;
  for (int64_t i = 0; i < cond.numel(); ++i) {
    if (!keep[static_cast<size_t>(i)]) continue;
    MRT_CHECK_ARG(i < dim, "condition ", cond.describe(), " selects index ", i, " beyond the size ", dim,
                  " of the compressed axis");
    sel.push_back(i);
  }
  Shape out;
  if (has_axis) {
    out = x.shape();
    out[static_cast<size_t>(axis)] = static_cast<int64_t>(sel.size());
  } else {
    out = {static_cast<int64_t>(sel.size())};
  }
  size_t es = element_size(x, "Compress");
  Tensor& y = ctx.output(0, x.dtype(), out);
  if (y.numel() == 0) return;
  const size_t block = static_cast<size_t>(inner) * es;
  const char* src = static_cast<const char*>(x.raw());
  char* dst = static_cast<char*>(y.raw());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t s : sel) {
      std::memcpy(dst, src + static_cast<size_t>(o * dim + s) * block, block);
      dst += block;
    }
}

}  // namespace

void register_index_ops(KernelRegistry& r) {
  r.add("Gather", 1, gather_kernel);
  r.add("GatherElements", 11, gather_elements_kernel);
  r.add("GatherND", 11, gather_nd_kernel);
  r.add("ScatterElements", 11, scatter_elements_kernel, scatter_check);
  r.add("Scatter", 9, scatter_elements_kernel, nullptr, 11);
  r.add("ScatterND", 11, scatter_nd_kernel, scatter_check);
  r.add("OneHot", 9, onehot_kernel);
  r.add("NonZero", 9, nonzero_kernel);
  r.add("Compress", 9, compress_kernel);
}

}  // namespace shape_kernels
}  // namespace mrt
