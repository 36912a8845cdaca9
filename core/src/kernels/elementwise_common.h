// Shared machinery of the elementwise kernel group: numpy-style broadcast iteration,
// 16-bit float load/store adapters, type dispatch for float-like types and helpers
// that run a functor over whole tensors in parallel.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "../kernel.h"
#include "elementwise_math.h"

namespace mrt {
namespace ew {

// Elements per parallel task for cheap elementwise loops.
constexpr int64_t kGrain = 16384;

// Storage <-> compute type adapters: 16-bit floats are computed in float.
template <class T> struct Compute {
  using type = T;
  static inline T load(T v) { return v; }
  static inline T store(T v) { return v; }
};
template <> struct Compute<Float16> {
  using type = float;
  static inline float load(Float16 v) { return half_to_float(v.bits); }
  static inline Float16 store(float v) { return Float16{float_to_half(v)}; }
};
template <> struct Compute<BFloat16> {
  using type = float;
  static inline float load(BFloat16 v) { return bfloat16_to_float(v.bits); }
  static inline BFloat16 store(float v) { return BFloat16{float_to_bfloat16(v)}; }
};
template <class T> using compute_t = typename Compute<T>::type;

template <class T> constexpr bool is_half_v = std::is_same<T, Float16>::value || std::is_same<T, BFloat16>::value;
template <class T> constexpr bool is_floatlike_v = std::is_floating_point<T>::value || is_half_v<T>;

// A broadcast iteration plan for up to 3 inputs against one output shape. Dimensions
// are coalesced where every operand is contiguous (or broadcast) across them, so the
// work becomes `rows` runs of `inner` elements; within a run each input advances by 0
// (broadcast) or 1.
struct BroadcastPlan {
  Shape out_shape;
  int64_t numel = 0;
  int64_t inner = 1;
  int64_t rows = 0;
  int n_inputs = 0;
  std::vector<int64_t> dims;                       // outer coalesced dims (without the inner one)
  std::vector<std::array<int64_t, 3>> strides;     // per outer dim, per input
  std::array<int64_t, 3> inner_stride{{0, 0, 0}};  // 0 or 1

  BroadcastPlan(const Shape& out, const std::vector<const Shape*>& ins);

  // A row's work: fn(state, offset_in0, offset_in1, offset_in2, out_offset, count). The walk over the rows is
  // compiled once (elementwise.cc), not once per operator and element type: only the row call differs.
  using RowFn = void (*)(const void* state, int64_t o0, int64_t o1, int64_t o2, int64_t out, int64_t n);

  // Calls fn for rows [r0, r1).
  void for_rows(int64_t r0, int64_t r1, RowFn fn, const void* state) const;
  // Runs fn over all rows, split across the pool when the work is large.
  void run(OpContext& ctx, RowFn fn, const void* state) const;
  // The same with a callable fn(offset_in0, offset_in1, offset_in2, out_offset, count).
  template <class F>
  void run(OpContext& ctx, const F& fn) const {
    run(ctx, [](const void* state, int64_t o0, int64_t o1, int64_t o2, int64_t out, int64_t n) {
      (*static_cast<const F*>(state))(o0, o1, o2, out, n);
    }, &fn);
  }
};

// Lifts a functor over compute types to storage types (identity for float/double/ints).
template <class T, class F>
struct Lift1 {
  F f;
  inline T operator()(T x) const { return Compute<T>::store(f(Compute<T>::load(x))); }
};
template <class T, class F>
struct Lift2 {
  F f;
  inline T operator()(T a, T b) const {
    return Compute<T>::store(f(Compute<T>::load(a), Compute<T>::load(b)));
  }
};

// x < 0 ? neg : pos for float or double, as a bitwise select on the comparison's mask: a loop of these is one
// the compiler vectorizes, where a conditional expression over floats stays a branch (mispredicted on every
// other value of random sign). NaN x is not below 0: pos.
template <class C>
inline C select_negative(C x, C neg, C pos) {
  using Bits = std::conditional_t<sizeof(C) == 4, uint32_t, uint64_t>;
  Bits n, p;
  std::memcpy(&n, &neg, sizeof(C));
  std::memcpy(&p, &pos, sizeof(C));
  const Bits mask = Bits{0} - static_cast<Bits>(x < C(0));
  const Bits r = (n & mask) | (p & ~mask);
  C out;
  std::memcpy(&out, &r, sizeof(C));
  return out;
}

// Elements of a float16 run converted at a time (to float and back in bulk, on the CPU's conversion
// instructions where it has them: one conversion call per element and operand made float16 Add 15 times,
// Relu 50 times slower than onnxruntime).
constexpr int64_t kHalfBlock = 256;

// Inner loop of a binary op: o[i] = f(a[i*sa], b[i*sb]) with sa, sb in {0,1}. Separate
// branches so the compiler vectorizes each case. Kept out of line: binary_apply calls it from three
// places (same shape, broadcast rows, split rows), and one vectorized copy per functor and type is
// enough (the call costs nothing next to a row; it halves the kernels' compile time).
template <class A, class B, class O, class F>
#if defined(__GNUC__)
__attribute__((noinline))
#endif
void binary_run(const A* a, int64_t sa, const B* b, int64_t sb, O* o, int64_t n, F& f) {
  if (sa && sb) {
    for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], b[i]);
  } else if (sb) {
    const A av = a[0];
    for (int64_t i = 0; i < n; ++i) o[i] = f(av, b[i]);
  } else if (sa) {
    const B bv = b[0];
    for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], bv);
  } else {
    const O v = f(a[0], b[0]);
    for (int64_t i = 0; i < n; ++i) o[i] = v;
  }
}

