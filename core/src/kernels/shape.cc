// Kernel group: shape. This file holds the view kernels (no data copied: Reshape,
// Flatten, Squeeze, Unsqueeze, Identity, Dropout) and the small shape/constant producers
// (Shape, Size, ConstantOfShape, Range, Constant, EyeLike); the copying kernels live in
// shape_copy.cc, shape_index.cc and shape_topk.cc.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "../kernel.h"
#include "elementwise_common.h"
#include "random_util.h"
#include "shape_common.h"

namespace mrt {
namespace shape_kernels {
namespace {

// ---- Reshape -------------------------------------------------------------------------

void reshape_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> req;
  if (ctx.opset() < 5) {
    req = ctx.node().require_ints("shape");
  } else {
    const Tensor& s = ctx.input(1);
    MRT_CHECK_ARG(s.rank() == 1, "shape input must be 1-D, got ", s.describe());
    req = read_int64s(s, "shape");
  }
  const bool allowzero = ctx.opset() >= 14 && ctx.node().attr_int("allowzero", 0) != 0;
  Shape out(req.size());
  int64_t infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < req.size(); ++i) {
    int64_t d = req[i];
    if (d == -1) {
      MRT_CHECK_ARG(infer < 0, "shape ", shape_str(req), " has more than one -1");
      infer = static_cast<int64_t>(i);
      continue;
    }
    if (d == 0 && !allowzero) {
      MRT_CHECK_ARG(i < x.rank(), "shape ", shape_str(req), ": 0 at position ", i, " but the input ", x.describe(),
                    " has rank ", x.rank());
      d = x.dim(i);
    }
    MRT_CHECK_ARG(d >= 0, "shape ", shape_str(req), " has invalid dimension ", d);
    MRT_CHECK_ARG(d == 0 || known <= std::numeric_limits<int64_t>::max() / d, "shape ", shape_str(req),
                  " has too many elements");
    out[i] = d;
    known *= d;
  }
  if (infer >= 0) {
    MRT_CHECK_ARG(known != 0 && x.numel() % known == 0, "cannot reshape ", x.describe(), " to ", shape_str(req));
    out[static_cast<size_t>(infer)] = x.numel() / known;
  }
  MRT_CHECK_ARG(shape_size(out) == x.numel(), "cannot reshape ", x.describe(), " to ", shape_str(req), " (",
                shape_str(out), ")");
  ctx.set_output(0, Tensor::reshaped(x, out));
}

// ---- Flatten -------------------------------------------------------------------------

void flatten_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t r = static_cast<int64_t>(x.rank());
  int64_t axis = ctx.node().attr_int("axis", 1);
  if (axis < 0) axis += r;
  MRT_CHECK_ARG(axis >= 0 && axis <= r, "axis ", ctx.node().attr_int("axis", 1), " is out of range for rank ", r);
  int64_t a = 1, b = 1;
  for (int64_t i = 0; i < r; ++i) (i < axis ? a : b) *= x.dim(static_cast<size_t>(i));
  ctx.set_output(0, Tensor::reshaped(x, {a, b}));
}

// ---- Squeeze / Unsqueeze ----------------------------------------------------------------

std::vector<int64_t> axes_from(OpContext& ctx, size_t input_index, bool* given) {
  *given = false;
  if (ctx.opset() < 13) {
    if (ctx.node().has_attr("axes")) {
      *given = true;
      return ctx.node().attr_ints("axes");
    }
    return {};
  }
  if (const Tensor* a = ctx.optional_input(input_index)) {
    MRT_CHECK_ARG(a->rank() <= 1, "axes must be 0-D or 1-D, got ", a->describe());
    *given = true;
    return read_int64s(*a, "axes");
  }
  return {};
}

