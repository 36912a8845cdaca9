// Binary elementwise ops with numpy broadcasting: arithmetic (Add, Sub, Mul, Div, Pow,
// Mod, PRelu), bit ops, logic, comparisons, the variadic Sum/Max/Min/Mean and Where.
#include <cstring>
#include <string>

#include "strings.h"
#include "elementwise_common.h"

namespace mrt {
namespace ew {
namespace {

// Unsigned type wide enough to compute wrapping integer arithmetic without UB.
template <class T>
using wrap_t = std::conditional_t<sizeof(T) <= 4, uint32_t, uint64_t>;

// Shape of input 1 after the pre-opset-7 `broadcast`/`axis` attributes are applied.
Shape legacy_b_shape(const OpContext& ctx, const Tensor& a, const Tensor& b) {
  if (ctx.opset() >= 7) return b.shape();
  const Node& n = ctx.node();
  if (n.attr_int("broadcast", 0) == 0) {
    MRT_CHECK_ARG(a.shape() == b.shape(), "inputs ", a.describe(), " and ", b.describe(),
                  " differ in shape and the broadcast attribute is not set");
    return b.shape();
  }
  if (!n.has_attr("axis")) return b.shape();
  const int64_t ra = static_cast<int64_t>(a.rank()), rb = static_cast<int64_t>(b.rank());
  int64_t axis = n.attr_int("axis", 0);
  if (axis < 0) axis += ra;
  MRT_CHECK_ARG(axis >= 0 && axis + rb <= ra, "axis ", n.attr_int("axis", 0), " cannot place ",
                b.describe(), " inside ", a.describe());
  Shape s(static_cast<size_t>(ra), 1);
  for (int64_t i = 0; i < rb; ++i) s[axis + i] = b.dim(i);
  return s;
}

// Inputs 0 and 1 of a binary node, input 1 reshaped by legacy broadcast rules, and
// their broadcast output shape.
struct BinaryArgs {
  const Tensor& a;
  Tensor b;
  Shape out_shape;
};
BinaryArgs binary_args(const OpContext& ctx, bool same_type = true) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (same_type)
    MRT_CHECK_ARG(a.dtype() == b.dtype(), "inputs must have the same element type, got ", a.describe(), " and ",
                  b.describe());
  Shape bs = legacy_b_shape(ctx, a, b);
  Tensor bv = bs == b.shape() ? b : Tensor::reshaped(b, bs);
  Shape out = broadcast_shapes(a.shape(), bs);
  return BinaryArgs{a, bv, out};
}

// ---- arithmetic functors over compute types ----
struct AddOp {
  template <class T> T operator()(T a, T b) const {
    if constexpr (std::is_integral<T>::value) return static_cast<T>(wrap_t<T>(a) + wrap_t<T>(b));
    else return a + b;
  }
};
struct SubOp {
  template <class T> T operator()(T a, T b) const {
    if constexpr (std::is_integral<T>::value) return static_cast<T>(wrap_t<T>(a) - wrap_t<T>(b));
    else return a - b;
  }
};
struct MulOp {
  template <class T> T operator()(T a, T b) const {
    if constexpr (std::is_integral<T>::value) return static_cast<T>(wrap_t<T>(a) * wrap_t<T>(b));
    else return a * b;
  }
};
struct DivOp {
  template <class T> T operator()(T a, T b) const {
    if constexpr (std::is_integral<T>::value) {
      if (b == 0) fail(MRT_INVALID_ARGUMENT, "integer division by zero");
      if constexpr (std::is_signed<T>::value) {
        if (b == -1) return static_cast<T>(wrap_t<T>(0) - wrap_t<T>(a));
      }
      return static_cast<T>(a / b);
    } else {
      return a / b;
    }
  }
};
// Mod with the sign of the divisor (numpy.mod / Python %).
struct ModFloorOp {
  template <class T> T operator()(T a, T b) const {
    if constexpr (std::is_integral<T>::value) {
      if (b == 0) fail(MRT_INVALID_ARGUMENT, "integer modulo by zero");
      if constexpr (std::is_signed<T>::value) {
        if (b == -1) return 0;
        T m = static_cast<T>(a % b);
        if (m != 0 && ((m < 0) != (b < 0))) m = static_cast<T>(m + b);
        return m;
      } else {
        return static_cast<T>(a % b);
      }
    } else {
      T m = std::fmod(a, b);
      if (b == 0) return m;  // NaN
      if (m != 0) {
        if ((b < 0) != (m < 0)) m += b;
      } else {
        m = std::copysign(T(0), b);
      }
      return m;
    }
  }
};
// Mod with the sign of the dividend (C fmod / truncated remainder).
struct ModTruncOp {
  template <class T> T operator()(T a, T b) const {
    if constexpr (std::is_integral<T>::value) {
      if (b == 0) fail(MRT_INVALID_ARGUMENT, "integer modulo by zero");
      if constexpr (std::is_signed<T>::value) {
        if (b == -1) return 0;
      }
      return static_cast<T>(a % b);
    } else {
      return std::fmod(a, b);
    }
  }
};
struct PReluOp {
  template <class T> T operator()(T x, T s) const {
    if constexpr (std::is_unsigned<T>::value) {
      return x;
    } else {
      if constexpr (std::is_floating_point<T>::value) {
        return select_negative(x, x * s, x);  // (a select, not a branch; see LeakyReluF)
      } else {
        return x < 0 ? MulOp()(x, s) : x;
      }
    }
  }
};
struct MaxOp {  // NaN-propagating
  template <class T> T operator()(T a, T b) const {
    if constexpr (std::is_floating_point<T>::value) return (a > b || a != a) ? a : b;
    else return a > b ? a : b;
  }
};
struct MinOp {
  template <class T> T operator()(T a, T b) const {
    if constexpr (std::is_floating_point<T>::value) return (a < b || a != a) ? a : b;
    else return a < b ? a : b;
  }
};
struct BitAndOp { template <class T> T operator()(T a, T b) const { return static_cast<T>(a & b); } };
struct BitOrOp { template <class T> T operator()(T a, T b) const { return static_cast<T>(a | b); } };
struct BitXorOp { template <class T> T operator()(T a, T b) const { return static_cast<T>(a ^ b); } };

struct ShiftLeftOp {
  template <class T> T operator()(T a, T b) const {
    constexpr int64_t bits = 8 * sizeof(T);
    if (static_cast<int64_t>(b) < 0 || static_cast<int64_t>(b) >= bits) return 0;
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) << static_cast<int>(b)));
  }
};
struct ShiftRightOp {
  template <class T> T operator()(T a, T b) const {
    constexpr int64_t bits = 8 * sizeof(T);
    if (static_cast<int64_t>(b) < 0 || static_cast<int64_t>(b) >= bits) {
      if constexpr (std::is_signed<T>::value) return a < 0 ? T(-1) : T(0);
      else return 0;
    }
    return static_cast<T>(a >> static_cast<int>(b));  // arithmetic for signed (C++20 / gcc)
  }
};

