// Cast and CastLike between every storable type: float, double, float16, bfloat16, bool,
// all integers and the narrow types (float8 e4m3fn/e4m3fnuz/e5m2/e5m2fnuz/e8m0, float4
// e2m1, int4/uint4, int2/uint2). Float -> integer conversions saturate and map NaN to 0
// (the C++ conversion would be undefined there); float -> int4/int2 truncates and keeps
// the low bits, as the other integer casts do for integers. Float8 targets follow the
// `saturate` attribute, float8e8m0 also `round_mode`. String tensors are rejected.
#include <cstring>
#include <string>

#include "../gemm/sgemm.h"
#include "elementwise_common.h"
#include "elementwise_math.h"
#include "strings.h"
#include "narrow_dtype.h"

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
  MRT_ENFORCE(code >= 0 && code <= 0x7fffffff && dtype_is_known(static_cast<int32_t>(code)), MRT_INVALID_MODEL,
              n.label(), ": attribute 'to' holds unknown element type ", code);
  const DType dt = static_cast<DType>(code);
  MRT_ENFORCE(dtype_is_storable(dt), MRT_NOT_IMPLEMENTED, n.label(),
              ": cast to ", dtype_name(dt), " is not supported");
  return dt;
}

// The rounding/saturation attributes (opset 19: saturate, opset 24: round_mode).
struct CastMode {
  bool saturate = true;
  narrow::E8M0Round round = narrow::E8M0Round::kUp;
};

CastMode cast_mode(const Node& n) {
  CastMode m;
  m.saturate = n.attr_int("saturate", 1) != 0;
  const std::string r = n.attr_string("round_mode", "up");
  if (r == "up") m.round = narrow::E8M0Round::kUp;
  else if (r == "down") m.round = narrow::E8M0Round::kDown;
  else if (r == "nearest") m.round = narrow::E8M0Round::kNearest;
  else fail(MRT_INVALID_MODEL, n.label(), ": attribute round_mode is '", r, "'; expected up, down or nearest");
  return m;
}

// One value on its way through a narrow cast: integers stay exact as int64.
struct Wide {
  bool is_int;
  int64_t i;
  double d;
};

template <class S>
inline Wide widen(S v) {
  if constexpr (std::is_same<S, bool>::value) return {true, v ? 1 : 0, v ? 1.0 : 0.0};
  else if constexpr (std::is_integral<S>::value)
    return {true, static_cast<int64_t>(v), static_cast<double>(v)};
  else return {false, 0, static_cast<double>(load_wide(v))};
}

inline uint8_t encode_narrow(DType to, const Wide& w, const CastMode& m) {
  if (narrow::is_integer(to)) {
    if (w.is_int) return narrow::encode_int_wrap(to, w.i);
    if (!std::isfinite(w.d)) return 0;
    const double t = std::trunc(w.d);
    if (std::fabs(t) >= 9.2e18) return 0;
    return narrow::encode_int_wrap(to, static_cast<int64_t>(t));
  }
  if (to == DType::kFloat8E8M0) return narrow::encode_e8m0(static_cast<float>(w.d), m.saturate, m.round);
  return narrow::encode_float(to, w.d, m.saturate);
}

// Casts where the source or the target (or both) is a narrow type.
void cast_narrow(OpContext& ctx, const Tensor& x, Tensor& y, const CastMode& m) {
  const DType from = x.dtype(), to = y.dtype();
  const int64_t n = x.numel();
  if (dtype_is_narrow(from)) {
    const double* table = narrow::decode_table(from);
    const bool int_src = narrow::is_integer(from);
    const uint8_t* src = x.data_as<uint8_t>();
    if (dtype_is_narrow(to)) {
      uint8_t* dst = y.data_as<uint8_t>();
      for (int64_t i = 0; i < n; ++i) {
        const double d = table[src[i]];
        dst[i] = encode_narrow(to, Wide{int_src, static_cast<int64_t>(int_src ? d : 0), d}, m);
      }
      return;
    }
    MRT_DISPATCH_ALL(to, "Cast", {
      T* dst = y.data<T>();
      if (int_src) {
        for (int64_t i = 0; i < n; ++i) dst[i] = convert<T, int64_t>(static_cast<int64_t>(table[src[i]]));
      } else {
        for (int64_t i = 0; i < n; ++i) dst[i] = convert<T, double>(table[src[i]]);
      }
    });
    return;
  }
  MRT_DISPATCH_ALL(from, "Cast", {
    unary_apply<T, uint8_t>(ctx, x, y, [&](T v) { return encode_narrow(to, widen<T>(v), m); });
  });
}