void squeeze_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  bool given = false;
  std::vector<int64_t> axes = axes_from(ctx, 1, &given);
  const int64_t r = static_cast<int64_t>(x.rank());
  std::vector<bool> drop(x.rank(), false);
  if (!given || axes.empty()) {  // an empty axes tensor squeezes every size-1 dim, like no axes
    for (size_t i = 0; i < x.rank(); ++i) drop[i] = x.dim(i) == 1;
  } else {
    for (int64_t a : axes) {
      int64_t n = checked_axis(a, r, "axes entry");
      MRT_CHECK_ARG(x.dim(static_cast<size_t>(n)) == 1, "cannot squeeze axis ", a, " of ", x.describe(),
                    ": its size is not 1");
      drop[static_cast<size_t>(n)] = true;
    }
  }
  Shape out;
  for (size_t i = 0; i < x.rank(); ++i)
    if (!drop[i]) out.push_back(x.dim(i));
  ctx.set_output(0, Tensor::reshaped(x, out));
}

void unsqueeze_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  bool given = false;
  std::vector<int64_t> axes = axes_from(ctx, 1, &given);
  MRT_CHECK_ARG(given, "Unsqueeze needs axes");
  const int64_t out_rank = static_cast<int64_t>(x.rank() + axes.size());
  std::vector<bool> inserted(static_cast<size_t>(out_rank), false);
  for (int64_t a : axes) {
    int64_t n = checked_axis(a, out_rank, "axes entry");
    MRT_CHECK_ARG(!inserted[static_cast<size_t>(n)], "axes ", shape_str(axes), " repeat an axis");
    inserted[static_cast<size_t>(n)] = true;
  }
  Shape out(static_cast<size_t>(out_rank));
  size_t k = 0;
  for (size_t i = 0; i < out.size(); ++i) out[i] = inserted[i] ? 1 : x.dim(k++);
  ctx.set_output(0, Tensor::reshaped(x, out));
}

// ---- Identity / Dropout -------------------------------------------------------------------

void identity_kernel(OpContext& ctx) { ctx.set_output(0, ctx.input(0)); }

// Training mode: each element is kept with probability 1 - ratio and scaled by 1 / (1 - ratio); the mask
// (output 1) says which were kept. The draws come from the node's stream (its `seed` attribute).
void dropout_training(OpContext& ctx, const Tensor& x, double ratio) {
  const Node& node = ctx.node();
  const std::optional<double> seed =
      node.has_attr("seed") ? std::optional<double>(static_cast<double>(node.attr_int("seed", 0))) : std::nullopt;
  Tensor& y = ctx.output(0, x.dtype(), x.shape());
  const int64_t count = x.numel();
  std::vector<uint8_t> keep(static_cast<size_t>(count));
  if (count > 0) {
    uint64_t first = 0;
    const uint64_t key = rng::reserve(ctx, seed, static_cast<uint64_t>(count), &first);
    for (int64_t i = 0; i < count; ++i)
      keep[static_cast<size_t>(i)] = rng::uniform01(key, first + static_cast<uint64_t>(i)) >= ratio;
  }
  const double scale = 1.0 / (1.0 - ratio);
  MRT_EW_DISPATCH_FLOATLIKE(x.dtype(), "Dropout", {
    const T* xp = x.data_as<T>();
    T* yp = y.data_as<T>();
    for (int64_t i = 0; i < count; ++i) {
      using C = ew::compute_t<T>;
      const C v = ew::Compute<T>::load(xp[i]);
      yp[i] = ew::Compute<T>::store(keep[static_cast<size_t>(i)] ? static_cast<C>(v * scale) : C(0));
    }
  });
  if (ctx.output_count() > 1 && ctx.has_output(1)) {
    const DType mdt = ctx.opset() >= 10 ? DType::kBool : x.dtype();
    Tensor& m = ctx.output(1, mdt, x.shape());
    const size_t esize = dtype_size(mdt);
    unsigned char one[8], zero[8];
    store_scalar(mdt, 1.0, one);
    store_scalar(mdt, 0.0, zero);
    auto* mp = static_cast<unsigned char*>(m.raw());
    for (int64_t i = 0; i < count; ++i)
      std::memcpy(mp + static_cast<size_t>(i) * esize, keep[static_cast<size_t>(i)] ? one : zero, esize);
  }
}