// Applies Op to two tensors of storage type T (16-bit floats computed in float).
template <class T, class Op>
void apply_same(OpContext& ctx, const Tensor& a, const Tensor& b, Tensor& out, Op op) {
  binary_apply<T, T, T>(ctx, a, b, out, Lift2<T, Op>{op});
}

template <class Op>
void arith_kernel_impl(OpContext& ctx, const char* what, bool allow_int, Op op) {
  BinaryArgs args = binary_args(ctx);
  const DType dt = args.a.dtype();
  Tensor& out = ctx.output(0, dt, args.out_shape);
  if (!allow_int) {
    MRT_EW_DISPATCH_FLOATLIKE(dt, what, { apply_same<T>(ctx, args.a, args.b, out, op); });
  } else {
    MRT_EW_DISPATCH_NUMERIC(dt, what, { apply_same<T>(ctx, args.a, args.b, out, op); });
  }
}

void add_kernel(OpContext& ctx) { arith_kernel_impl(ctx, "Add", true, AddOp{}); }
void sub_kernel(OpContext& ctx) { arith_kernel_impl(ctx, "Sub", true, SubOp{}); }
void mul_kernel(OpContext& ctx) { arith_kernel_impl(ctx, "Mul", true, MulOp{}); }
void div_kernel(OpContext& ctx) { arith_kernel_impl(ctx, "Div", true, DivOp{}); }
void prelu_kernel(OpContext& ctx) { arith_kernel_impl(ctx, "PRelu", true, PReluOp{}); }