// The same over float16 storage: blocks of the run converted to float, f's float function applied, converted
// back (the values a Lift2 gives element by element).
template <class F>
#if defined(__GNUC__)
__attribute__((noinline))
#endif
void binary_run(const Float16* a, int64_t sa, const Float16* b, int64_t sb, Float16* o, int64_t n,
                Lift2<Float16, F>& f) {
  if (n <= 0) return;
  float fa[kHalfBlock], fb[kHalfBlock], fo[kHalfBlock];
  const float av = half_to_float(a[0].bits), bv = half_to_float(b[0].bits);
  for (int64_t i0 = 0; i0 < n; i0 += kHalfBlock) {
    const int64_t m = std::min(kHalfBlock, n - i0);
    if (sa) halves_to_floats(&a[i0].bits, fa, m);
    if (sb) halves_to_floats(&b[i0].bits, fb, m);
    if (sa && sb) {
      for (int64_t i = 0; i < m; ++i) fo[i] = f.f(fa[i], fb[i]);
    } else if (sb) {
      for (int64_t i = 0; i < m; ++i) fo[i] = f.f(av, fb[i]);
    } else if (sa) {
      for (int64_t i = 0; i < m; ++i) fo[i] = f.f(fa[i], bv);
    } else {
      const float v = f.f(av, bv);
      for (int64_t i = 0; i < m; ++i) fo[i] = v;
    }
    floats_to_halves(fo, &o[i0].bits, m);
  }
}

// Inner loop of a unary op: y[i] = f(x[i]); float16 in blocks as binary_run does.
template <class I, class O, class F>
inline void unary_run(const I* x, O* y, int64_t n, F& f) {
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
}
template <class F>
inline void unary_run(const Float16* x, Float16* y, int64_t n, Lift1<Float16, F>& f) {
  float fx[kHalfBlock];
  for (int64_t i0 = 0; i0 < n; i0 += kHalfBlock) {
    const int64_t m = std::min(kHalfBlock, n - i0);
    halves_to_floats(&x[i0].bits, fx, m);
    for (int64_t i = 0; i < m; ++i) fx[i] = f.f(fx[i]);
    floats_to_halves(fx, &y[i0].bits, m);
  }
}

// out = f(a, b) elementwise with broadcasting; out is allocated by the caller with
// the broadcast shape. f takes and returns storage types.
template <class A, class B, class O, class F>
void binary_apply(OpContext& ctx, const Tensor& ta, const Tensor& tb, Tensor& out, F f) {
  const A* a = ta.data_as<A>();
  const B* b = tb.data_as<B>();
  O* o = out.data_as<O>();
  // `out` may be larger than a and b broadcast together (a variadic op's first pair): the flat path
  // needs all three equal.
  if (ta.shape() == tb.shape() && ta.shape() == out.shape()) {
    const int64_t n = out.numel();
    if (n < 2 * kGrain) {
      binary_run(a, 1, b, 1, o, n, f);
    } else {
      ctx.threads().parallel_for(n, kGrain, [&](int64_t s, int64_t e) {
        binary_run(a + s, 1, b + s, 1, o + s, e - s, f);
      });
    }
    return;
  }
  BroadcastPlan plan(out.shape(), {&ta.shape(), &tb.shape()});
  const int64_t sa = plan.inner_stride[0], sb = plan.inner_stride[1];
  plan.run(ctx, [&](int64_t oa, int64_t ob, int64_t, int64_t oo, int64_t n) {
    binary_run(a + oa, sa, b + ob, sb, o + oo, n, f);
  });
}

// out[i] = f(in[i]) over a whole tensor (same shape).
template <class I, class O, class F>
void unary_apply(OpContext& ctx, const Tensor& in, Tensor& out, F f) {
  const I* x = in.data_as<I>();
  O* y = out.data_as<O>();
  const int64_t n = in.numel();
  if (n < 2 * kGrain) {
    unary_run(x, y, n, f);
    return;
  }
  ctx.threads().parallel_for(n, kGrain, [&](int64_t s, int64_t e) { unary_run(x + s, y + s, e - s, f); });
}


// Shape of the broadcast of all inputs of a variadic op.
Shape broadcast_all(const OpContext& ctx);

// Sub-group registration (each in its own source file).
void register_binary_kernels(KernelRegistry& r);
void register_unary_kernels(KernelRegistry& r);
void register_cast_kernels(KernelRegistry& r);

}  // namespace ew
}  // namespace mrt

// Dispatch over float, double, float16, bfloat16.
#define MRT_EW_DISPATCH_FLOATLIKE(dt, what, ...)             \
  switch (dt) {                                              \
    MRT_DTYPE_CASE(kFloat, float, __VA_ARGS__)               \
    MRT_DTYPE_CASE(kDouble, double, __VA_ARGS__)             \
    MRT_DTYPE_CASE(kFloat16, ::mrt::Float16, __VA_ARGS__)    \
    MRT_DTYPE_CASE(kBFloat16, ::mrt::BFloat16, __VA_ARGS__)  \
    MRT_DISPATCH_FAIL(dt, what);                             \
  }

// Dispatch over every numeric type: floats (incl. 16-bit) and all integers, no bool.
#define MRT_EW_DISPATCH_NUMERIC(dt, what, ...)               \
  switch (dt) {                                              \
    MRT_DTYPE_CASE(kFloat, float, __VA_ARGS__)               \
    MRT_DTYPE_CASE(kDouble, double, __VA_ARGS__)             \
    MRT_DTYPE_CASE(kFloat16, ::mrt::Float16, __VA_ARGS__)    \
    MRT_DTYPE_CASE(kBFloat16, ::mrt::BFloat16, __VA_ARGS__)  \
    MRT_DISPATCH_INTEGER_CASES(__VA_ARGS__)                  \
    MRT_DISPATCH_FAIL(dt, what);                             \
  }