void dropout_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Node& node = ctx.node();
  bool training = false;
  double ratio = 0.5;
  if (ctx.opset() >= 12) {
    if (const Tensor* r = ctx.optional_input(1)) {
      MRT_CHECK_ARG(r->numel() == 1, "ratio must be a scalar, got ", r->describe());
      ratio = r->scalar_as_double(0);
    }
    if (const Tensor* t = ctx.optional_input(2)) {
      MRT_CHECK_ARG(t->numel() == 1, "training_mode must be a scalar, got ", t->describe());
      training = t->scalar_as_double(0) != 0.0;
    }
  } else {
    ratio = node.attr_float("ratio", 0.5f);  // opsets < 7 (is_test) always run as inference here
  }
  MRT_CHECK_ARG(ratio >= 0.0 && ratio < 1.0, "ratio ", ratio, " must be in [0, 1)");
  if (training && ratio > 0.0) {
    dropout_training(ctx, x, ratio);
    return;
  }
  ctx.set_output(0, x);
  if (ctx.output_count() > 1 && ctx.has_output(1)) {
    // Opsets < 10 type the mask like the input; 10+ use bool.
    DType mdt = ctx.opset() >= 10 ? DType::kBool : x.dtype();
    Tensor& m = ctx.output(1, mdt, x.shape());
    if (m.numel() > 0) {
      unsigned char one[8];
      store_scalar(mdt, 1.0, one);
      fill_elements(m.raw(), one, dtype_size(mdt), m.numel());
    }
  }
}

// ---- Shape / Size -----------------------------------------------------------------------

void shape_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t r = static_cast<int64_t>(x.rank());
  int64_t start = 0, end = r;
  if (ctx.opset() >= 15) {
    start = ctx.node().attr_int("start", 0);
    if (ctx.node().has_attr("end")) end = ctx.node().attr_int("end", r);
  }
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  int64_t n = std::max<int64_t>(0, end - start);
  Tensor& y = ctx.output(0, DType::kInt64, {n});
  int64_t* p = y.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) p[i] = x.dim(static_cast<size_t>(start + i));
}

void size_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0, DType::kInt64, {});
  y.data<int64_t>()[0] = x.numel();
}

// ---- ConstantOfShape ------------------------------------------------------------------------

void constant_of_shape_kernel(OpContext& ctx) {
  const Tensor& s = ctx.input(0);
  MRT_CHECK_ARG(s.rank() == 1, "input must be a 1-D shape, got ", s.describe());
  Shape shape = read_int64s(s, "shape");
  for (int64_t d : shape) MRT_CHECK_ARG(d >= 0, "shape ", shape_str(shape), " has a negative dimension");
  const Tensor* value = ctx.node().attr_tensor("value");
  if (value) {
    MRT_CHECK_ARG(value->numel() == 1, "value must hold exactly one element, got ", value->describe());
    size_t es = element_size(*value, "ConstantOfShape");
    Tensor& y = ctx.output(0, value->dtype(), shape);
    fill_elements(y.raw(), value->raw(), es, y.numel());
  } else {
    Tensor& y = ctx.output(0, DType::kFloat, shape);
    if (y.numel()) std::memset(y.raw(), 0, y.nbytes());
  }
}

void constant_of_shape_check(const Node& node, int64_t) {
  if (const Tensor* v = node.attr_tensor("value"))
    MRT_CHECK_IMPL(dtype_size(v->dtype()) != 0, node.label(), ": value of type ", dtype_name(v->dtype()),
                   " is not supported");
}

// ---- Range ------------------------------------------------------------------------------------

template <class T>
void range_integer(OpContext& ctx, const Tensor& s, const Tensor& l, const Tensor& d) {
  const T start = s.data<T>()[0], limit = l.data<T>()[0], delta = d.data<T>()[0];
  MRT_CHECK_ARG(delta != 0, "delta must not be zero");
  // Count in 128-bit-safe arithmetic via long double is overkill; int64 differences suffice
  // for the types Range allows (int16/int32/int64 with sane values).
  long double span = static_cast<long double>(limit) - static_cast<long double>(start);
  long double cnt = std::ceil(span / static_cast<long double>(delta));
  int64_t n = cnt > 0 ? static_cast<int64_t>(cnt) : 0;
  Tensor& y = ctx.output(0, s.dtype(), {n});
  T* p = y.data<T>();
  // Wrapping unsigned arithmetic: the values stay between start and limit, but i * delta
  // alone may not fit in T.
  for (int64_t i = 0; i < n; ++i)
    p[i] = static_cast<T>(static_cast<uint64_t>(static_cast<int64_t>(start)) +
                          static_cast<uint64_t>(i) * static_cast<uint64_t>(static_cast<int64_t>(delta)));
}