void mod_kernel(OpContext& ctx) {
  if (ctx.node().attr_int("fmod", 0) != 0) arith_kernel_impl(ctx, "Mod", true, ModTruncOp{});
  else arith_kernel_impl(ctx, "Mod", true, ModFloorOp{});
}

void mod_check(const Node& n, int64_t) {
  const int64_t f = n.attr_int("fmod", 0);
  MRT_ENFORCE(f == 0 || f == 1, MRT_INVALID_MODEL, n.label(), ": fmod must be 0 or 1, got ", f);
}

template <class Op>
void bitwise_kernel_impl(OpContext& ctx, const char* what, Op op) {
  BinaryArgs args = binary_args(ctx);
  const DType dt = args.a.dtype();
  Tensor& out = ctx.output(0, dt, args.out_shape);
  MRT_DISPATCH_INTEGER(dt, what, { binary_apply<T, T, T>(ctx, args.a, args.b, out, op); });
}
void bitand_kernel(OpContext& ctx) { bitwise_kernel_impl(ctx, "BitwiseAnd", BitAndOp{}); }
void bitor_kernel(OpContext& ctx) { bitwise_kernel_impl(ctx, "BitwiseOr", BitOrOp{}); }
void bitxor_kernel(OpContext& ctx) { bitwise_kernel_impl(ctx, "BitwiseXor", BitXorOp{}); }

void bitshift_kernel(OpContext& ctx) {
  const std::string dir = ctx.node().attr_string("direction", "");
  if (dir == "LEFT") bitwise_kernel_impl(ctx, "BitShift", ShiftLeftOp{});
  else bitwise_kernel_impl(ctx, "BitShift", ShiftRightOp{});
}
void bitshift_check(const Node& n, int64_t) {
  const std::string dir = n.attr_string("direction", "");
  MRT_ENFORCE(dir == "LEFT" || dir == "RIGHT", MRT_INVALID_MODEL, n.label(),
              ": direction must be \"LEFT\" or \"RIGHT\", got \"", dir, "\"");
}

// ---- logic (bool) ----
template <class Op>
void logic_kernel_impl(OpContext& ctx, const char* what, Op op) {
  BinaryArgs args = binary_args(ctx);
  MRT_CHECK_IMPL(args.a.dtype() == DType::kBool, what, ": element type ", dtype_name(args.a.dtype()),
                 " is not supported (bool only)");
  Tensor& out = ctx.output(0, DType::kBool, args.out_shape);
  binary_apply<bool, bool, bool>(ctx, args.a, args.b, out, op);
}
void and_kernel(OpContext& ctx) { logic_kernel_impl(ctx, "And", [](bool a, bool b) { return a && b; }); }
void or_kernel(OpContext& ctx) { logic_kernel_impl(ctx, "Or", [](bool a, bool b) { return a || b; }); }
void xor_kernel(OpContext& ctx) { logic_kernel_impl(ctx, "Xor", [](bool a, bool b) { return a != b; }); }

// ---- comparisons (bool output) ----
struct EqOp { template <class T> bool operator()(T a, T b) const { return a == b; } };
struct LtOp { template <class T> bool operator()(T a, T b) const { return a < b; } };
struct GtOp { template <class T> bool operator()(T a, T b) const { return a > b; } };
struct LeOp { template <class T> bool operator()(T a, T b) const { return a <= b; } };
struct GeOp { template <class T> bool operator()(T a, T b) const { return a >= b; } };