void cast_to(OpContext& ctx, const Tensor& x, DType to, const CastMode& m) {
  if (x.dtype() == DType::kString || to == DType::kString) return string_cast(ctx, x, to);
  MRT_CHECK_IMPL(dtype_is_storable(x.dtype()) && x.dtype() != DType::kString, "cast from ",
                 dtype_name(x.dtype()), " is not supported");
  MRT_CHECK_IMPL(dtype_is_storable(to) && to != DType::kString, "cast to ", dtype_name(to), " is not supported");
  Tensor& y = ctx.output(0, to, x.shape());
  if (x.dtype() == to) {
    if (x.nbytes()) std::memcpy(y.raw(), x.raw(), x.nbytes());
    return;
  }
  if (dtype_is_narrow(x.dtype()) || dtype_is_narrow(to)) {
    cast_narrow(ctx, x, y, m);
    return;
  }
  // float <-> float16 in bulk (on the CPU's conversion instructions where it has them: one out-of-line
  // bit-twiddling call per element took 20 times onnxruntime's time)
  const bool to_half = x.dtype() == DType::kFloat && to == DType::kFloat16;
  if (to_half || (x.dtype() == DType::kFloat16 && to == DType::kFloat)) {
    const int64_t n = x.numel();
    auto run = [&](int64_t b, int64_t e) {
      if (to_half) floats_to_halves(x.data<float>() + b, y.data_as<uint16_t>() + b, e - b);
      else halves_to_floats(x.data_as<uint16_t>() + b, y.data<float>() + b, e - b);
    };
    if (n >= int64_t{1} << 16) ctx.threads().parallel_for(n, int64_t{1} << 14, run);
    else run(0, n);
    return;
  }
  MRT_DISPATCH_ALL(x.dtype(), "Cast", {
    using S = T;
    MRT_DISPATCH_ALL(to, "Cast", { cast_apply<S, T>(ctx, x, y); });
  });
}


void cast_check(const Node& n, int64_t) {
  (void)cast_target(n);
  (void)cast_mode(n);
}

void castlike_check(const Node& n, int64_t) { (void)cast_mode(n); }

void cast_kernel(OpContext& ctx) { cast_to(ctx, ctx.input(0), cast_target(ctx.node()), cast_mode(ctx.node())); }

void castlike_kernel(OpContext& ctx) {
  cast_to(ctx, ctx.input(0), ctx.input(1).dtype(), cast_mode(ctx.node()));
}

}  // namespace

void register_cast_kernels(KernelRegistry& r) {
  r.add("Cast", 1, cast_kernel, cast_check);
  r.add("CastLike", 15, castlike_kernel, castlike_check);
}

}  // namespace ew

void halves_to_floats(const uint16_t* x, float* y, int64_t n) {
#if defined(MOSAICRT_X86_SIMD)
  if (sgemm_kernel_is_avx512()) return fastmath::halves_to_floats_avx512(x, y, n);
#endif
  for (int64_t i = 0; i < n; ++i) y[i] = half_to_float(x[i]);
}

void floats_to_halves(const float* x, uint16_t* y, int64_t n) {
#if defined(MOSAICRT_X86_SIMD)
  if (sgemm_kernel_is_avx512()) return fastmath::floats_to_halves_avx512(x, y, n);
#endif
  for (int64_t i = 0; i < n; ++i) y[i] = float_to_half(x[i]);
}

}  // namespace mrt