template <class C>
void range_float(OpContext& ctx, double start, double limit, double delta, DType out_dt) {
  MRT_CHECK_ARG(delta != 0.0, "delta must not be zero");
  MRT_CHECK_ARG(std::isfinite(start) && std::isfinite(limit) && std::isfinite(delta),
                "start/limit/delta must be finite");
  double cnt = std::ceil((limit - start) / delta);
  MRT_CHECK_ARG(cnt < 9.0e15, "Range would produce ", cnt, " elements");
  int64_t n = cnt > 0 ? static_cast<int64_t>(cnt) : 0;
  Tensor& y = ctx.output(0, out_dt, {n});
  const C s = static_cast<C>(start), dl = static_cast<C>(delta);
  if (out_dt == DType::kFloat || out_dt == DType::kDouble) {
    C* p = static_cast<C*>(y.raw());
    for (int64_t i = 0; i < n; ++i) p[i] = s + static_cast<C>(i) * dl;
  } else {
    uint16_t* p = y.data_as<uint16_t>();
    for (int64_t i = 0; i < n; ++i) {
      float v = static_cast<float>(s + static_cast<C>(i) * dl);
      p[i] = out_dt == DType::kFloat16 ? float_to_half(v) : float_to_bfloat16(v);
    }
  }
}

void range_kernel(OpContext& ctx) {
  const Tensor& s = ctx.input(0);
  const Tensor& l = ctx.input(1);
  const Tensor& d = ctx.input(2);
  for (const Tensor* t : {&s, &l, &d})
    MRT_CHECK_ARG(t->numel() == 1, "start, limit and delta must be scalars, got ", t->describe());
  MRT_CHECK_ARG(s.dtype() == l.dtype() && s.dtype() == d.dtype(), "start, limit and delta must share a type: ",
                s.describe(), ", ", l.describe(), ", ", d.describe());
  switch (s.dtype()) {
    case DType::kInt16: range_integer<int16_t>(ctx, s, l, d); break;
    case DType::kInt32: range_integer<int32_t>(ctx, s, l, d); break;
    case DType::kInt64: range_integer<int64_t>(ctx, s, l, d); break;
    case DType::kFloat:
      range_float<float>(ctx, s.scalar_as_double(), l.scalar_as_double(), d.scalar_as_double(), DType::kFloat);
      break;
    case DType::kDouble:
      range_float<double>(ctx, s.scalar_as_double(), l.scalar_as_double(), d.scalar_as_double(), DType::kDouble);
      break;
    case DType::kFloat16:
    case DType::kBFloat16: {
      int64_t stash = ctx.node().attr_int("stash_type", 1);
      if (stash == 11)
        range_float<double>(ctx, s.scalar_as_double(), l.scalar_as_double(), d.scalar_as_double(), s.dtype());
      else
        range_float<float>(ctx, s.scalar_as_double(), l.scalar_as_double(), d.scalar_as_double(), s.dtype());
      break;
    }
    default:
      fail(MRT_NOT_IMPLEMENTED, "Range: element type ", dtype_name(s.dtype()), " is not supported");
  }
}

// ---- Constant -----------------------------------------------------------------------------------

void constant_check(const Node& node, int64_t) {
  int found = 0;
  for (const Attribute& a : node.attributes) {
    if (a.name == "sparse_value" || a.name == "value_string" || a.name == "value_strings")
      fail(MRT_NOT_IMPLEMENTED, node.label(), ": Constant attribute '", a.name, "' is not supported");
    if (a.name == "value" || a.name == "value_float" || a.name == "value_floats" || a.name == "value_int" ||
        a.name == "value_ints")
      ++found;
  }
  if (found != 1) fail(MRT_INVALID_MODEL, node.label(), ": Constant needs exactly one value attribute, found ", found);
  if (const Tensor* v = node.attr_tensor("value"))
    MRT_CHECK_IMPL(dtype_size(v->dtype()) != 0, node.label(), ": Constant of type ", dtype_name(v->dtype()),
                   " is not supported");
}