template <class T, class Op>
struct CmpLift {
  Op op;
  inline bool operator()(T a, T b) const { return op(Compute<T>::load(a), Compute<T>::load(b)); }
};

template <class Op>
void compare_kernel_impl(OpContext& ctx, const char* what, Op op) {
  BinaryArgs args = binary_args(ctx);
  const DType dt = args.a.dtype();
  Tensor& out = ctx.output(0, DType::kBool, args.out_shape);
  MRT_DISPATCH_ALL(dt, what, { binary_apply<T, T, bool>(ctx, args.a, args.b, out, CmpLift<T, Op>{op}); });
}
void equal_kernel(OpContext& ctx) {
  if (ctx.input(0).dtype() == DType::kString) return string_equal(ctx);
  compare_kernel_impl(ctx, "Equal", EqOp{});
}
void less_kernel(OpContext& ctx) { compare_kernel_impl(ctx, "Less", LtOp{}); }
void greater_kernel(OpContext& ctx) { compare_kernel_impl(ctx, "Greater", GtOp{}); }
void less_equal_kernel(OpContext& ctx) { compare_kernel_impl(ctx, "LessOrEqual", LeOp{}); }
void greater_equal_kernel(OpContext& ctx) { compare_kernel_impl(ctx, "GreaterOrEqual", GeOp{}); }

// ---- Pow: base type T, exponent of any numeric type ----
template <class T>
T int_pow(T base, int64_t e) {
  if (e < 0) {
    if (base == 1) return 1;
    if constexpr (std::is_signed<T>::value) {
      if (base == -1) return (e & 1) ? T(-1) : T(1);
    }
    return 0;
  }
  wrap_t<T> result = 1, b = static_cast<wrap_t<T>>(base);
  while (e) {
    if (e & 1) result *= b;
    b *= b;
    e >>= 1;
  }
  return static_cast<T>(result);
}

