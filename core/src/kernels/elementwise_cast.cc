// Cast and CastLike between every storable type: float, double, float16, bfloat16, bool
// and all integers. Float -> integer conversions saturate and map NaN to 0 (the C++
// conversion would be undefined there). String and 8/4/2-bit types are rejected.
#include <cstring>
#include <string>

#include "elementwise_common.h"

namespace mrt {
namespace ew {
namespace {

// Value in the widest natural type of S: double for floating types, the integer itself
// otherwise.
template <class S>
inline auto load_wide(S v) {
  if constexpr (is_half_v<S>) return static_cast<double>(Compute<S>::load(v));
  else return v;
}

// double -> float rounded to odd (truncate, then set the last bit when inexact). A
// second rounding of that float to a 16-bit float then equals a direct rounding of
// the double, which plain double -> float -> half would not always give.
inline float double_to_float_odd(double d) {
  float f = static_cast<float>(d);
  if (!std::isfinite(f) || static_cast<double>(f) == d) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = std::nextafter(f, 0.f);
  uint32_t b;
  std::memcpy(&b, &f, 4);
  b |= 1u;
  std::memcpy(&f, &b, 4);
  return f;
}

template <class D, class S>
inline D convert(S v) {
  if constexpr (std::is_same<D, S>::value) {
    return v;
  } else if constexpr (std::is_same<D, bool>::value) {
    return load_wide(v) != 0;
  } else if constexpr (is_half_v<D>) {
    if constexpr (std::is_same<S, bool>::value) return Compute<D>::store(v ? 1.f : 0.f);
    else if constexpr (std::is_same<S, double>::value) return Compute<D>::store(double_to_float_odd(v));
    else return Compute<D>::store(static_cast<float>(load_wide(v)));
  } else if constexpr (std::is_floating_point<D>::value) {
    return static_cast<D>(load_wide(v));
  } else {  // integer destination
    if constexpr (is_floatlike_v<S>) {
      const double d = static_cast<double>(load_wide(v));
      if (std::isnan(d)) return 0;
      if (d <= static_cast<double>(std::numeric_limits<D>::lowest())) return std::numeric_limits<D>::lowest();
      // 2^bits (unsigned) or 2^(bits-1) (signed): exact in double, first value out of range.
      const double limit = std::ldexp(1.0, std::numeric_limits<D>::digits);
      if (d >= limit) return std::numeric_limits<D>::max();
      return static_cast<D>(d);
    } else {
      return static_cast<D>(v);  // integer/bool -> integer: modular, as numpy
    }
  }
}

template <class S, class D>
void cast_apply(OpContext& ctx, const Tensor& x, Tensor& y) {
  unary_apply<S, D>(ctx, x, y, [](S v) { return convert<D, S>(v); });
}

DType parse_legacy_type_name(const std::string& s) {
  static const std::pair<const char*, DType> names[] = {
      {"FLOAT", DType::kFloat},   {"UINT8", DType::kUInt8},   {"INT8", DType::kInt8},
      {"UINT16", DType::kUInt16}, {"INT16", DType::kInt16},   {"INT32", DType::kInt32},
      {"INT64", DType::kInt64},   {"STRING", DType::kString}, {"BOOL", DType::kBool},
      {"FLOAT16", DType::kFloat16}, {"DOUBLE", DType::kDouble}, {"UINT32", DType::kUInt32},
      {"UINT64", DType::kUInt64}, {"BFLOAT16", DType::kBFloat16}};
  for (const auto& p : names)
    if (s == p.first) return p.second;
  fail(MRT_INVALID_MODEL, "unknown element type name \"", s, "\" in attribute 'to'");
}

DType cast_target(const Node& n) {
  const Attribute* a = n.attr("to");
  MRT_ENFORCE(a != nullptr, MRT_INVALID_MODEL, n.label(), ": required attribute 'to' is missing");
  int64_t code = 0;
  if (a->type == AttrType::kString) {
    code = static_cast<int64_t>(parse_legacy_type_name(a->s));
  } else {
    code = n.attr_int("to", 0);
  }
  static const char* const kNarrow[] = {"float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "uint4",
                                        "int4",         "float4e2m1",     "float8e8m0", "uint2",          "int2"};
  MRT_ENFORCE(code < 17 || code > 26, MRT_NOT_IMPLEMENTED, n.label(), ": cast to ", kNarrow[code - 17],
              " is not supported");
  MRT_ENFORCE(code >= 0 && code <= 0x7fffffff && dtype_is_known(static_cast<int32_t>(code)), MRT_INVALID_MODEL,
              n.label(), ": attribute 'to' holds unknown element type ", code);
  const DType dt = static_cast<DType>(code);
  MRT_ENFORCE(dtype_is_storable(dt) && dt != DType::kString, MRT_NOT_IMPLEMENTED, n.label(),
              ": cast to ", dtype_name(dt), " is not supported");
  return dt;
}

void cast_to(OpContext& ctx, const Tensor& x, DType to) {
  MRT_CHECK_IMPL(dtype_is_storable(x.dtype()) && x.dtype() != DType::kString, "cast from ",
                 dtype_name(x.dtype()), " is not supported");
  MRT_CHECK_IMPL(dtype_is_storable(to) && to != DType::kString, "cast to ", dtype_name(to), " is not supported");
  Tensor& y = ctx.output(0, to, x.shape());
  if (x.dtype() == to) {
    if (x.nbytes()) std::memcpy(y.raw(), x.raw(), x.nbytes());
    return;
  }
  MRT_DISPATCH_ALL(x.dtype(), "Cast", {
    using S = T;
    MRT_DISPATCH_ALL(to, "Cast", { cast_apply<S, T>(ctx, x, y); });
  });
}

void cast_check(const Node& n, int64_t) { (void)cast_target(n); }

void cast_kernel(OpContext& ctx) { cast_to(ctx, ctx.input(0), cast_target(ctx.node())); }

void castlike_kernel(OpContext& ctx) { cast_to(ctx, ctx.input(0), ctx.input(1).dtype()); }

}  // namespace

void register_cast_kernels(KernelRegistry& r) {
  r.add("Cast", 1, cast_kernel, cast_check);
  r.add("CastLike", 15, castlike_kernel);
}

}  // namespace ew
}  // namespace mrt