void constant_kernel(OpContext& ctx) {
  const Node& node = ctx.node();
  if (const Tensor* v = node.attr_tensor("value")) {
    ctx.set_output(0, *v);
    return;
  }
  if (node.has_attr("value_float")) {
    Tensor& y = ctx.output(0, DType::kFloat, {});
    y.data<float>()[0] = node.attr_float("value_float", 0.f);
  } else if (node.has_attr("value_floats")) {
    std::vector<float> v = node.attr_floats("value_floats");
    Tensor& y = ctx.output(0, DType::kFloat, {static_cast<int64_t>(v.size())});
    if (!v.empty()) std::memcpy(y.raw(), v.data(), v.size() * sizeof(float));
  } else if (node.has_attr("value_int")) {
    Tensor& y = ctx.output(0, DType::kInt64, {});
    y.data<int64_t>()[0] = node.attr_int("value_int", 0);
  } else if (node.has_attr("value_ints")) {
    std::vector<int64_t> v = node.attr_ints("value_ints");
    Tensor& y = ctx.output(0, DType::kInt64, {static_cast<int64_t>(v.size())});
    if (!v.empty()) std::memcpy(y.raw(), v.data(), v.size() * sizeof(int64_t));
  } else {
    fail(MRT_NOT_IMPLEMENTED, "Constant: no supported value attribute");
  }
}

// ---- EyeLike ------------------------------------------------------------------------------------

void eyelike_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  MRT_CHECK_ARG(x.rank() == 2, "input must be 2-D, got ", x.describe());
  DType dt = x.dtype();
  if (ctx.node().has_attr("dtype")) dt = static_cast<DType>(ctx.node().attr_int("dtype", 0));
  MRT_CHECK_IMPL(dtype_is_plain(dt), "EyeLike: dtype ", static_cast<int>(dt),
                 " is not supported");
  const int64_t k = std::clamp<int64_t>(ctx.node().attr_int("k", 0), -x.dim(0) - 1, x.dim(1) + 1);
  Tensor& y = ctx.output(0, dt, x.shape());
  if (y.numel() == 0) return;
  std::memset(y.raw(), 0, y.nbytes());
  unsigned char one[8];
  store_scalar(dt, 1.0, one);
  const size_t es = dtype_size(dt);
  const int64_t rows = x.dim(0), cols = x.dim(1);
  char* p = static_cast<char*>(y.raw());
  for (int64_t i = 0; i < rows; ++i) {
    int64_t j = i + k;
    if (j >= 0 && j < cols) std::memcpy(p + static_cast<size_t>(i * cols + j) * es, one, es);
  }
}

}  // namespace

void register_view_ops(KernelRegistry& r) {
  r.add("Reshape", 1, reshape_kernel);
  r.add("Flatten", 1, flatten_kernel);
  r.add("Squeeze", 1, squeeze_kernel);
  r.add("Unsqueeze", 1, unsqueeze_kernel);
  r.add("Identity", 1, identity_kernel);
  r.add("Dropout", 1, dropout_kernel);
  r.add("Shape", 1, shape_kernel);
  r.add("Size", 1, size_kernel);
  r.add("ConstantOfShape", 9, constant_of_shape_kernel, constant_of_shape_check);
  r.add("Range", 11, range_kernel);
  r.add("Constant", 1, constant_kernel, constant_check);
  r.add("EyeLike", 9, eyelike_kernel);
}

}  // namespace shape_kernels

void register_shape_kernels(KernelRegistry& r) {
  shape_kernels::register_view_ops(r);
  shape_kernels::register_copy_ops(r);
  shape_kernels::register_index_ops(r);
  shape_kernels::register_topk_ops(r);
  shape_kernels::register_extra_ops(r);
}

}  // namespace mrt