// Converts a float to an integer type without undefined behaviour (NaN -> 0, saturating).
template <class T>
T float_to_int_sat(double v) {
  if (std::isnan(v)) return 0;
  if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

struct MulSelf { template <class C> C operator()(C x) const { return x * x; } };
struct SqrtF { template <class C> C operator()(C x) const { return std::sqrt(x); } };
struct PowF { template <class C> C operator()(C x, C e) const { return std::pow(x, e); } };

template <class T>
void pow_same(OpContext& ctx, const Tensor& a, const Tensor& b, Tensor& out) {
  using C = compute_t<T>;
  if constexpr (std::is_floating_point<C>::value) {
    // Fast paths for a scalar exponent (x^2 in normalization subgraphs).
    if (b.numel() == 1 && out.shape() == a.shape()) {
      const C e = Compute<T>::load(b.data_as<T>()[0]);
      if (e == C(2)) return unary_apply<T, T>(ctx, a, out, Lift1<T, MulSelf>{});
      if (e == C(1)) return unary_apply<T, T>(ctx, a, out, [](T x) { return x; });
      if (e == C(0.5)) return unary_apply<T, T>(ctx, a, out, Lift1<T, SqrtF>{});
    }
    binary_apply<T, T, T>(ctx, a, b, out, Lift2<T, PowF>{});
  } else {
    binary_apply<T, T, T>(ctx, a, b, out, [](T x, T e) {
      if constexpr (std::is_signed<T>::value) return int_pow<T>(x, static_cast<int64_t>(e));
      else return int_pow<T>(x, static_cast<int64_t>(std::min<uint64_t>(e, uint64_t(1) << 62)));
    });
  }
}

// Base of type T, exponent already converted to double.
template <class T>
void pow_mixed(OpContext& ctx, const Tensor& a, const Tensor& e, Tensor& out) {
  binary_apply<T, double, T>(ctx, a, e, out, [](T x, double y) -> T {
    if constexpr (is_floatlike_v<T>) {
      using C = compute_t<T>;
      return Compute<T>::store(static_cast<C>(std::pow(static_cast<double>(Compute<T>::load(x)), y)));
    } else {
      if (y == std::floor(y) && std::fabs(y) < 4e18) return int_pow<T>(x, static_cast<int64_t>(y));
      return float_to_int_sat<T>(std::pow(static_cast<double>(x), y));
    }
  });
}

void pow_kernel(OpContext& ctx) {
  BinaryArgs args = binary_args(ctx, /*same_type=*/false);
  const Tensor& a = args.a;
  const Tensor& b = args.b;
  const DType dt = a.dtype();
  Tensor& out = ctx.output(0, dt, args.out_shape);
  if (b.dtype() == dt) {
    MRT_EW_DISPATCH_NUMERIC(dt, "Pow", { pow_same<T>(ctx, a, b, out); });
    return;
  }
  MRT_CHECK_IMPL(b.dtype() != DType::kBool && dtype_size(b.dtype()) > 0, "Pow: exponent type ",
                 dtype_name(b.dtype()), " is not supported");
  Tensor e(DType::kDouble, b.shape(), ctx.allocator());
  double* ed = e.data<double>();
  for (int64_t i = 0; i < b.numel(); ++i) ed[i] = b.scalar_as_double(i);
  MRT_EW_DISPATCH_NUMERIC(dt, "Pow", { pow_mixed<T>(ctx, a, e, out); });
}

// ---- variadic Sum / Max / Min / Mean ----
template <class T, class Op>
void variadic_apply(OpContext& ctx, Tensor& out, Op op) {
  const size_t n = ctx.input_count();
  const Tensor& x0 = ctx.input(0);
  if (n == 1) {
    std::memcpy(out.raw(), x0.raw(), out.nbytes());
    return;
  }
  for (size_t i = 1; i < n; ++i)
    MRT_CHECK_ARG(ctx.input(i).dtype() == x0.dtype(), "all inputs must have the same element type, input ", i,
                  " is ", ctx.input(i).describe(), " and input 0 is ", x0.describe());
  binary_apply<T, T, T>(ctx, x0, ctx.input(1), out, Lift2<T, Op>{op});
  // Later inputs fold into the output in place (out has the full broadcast shape).
  for (size_t i = 2; i < n; ++i) binary_apply<T, T, T>(ctx, out, ctx.input(i), out, Lift2<T, Op>{op});
}

template <class Op>
void variadic_kernel_impl(OpContext& ctx, const char* what, bool floats_only, bool mean, Op op) {
  for (size_t i = 0; i < ctx.input_count(); ++i)
    MRT_CHECK_ARG(ctx.has_input(i), what, ": input ", i, " is missing");
  const Shape shape = broadcast_all(ctx);
  const DType dt = ctx.input(0).dtype();
  Tensor& out = ctx.output(0, dt, shape);
  if (floats_only) {
    MRT_EW_DISPATCH_FLOATLIKE(dt, what, {
      variadic_apply<T>(ctx, out, op);
      if (mean && ctx.input_count() > 1) {
        using C = compute_t<T>;
        const C inv = C(1) / static_cast<C>(ctx.input_count());
        unary_apply<T, T>(ctx, out, out, [inv](T x) { return Compute<T>::store(Compute<T>::load(x) * inv); });
      }
    });
  } else {
    MRT_EW_DISPATCH_NUMERIC(dt, what, { variadic_apply<T>(ctx, out, op); });
  }
}
void sum_kernel(OpContext& ctx) { variadic_kernel_impl(ctx, "Sum", true, false, AddOp{}); }
void mean_kernel(OpContext& ctx) { variadic_kernel_impl(ctx, "Mean", true, true, AddOp{}); }
void max_kernel(OpContext& ctx) { variadic_kernel_impl(ctx, "Max", false, false, MaxOp{}); }
void min_kernel(OpContext& ctx) { variadic_kernel_impl(ctx, "Min", false, false, MinOp{}); }

// ---- Where ----
template <class U>
void where_apply(OpContext& ctx, const Tensor& c, const Tensor& x, const Tensor& y, Tensor& out) {
  const bool* cd = c.data_as<bool>();
  const U* xd = x.data_as<U>();
  const U* yd = y.data_as<U>();
  U* od = out.data_as<U>();
  if (c.shape() == out.shape() && x.shape() == out.shape() && y.shape() == out.shape()) {
    const int64_t n = out.numel();
    auto body = [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) od[i] = cd[i] ? xd[i] : yd[i];
    };
    if (n < 2 * kGrain) body(0, n);
    else ctx.threads().parallel_for(n, kGrain, body);
    return;
  }
  BroadcastPlan plan(out.shape(), {&c.shape(), &x.shape(), &y.shape()});
  const int64_t sc = plan.inner_stride[0], sx = plan.inner_stride[1], sy = plan.inner_stride[2];
  plan.run(ctx, [&](int64_t oc, int64_t ox, int64_t oy, int64_t oo, int64_t n) {
    const bool* cp = cd + oc;
    const U* xp = xd + ox;
    const U* yp = yd + oy;
    U* op = od + oo;
    for (int64_t i = 0; i < n; ++i) op[i] = cp[i * sc] ? xp[i * sx] : yp[i * sy];
  });
}

void where_kernel(OpContext& ctx) {
  const Tensor& c = ctx.input(0);
  const Tensor& x = ctx.input(1);
  const Tensor& y = ctx.input(2);
  MRT_CHECK_ARG(c.dtype() == DType::kBool, "condition must be bool, got ", c.describe());
  MRT_CHECK_ARG(x.dtype() == y.dtype(), "X and Y must have the same element type, got ", x.describe(), " and ",
                y.describe());
  const Shape shape = broadcast_shapes(broadcast_shapes(c.shape(), x.shape()), y.shape());
  Tensor& out = ctx.output(0, x.dtype(), shape);
  switch (dtype_size(x.dtype())) {
    case 1: where_apply<uint8_t>(ctx, c, x, y, out); break;
    case 2: where_apply<uint16_t>(ctx, c, x, y, out); break;
    case 4: where_apply<uint32_t>(ctx, c, x, y, out); break;
    case 8: where_apply<uint64_t>(ctx, c, x, y, out); break;
    default: fail(MRT_NOT_IMPLEMENTED, "Where: element type ", dtype_name(x.dtype()), " is not supported");
  }
}

}  // namespace

void register_binary_kernels(KernelRegistry& r) {
  r.add("Add", 1, add_kernel);
  r.add("Sub", 1, sub_kernel);
  r.add("Mul", 1, mul_kernel);
  r.add("Div", 1, div_kernel);
  r.add("Pow", 1, pow_kernel);
  r.add("Mod", 10, mod_kernel, mod_check);
  r.add("PRelu", 1, prelu_kernel);
  r.add("BitShift", 11, bitshift_kernel, bitshift_check);
  r.add("BitwiseAnd", 18, bitand_kernel);
  r.add("BitwiseOr", 18, bitor_kernel);
  r.add("BitwiseXor", 18, bitxor_kernel);
  r.add("And", 1, and_kernel);
  r.add("Or", 1, or_kernel);
  r.add("Xor", 1, xor_kernel);
  r.add("Equal", 1, equal_kernel);
  r.add("Less", 1, less_kernel);
  r.add("Greater", 1, greater_kernel);
  r.add("LessOrEqual", 12, less_equal_kernel);
  r.add("GreaterOrEqual", 12, greater_equal_kernel);
  r.add("Sum", 1, sum_kernel);
  r.add("Mean", 1, mean_kernel);
  r.add("Max", 1, max_kernel);
  r.add("Min", 1, min_kernel);
  r.add("Where", 9, where_kernel);
}

}  // namespace ew
}  // namespace mrt
