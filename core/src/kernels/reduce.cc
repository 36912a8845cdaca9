// Kernel group: reduce — Reduce* (axes as attribute or input, keepdims,
// noop_with_empty_axes, empty-set identities), ArgMax/ArgMin, CumSum/CumProd.
//
// Every reduction is brought to the canonical layout [outer, reduced, inner] by merging
// adjacent kept/reduced dimensions. Layouts with several separate reduced groups are
// reduced one group at a time through an accumulator buffer (LogSumExp, which needs a
// row maximum first, copies the input into [kept..., reduced...] order instead). Rows
// reduce with vectorizable loops, split across threads over `outer` (or over chunks of
// the row / tiles of `inner` when outer is small).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "elementwise_common.h"
#include "shape_common.h"

namespace mrt {
namespace {

using ew::Compute;
using ew::compute_t;

constexpr int64_t kReduceGrain = 32768;  // elements of work per task

// ---------------------------------------------------------------------------------
// Layout planning

struct ReduceLayout {
  int64_t outer = 1, reduce = 1, inner = 1;
  bool transpose = false;   // input must be permuted to [kept..., reduced...] first
  std::vector<int64_t> perm;  // permutation used when transpose is set
};

// `reduced[d]` marks the reduced dims of `shape`.
ReduceLayout plan_layout(const Shape& shape, const std::vector<bool>& reduced) {
  ReduceLayout L;
  std::vector<std::pair<int64_t, bool>> groups;  // merged (size, reduced)
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!groups.empty() && groups.back().second == reduced[d]) groups.back().first *= shape[d];
    else groups.emplace_back(shape[d], reduced[d]);
  }
  // Classify: no reduced group, exactly one (layout [outer, reduce, inner]), or several.
  size_t n_red = 0;
  for (auto& g : groups) n_red += g.second ? 1 : 0;
  if (n_red == 0) {
    for (auto& g : groups) L.outer *= g.first;
    return L;
  }
  if (n_red == 1) {
    bool before = true;
    for (auto& g : groups) {
      if (g.second) { L.reduce = g.first; before = false; }
      else if (before) L.outer *= g.first;
      else L.inner *= g.first;
    }
    return L;
  }
  L.transpose = true;
  for (size_t d = 0; d < shape.size(); ++d)
    if (!reduced[d]) L.perm.push_back(static_cast<int64_t>(d));
  for (size_t d = 0; d < shape.size(); ++d)
    if (reduced[d]) L.perm.push_back(static_cast<int64_t>(d));
  for (size_t d = 0; d < shape.size(); ++d) (reduced[d] ? L.reduce : L.outer) *= shape[d];
  L.inner = 1;
  return L;
}

// A contiguous copy of `x` with its axes permuted by `perm` (the shape group's blocked transpose).
Tensor permuted(const OpContext& ctx, const Tensor& x, const std::vector<int64_t>& perm) {
  Shape pshape;
  for (int64_t p : perm) pshape.push_back(x.dim(static_cast<size_t>(p)));
  Tensor t(x.dtype(), pshape, ctx.allocator());
  shape_kernels::transpose_copy(ctx, shape_kernels::element_size(x, "reduction"), x.shape(), perm, x.raw(), t.raw());
  return t;
}

// ---------------------------------------------------------------------------------
// Accumulator types and reducers

template <class T> struct Acc { using type = compute_t<T>; };
template <> struct Acc<int8_t> { using type = int64_t; };
template <> struct Acc<int16_t> { using type = int64_t; };
template <> struct Acc<int32_t> { using type = int64_t; };
template <> struct Acc<int64_t> { using type = int64_t; };
template <> struct Acc<uint8_t> { using type = uint64_t; };
template <> struct Acc<uint16_t> { using type = uint64_t; };
template <> struct Acc<uint32_t> { using type = uint64_t; };
template <> struct Acc<uint64_t> { using type = uint64_t; };
template <> struct Acc<bool> { using type = int64_t; };
template <class T> using acc_t = typename Acc<T>::type;

template <class T> inline acc_t<T> load_acc(T v) { return static_cast<acc_t<T>>(Compute<T>::load(v)); }
template <class T> inline T store_acc(acc_t<T> a) {
  if constexpr (std::is_same<T, bool>::value) return a != 0;
  else if constexpr (ew::is_half_v<T>) return Compute<T>::store(a);
  else return static_cast<T>(a);
}

// Largest/smallest value of T expressed as its accumulator (±inf for floats).
template <class T> inline acc_t<T> lowest_of() {
  using C = compute_t<T>;
  if constexpr (std::is_same<T, bool>::value) return 0;
  else if constexpr (std::numeric_limits<C>::has_infinity) return -std::numeric_limits<C>::infinity();
  else return static_cast<acc_t<T>>(std::numeric_limits<C>::lowest());
}
template <class T> inline acc_t<T> highest_of() {
  using C = compute_t<T>;
  if constexpr (std::is_same<T, bool>::value) return 1;
  else if constexpr (std::numeric_limits<C>::has_infinity) return std::numeric_limits<C>::infinity();
  else return static_cast<acc_t<T>>(std::numeric_limits<C>::max());
}

template <class A> inline A from_double(double v) {
  if constexpr (std::is_floating_point<A>::value) return static_cast<A>(v);
  else {
    if (std::isnan(v)) return 0;
    if (v <= static_cast<double>(std::numeric_limits<A>::lowest())) return std::numeric_limits<A>::lowest();
    if (v >= static_cast<double>(std::numeric_limits<A>::max())) return std::numeric_limits<A>::max();
    return static_cast<A>(v);
  }
}

enum class RKind { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

template <RKind K, class T>
struct Reducer {
  using A = acc_t<T>;
  // Integer accumulators wrap on overflow (computed unsigned: no undefined behaviour).
  static inline A add(A a, A b) {
    if constexpr (std::is_integral<A>::value) return static_cast<A>(std::make_unsigned_t<A>(a) + std::make_unsigned_t<A>(b));
    else return a + b;
  }
  static inline A mul(A a, A b) {
    if constexpr (std::is_integral<A>::value) return static_cast<A>(std::make_unsigned_t<A>(a) * std::make_unsigned_t<A>(b));
    else return a * b;
  }
  static inline A init() {
    if constexpr (K == RKind::kMax) return lowest_of<T>();
    else if constexpr (K == RKind::kMin) return highest_of<T>();
    else if constexpr (K == RKind::kProd) return A(1);
    else return A(0);
  }
  static inline A pre(A x) {
    if constexpr (K == RKind::kL1) {
      if constexpr (std::is_unsigned<A>::value) return x;
      else if constexpr (std::is_integral<A>::value)
        return x < 0 ? static_cast<A>(std::make_unsigned_t<A>(0) - std::make_unsigned_t<A>(x)) : x;
      else return x < 0 ? -x : x;
    } else if constexpr (K == RKind::kL2 || K == RKind::kSumSquare) {
      return mul(x, x);
    } else {
      return x;
    }
  }
  static inline A combine(A a, A x) {
    if constexpr (K == RKind::kMax) {
      a = x > a ? x : a;
      if constexpr (std::is_floating_point<A>::value) a = x != x ? x : a;
      return a;
    } else if constexpr (K == RKind::kMin) {
      a = x < a ? x : a;
      if constexpr (std::is_floating_point<A>::value) a = x != x ? x : a;
      return a;
    } else if constexpr (K == RKind::kProd) {
      return mul(a, x);
    } else {
      return add(a, x);
    }
  }
  static inline A post(A a, int64_t n) {
    if constexpr (K == RKind::kMean) {
      if constexpr (std::is_floating_point<A>::value) return a / static_cast<A>(n);
      else return n == 0 ? A(0) : static_cast<A>(a / static_cast<A>(n));
    } else if constexpr (K == RKind::kL2) {
      return from_double<A>(std::sqrt(static_cast<double>(a)));
    } else if constexpr (K == RKind::kLogSum) {
      return from_double<A>(std::log(static_cast<double>(a)));
    } else {
      return a;
    }
  }
};

// One [outer, reduce, inner] reduction pass. The first pass reads T and applies the
// reducer's pre-map; later passes read accumulators. The last pass applies the
// post-map with the total number of reduced elements and stores T; earlier passes
// store accumulators. A single-group reduction is one pass that is first and last.
template <RKind K, class T, bool kFirst, bool kLast>
struct PassIO {
  using Rd = Reducer<K, T>;
  using A = acc_t<T>;
  using In = std::conditional_t<kFirst, T, A>;
  using Out = std::conditional_t<kLast, T, A>;
  static inline A get(In v) {
    if constexpr (kFirst) return Rd::pre(load_acc<T>(v));
    else return v;
  }
  static inline Out put(A a, int64_t count) {
    if constexpr (kLast) return store_acc<T>(Rd::post(a, count));
    else return a;
  }
};

// The reduction of one contiguous row of n values, with kLanes independent accumulators once the row
// is long enough: the lane loop vectorizes and float sums are more accurate than one running sum.
// Shared by the per-row and per-chunk loops (one copy of the vector loop per instantiation).
template <RKind K, class T, bool kFirst, bool kLast>
acc_t<T> reduce_row(const typename PassIO<K, T, kFirst, kLast>::In* p, int64_t n) {
  using Rd = Reducer<K, T>;
  using A = acc_t<T>;
  using IO = PassIO<K, T, kFirst, kLast>;
  constexpr int64_t kLanes = 32;
  A acc = Rd::init();
  int64_t r = 0;
  if (n >= 2 * kLanes) {
    A lanes[kLanes];
    for (int64_t k = 0; k < kLanes; ++k) lanes[k] = Rd::init();
    for (; r + kLanes <= n; r += kLanes)
      for (int64_t k = 0; k < kLanes; ++k) lanes[k] = Rd::combine(lanes[k], IO::get(p[r + k]));
    for (int64_t k = 0; k < kLanes; ++k) acc = Rd::combine(acc, lanes[k]);
  }
  for (; r < n; ++r) acc = Rd::combine(acc, IO::get(p[r]));
  return acc;
}

template <RKind K, class T, bool kFirst, bool kLast>
void reduce_pass(OpContext& ctx, const typename PassIO<K, T, kFirst, kLast>::In* x,
                 typename PassIO<K, T, kFirst, kLast>::Out* y, int64_t O, int64_t R, int64_t I, int64_t count) {
  using Rd = Reducer<K, T>;
  using A = acc_t<T>;
  using IO = PassIO<K, T, kFirst, kLast>;
  using In = typename IO::In;
  using Out = typename IO::Out;
  const int64_t work = O * std::max<int64_t>(R, 1) * I;
  if (I == 1) {
    if (O == 1 && R >= 4 * kReduceGrain && ctx.threads().size() > 1) {
      // One long row: partial results per chunk, combined in chunk order.
      const int64_t nchunks = std::min<int64_t>(R / kReduceGrain, 4 * ctx.threads().size());
      const int64_t chunk = (R + nchunks - 1) / nchunks;
      std::vector<A> part(static_cast<size_t>(nchunks), Rd::init());
      ctx.threads().parallel_for(nchunks, 1, [&](int64_t b, int64_t e) {
        for (int64_t c = b; c < e; ++c)
          part[static_cast<size_t>(c)] =
              reduce_row<K, T, kFirst, kLast>(x + c * chunk, std::min(R, (c + 1) * chunk) - c * chunk);
      });
      A acc = Rd::init();
      for (const A& v : part) acc = Rd::combine(acc, v);
      y[0] = IO::put(acc, count);
      return;
    }
    auto rows = [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) y[o] = IO::put(reduce_row<K, T, kFirst, kLast>(x + o * R, R), count);
    };
    if (work < 2 * kReduceGrain || O == 1) rows(0, O);
    else ctx.threads().parallel_for(O, std::max<int64_t>(1, kReduceGrain / std::max<int64_t>(R, 1)), rows);
    return;
  }
  // inner > 1: accumulate rows of `inner` values, contiguous in memory.
  auto block = [&](int64_t o, int64_t i0, int64_t i1, A* acc) {
    const int64_t n = i1 - i0;
    for (int64_t i = 0; i < n; ++i) acc[i] = Rd::init();
    const In* base = x + o * R * I + i0;
    for (int64_t r = 0; r < R; ++r) {
      const In* p = base + r * I;
      for (int64_t i = 0; i < n; ++i) acc[i] = Rd::combine(acc[i], IO::get(p[i]));
    }
    Out* q = y + o * I + i0;
    for (int64_t i = 0; i < n; ++i) q[i] = IO::put(acc[i], count);
  };
  constexpr int64_t kTile = 1024;
  auto tiles = [&](int64_t o, int64_t t0, int64_t t1) {
    A acc[kTile];
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t i0 = t * kTile, i1 = std::min(I, i0 + kTile);
      block(o, i0, i1, acc);
    }
  };
  const int64_t ntiles = (I + kTile - 1) / kTile;
  if (work < 2 * kReduceGrain) {
    for (int64_t o = 0; o < O; ++o) tiles(o, 0, ntiles);
  } else {
    // Parallel over (outer x tiles).
    const int64_t tasks = O * ntiles;
    const int64_t per = std::max<int64_t>(1, R * std::min(I, kTile));
    ctx.threads().parallel_for(tasks, std::max<int64_t>(1, kReduceGrain / per), [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k) tiles(k / ntiles, k % ntiles, k % ntiles + 1);
    });
  }
}

template <RKind K, class T>
void reduce_ori(OpContext& ctx, const T* x, T* y, int64_t O, int64_t R, int64_t I) {
  reduce_pass<K, T, true, true>(ctx, x, y, O, R, I, R);
}

// Several separate reduced groups: reduce the innermost reduced group first into an
// accumulator buffer, then the next ones, so no transposed copy of the input is made.
template <RKind K, class T>
void reduce_multi(OpContext& ctx, const T* x, T* y, const Shape& shape, const std::vector<bool>& reduced) {
  using A = acc_t<T>;
  std::vector<std::pair<int64_t, bool>> groups;
  int64_t count = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (reduced[d]) count *= shape[d];
    if (shape[d] == 1) continue;
    if (!groups.empty() && groups.back().second == reduced[d]) groups.back().first *= shape[d];
    else groups.emplace_back(shape[d], reduced[d]);
  }
  if (count == 0) {
    // An empty reduction: every output is the reducer's identity (later passes never see an empty group).
    int64_t n_out = 1;
    for (size_t d = 0; d < shape.size(); ++d)
      if (!reduced[d]) n_out *= shape[d];
    std::fill(y, y + n_out, store_acc<T>(Reducer<K, T>::post(Reducer<K, T>::init(), 0)));
    return;
  }
  // Passes after the first read and write accumulators only, so they are instantiated per accumulator
  // type (float, double, int64, uint64), not per element type; the outputs are stored at the end.
  std::vector<A> cur, next;
  bool first = true;
  for (;;) {
    size_t g = groups.size();
    size_t n_red = 0;
    for (size_t i = 0; i < groups.size(); ++i) {
      if (groups[i].second) {
        g = i;
        ++n_red;
      }
    }
    MRT_ENFORCE(n_red >= 1, MRT_INTERNAL, "reduce_multi without reduced dims");
    int64_t O = 1, I = 1;
    for (size_t i = 0; i < g; ++i) O *= groups[i].first;
    for (size_t i = g + 1; i < groups.size(); ++i) I *= groups[i].first;
    const int64_t R = groups[g].first;
    next.resize(static_cast<size_t>(O * I));
    if (first) reduce_pass<K, T, true, false>(ctx, x, next.data(), O, R, I, count);
    else reduce_pass<K, A, false, false>(ctx, cur.data(), next.data(), O, R, I, count);
    if (n_red == 1) {
      for (size_t i = 0; i < next.size(); ++i) y[i] = store_acc<T>(Reducer<K, T>::post(next[i], count));
      return;
    }
    first = false;
    cur.swap(next);
    groups.erase(groups.begin() + static_cast<std::ptrdiff_t>(g));
    // Merge neighbours that became adjacent.
    for (size_t i = 1; i < groups.size();) {
      if (groups[i].second == groups[i - 1].second) {
        groups[i - 1].first *= groups[i].first;
        groups.erase(groups.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
  }
}

// log(sum(exp(x))) computed as m + log(sum(exp(x - m))) with m the maximum.
template <class T>
void reduce_logsumexp(OpContext& ctx, const T* x, T* y, int64_t O, int64_t R, int64_t I) {
  using C = compute_t<T>;
  static_assert(std::is_floating_point<C>::value, "LogSumExp needs a floating type");
  auto one = [&](int64_t o, int64_t i) {
    const T* p = x + o * R * I + i;
    C m = -std::numeric_limits<C>::infinity();
    for (int64_t r = 0; r < R; ++r) {
      const C v = Compute<T>::load(p[r * I]);
      if (v > m || v != v) m = v;
    }
    C result;
    if (std::isinf(m) || std::isnan(m)) {
      result = m;
    } else {
      C s = 0;
      for (int64_t r = 0; r < R; ++r) s += std::exp(Compute<T>::load(p[r * I]) - m);
      result = m + std::log(s);
    }
    y[o * I + i] = Compute<T>::store(result);
  };
  const int64_t n = O * I;
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) one(k / I, k % I);
  };
  if (n * std::max<int64_t>(R, 1) < 2 * kReduceGrain) body(0, n);
  else ctx.threads().parallel_for(n, std::max<int64_t>(1, kReduceGrain / std::max<int64_t>(R, 1)), body);
}

// ---------------------------------------------------------------------------------
// Reduce kernels

struct ReduceSetup {
  Shape out_shape;
  ReduceLayout layout;
  std::vector<bool> reduced;
};

std::vector<int64_t> reduce_axes(OpContext& ctx, int64_t axes_input_since, bool& noop) {
  const Node& n = ctx.node();
  noop = false;
  if (ctx.opset() >= axes_input_since) {
    noop = n.attr_int("noop_with_empty_axes", 0) != 0;
    const Tensor* a = ctx.optional_input(1);
    if (!a) return {};
    MRT_CHECK_ARG(a->rank() <= 1, "axes must be a 1-D tensor, got ", a->describe());
    MRT_CHECK_ARG(a->dtype() == DType::kInt64 || a->dtype() == DType::kInt32, "axes must be int64, got ",
                  a->describe());
    return a->to_int64_vector();
  }
  return n.attr_ints("axes", {});
}

ReduceSetup setup_reduce(OpContext& ctx, const Tensor& x, int64_t axes_input_since) {
  bool noop = false;
  std::vector<int64_t> axes = reduce_axes(ctx, axes_input_since, noop);
  const int64_t rank = static_cast<int64_t>(x.rank());
  const bool keepdims = ctx.node().attr_int("keepdims", 1) != 0;
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  if (axes.empty()) {
    if (!noop) std::fill(reduced.begin(), reduced.end(), true);
  } else {
    for (int64_t a : axes) {
      MRT_CHECK_ARG(a >= -rank && a < rank, "axis ", a, " is out of range for input of rank ", rank,
                    " (", x.describe(), ")");
      const int64_t d = a < 0 ? a + rank : a;
      MRT_CHECK_ARG(!reduced[d], "axis ", a, " is repeated in axes");
      reduced[d] = true;
    }
  }
  ReduceSetup s;
  for (int64_t d = 0; d < rank; ++d) {
    if (!reduced[d]) s.out_shape.push_back(x.dim(d));
    else if (keepdims) s.out_shape.push_back(1);
  }
  s.layout = plan_layout(x.shape(), reduced);
  s.reduced = reduced;
  return s;
}

// The element type a reduction of T runs in: T itself for float, double, int32, int64 and uint64; the narrower
// integers in int32 (uint32 in uint64), float16 and bfloat16 in float. Each holds every value of T exactly and
// accumulates in a type of the same width as T's (float; int64 or uint64, whose sums and products are the same
// bits modulo 2^64, and which agree on the quotients, maxima and minima of the non-negative values an unsigned
// T gives), so the results narrowed to T are those of a reduction over T.
template <class T> struct ReduceAs { using type = T; };
template <> struct ReduceAs<int8_t> { using type = int32_t; };
template <> struct ReduceAs<int16_t> { using type = int32_t; };
template <> struct ReduceAs<uint8_t> { using type = int32_t; };
template <> struct ReduceAs<uint16_t> { using type = int32_t; };
template <> struct ReduceAs<uint32_t> { using type = uint64_t; };
template <> struct ReduceAs<Float16> { using type = float; };
template <> struct ReduceAs<BFloat16> { using type = float; };

// A reduction of T run in ReduceAs<T>: the input widened first, the results narrowed as store_acc<T> would. One
// instantiation of the reduction loops per wide type instead of one per element type (those loops were the core's
// longest compile: 84 -> 43-50 s with gcc 12). The cost is a pass over the input: ReduceMax of 256 x 4096 uint8
// values took 1.5 times as long (AMD Zen 1), a float16 ReduceSum 0.9 times (converted in bulk). An empty
// reduction has no value to widen: it stores T's identity.
template <RKind K, class T>
void reduce_as_wide_type(OpContext& ctx, const Tensor& x, const Tensor& src, Tensor& y, const ReduceSetup& s,
                         bool multi) {
  using W = typename ReduceAs<T>::type;
  const int64_t O = s.layout.outer, R = s.layout.reduce, I = s.layout.inner;
  if constexpr (std::is_same<W, T>::value) {
    if (multi) reduce_multi<K, T>(ctx, x.data_as<T>(), y.data_as<T>(), x.shape(), s.reduced);
    else reduce_ori<K, T>(ctx, src.data_as<T>(), y.data_as<T>(), O, R, I);
  } else {
    static_assert(sizeof(acc_t<W>) == sizeof(acc_t<T>), "a wide type accumulates as wide as T");
    T* out = y.data_as<T>();
    if (x.numel() == 0) {
      std::fill(out, out + y.numel(), store_acc<T>(Reducer<K, T>::post(Reducer<K, T>::init(), 0)));
      return;
    }
    const Tensor& in = multi ? x : src;
    const T* v = in.data_as<T>();
    Tensor wide(DTypeOf<W>::value, in.shape(), ctx.allocator());
    Tensor reduced(DTypeOf<W>::value, y.shape(), ctx.allocator());
    W* w = wide.data_as<W>();
    if constexpr (std::is_same<T, Float16>::value) halves_to_floats(&v[0].bits, w, in.numel());
    else
      for (int64_t i = 0; i < in.numel(); ++i) w[i] = static_cast<W>(load_acc<T>(v[i]));
    if (multi) reduce_multi<K, W>(ctx, w, reduced.data_as<W>(), in.shape(), s.reduced);
    else reduce_ori<K, W>(ctx, w, reduced.data_as<W>(), O, R, I);
    const W* r = reduced.data_as<W>();
    if constexpr (std::is_same<T, Float16>::value) floats_to_halves(r, &out[0].bits, y.numel());
    else
      for (int64_t i = 0; i < y.numel(); ++i) out[i] = store_acc<T>(static_cast<acc_t<T>>(r[i]));
  }
}

template <RKind K>
void reduce_kernel_impl(OpContext& ctx, const char* what, int64_t axes_input_since) {
  const Tensor& x = ctx.input(0);
  ReduceSetup s = setup_reduce(ctx, x, axes_input_since);
  Tensor& y = ctx.output(0, x.dtype(), s.out_shape);
  if (y.numel() == 0) return;
  constexpr bool kAllowBool = (K == RKind::kMax || K == RKind::kMin);
  constexpr bool kFloatOnly = (K == RKind::kLogSumExp);
  // LogSumExp needs all its values at once: several reduced groups are first copied
  // into [kept..., reduced...] order. The other reducers combine group by group.
  Tensor src = x;
  if (s.layout.transpose && kFloatOnly) src = permuted(ctx, x, s.layout.perm);
  const bool multi = s.layout.transpose && !kFloatOnly;
  const int64_t O = s.layout.outer, R = s.layout.reduce, I = s.layout.inner;
  if (x.dtype() == DType::kBool) {
    MRT_CHECK_IMPL(kAllowBool, what, ": element type bool is not supported");
    if constexpr (kAllowBool) {
      if (multi) reduce_multi<K, bool>(ctx, x.data_as<bool>(), y.data_as<bool>(), x.shape(), s.reduced);
      else reduce_ori<K, bool>(ctx, src.data_as<bool>(), y.data_as<bool>(), O, R, I);
    }
    return;
  }
  if constexpr (kFloatOnly) {
    MRT_EW_DISPATCH_FLOATLIKE(x.dtype(), what,
                              { reduce_logsumexp<T>(ctx, src.data_as<T>(), y.data_as<T>(), O, R, I); });
  } else {
    MRT_EW_DISPATCH_NUMERIC(x.dtype(), what, { reduce_as_wide_type<K, T>(ctx, x, src, y, s, multi); });
  }
}

void reduce_sum(OpContext& c) { reduce_kernel_impl<RKind::kSum>(c, "ReduceSum", 13); }
void reduce_mean(OpContext& c) { reduce_kernel_impl<RKind::kMean>(c, "ReduceMean", 18); }
void reduce_max(OpContext& c) { reduce_kernel_impl<RKind::kMax>(c, "ReduceMax", 18); }
void reduce_min(OpContext& c) { reduce_kernel_impl<RKind::kMin>(c, "ReduceMin", 18); }
void reduce_prod(OpContext& c) { reduce_kernel_impl<RKind::kProd>(c, "ReduceProd", 18); }
void reduce_l1(OpContext& c) { reduce_kernel_impl<RKind::kL1>(c, "ReduceL1", 18); }
void reduce_l2(OpContext& c) { reduce_kernel_impl<RKind::kL2>(c, "ReduceL2", 18); }
void reduce_log_sum(OpContext& c) { reduce_kernel_impl<RKind::kLogSum>(c, "ReduceLogSum", 18); }
void reduce_log_sum_exp(OpContext& c) { reduce_kernel_impl<RKind::kLogSumExp>(c, "ReduceLogSumExp", 18); }
void reduce_sum_square(OpContext& c) { reduce_kernel_impl<RKind::kSumSquare>(c, "ReduceSumSquare", 18); }

// ---------------------------------------------------------------------------------
// ArgMax / ArgMin

template <class T, bool kMax>
void arg_apply(OpContext& ctx, const T* x, int64_t* y, int64_t O, int64_t R, int64_t I, bool last) {
  using C = compute_t<T>;
  auto better = [last](C v, C best) {
    if constexpr (std::is_floating_point<C>::value) {
      if (best != best) return false;  // first NaN wins
      if (v != v) return true;
    }
    if (last) return kMax ? v >= best : v <= best;
    return kMax ? v > best : v < best;
  };
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      const int64_t o = k / I, i = k % I;
      const T* p = x + o * R * I + i;
      C best = Compute<T>::load(p[0]);
      int64_t bi = 0;
      for (int64_t r = 1; r < R; ++r) {
        const C v = Compute<T>::load(p[r * I]);
        if (better(v, best)) {
          best = v;
          bi = r;
        }
      }
      y[k] = bi;
    }
  };
  const int64_t n = O * I;
  if (n * R < 2 * kReduceGrain) body(0, n);
  else ctx.threads().parallel_for(n, std::max<int64_t>(1, kReduceGrain / R), body);
}

template <bool kMax>
void arg_kernel(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Node& n = ctx.node();
  const int64_t rank = static_cast<int64_t>(x.rank());
  MRT_CHECK_ARG(rank >= 1, "input must have rank >= 1, got ", x.describe());
  const int64_t axis = normalize_axis(n.attr_int("axis", 0), rank);
  const bool keepdims = n.attr_int("keepdims", 1) != 0;
  const bool last = ctx.opset() >= 12 && n.attr_int("select_last_index", 0) != 0;
  const int64_t R = x.dim(axis);
  Shape out;
  int64_t O = 1, I = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axis) O *= x.dim(d);
    if (d > axis) I *= x.dim(d);
    if (d != axis) out.push_back(x.dim(d));
    else if (keepdims) out.push_back(1);
  }
  Tensor& y = ctx.output(0, DType::kInt64, out);
  if (y.numel() == 0) return;
  MRT_CHECK_ARG(R > 0, "cannot take ", kMax ? "ArgMax" : "ArgMin", " over an empty axis (", x.describe(), ")");
  MRT_EW_DISPATCH_NUMERIC(x.dtype(), kMax ? "ArgMax" : "ArgMin", {
    arg_apply<T, kMax>(ctx, x.data_as<T>(), y.data_as<int64_t>(), O, R, I, last);
  });
}

// ---------------------------------------------------------------------------------
// CumSum / CumProd

template <class T, bool kProd>
void cum_apply(OpContext& ctx, const T* x, T* y, int64_t O, int64_t R, int64_t I, bool exclusive, bool reverse) {
  using A = acc_t<T>;
  auto body = [&](int64_t b, int64_t e) {
    std::vector<A> acc(static_cast<size_t>(I));
    for (int64_t o = b; o < e; ++o) {
      std::fill(acc.begin(), acc.end(), kProd ? A(1) : A(0));
      for (int64_t s = 0; s < R; ++s) {
        const int64_t r = reverse ? R - 1 - s : s;
        const T* p = x + (o * R + r) * I;
        T* q = y + (o * R + r) * I;
        for (int64_t i = 0; i < I; ++i) {
          const A v = load_acc<T>(p[i]);
          if (exclusive) {
            q[i] = store_acc<T>(acc[i]);
            acc[i] = kProd ? Reducer<RKind::kProd, T>::mul(acc[i], v) : Reducer<RKind::kSum, T>::add(acc[i], v);
          } else {
            acc[i] = kProd ? Reducer<RKind::kProd, T>::mul(acc[i], v) : Reducer<RKind::kSum, T>::add(acc[i], v);
            q[i] = store_acc<T>(acc[i]);
          }
        }
      }
    }
  };
  if (O * R * I < 2 * kReduceGrain || O == 1) body(0, O);
  else ctx.threads().parallel_for(O, std::max<int64_t>(1, kReduceGrain / std::max<int64_t>(R * I, 1)), body);
}

template <bool kProd>
void cum_kernel(OpContext& ctx) {
  const char* what = kProd ? "CumProd" : "CumSum";
  const Tensor& x = ctx.input(0);
  const Tensor& axis_t = ctx.input(1);
  MRT_CHECK_ARG(axis_t.numel() == 1 && (axis_t.dtype() == DType::kInt32 || axis_t.dtype() == DType::kInt64),
                "axis must be an int32/int64 scalar, got ", axis_t.describe());
  const int64_t rank = static_cast<int64_t>(x.rank());
  MRT_CHECK_ARG(rank >= 1, "input must have rank >= 1, got ", x.describe());
  const int64_t axis = normalize_axis(axis_t.int_at(0), rank);
  const bool exclusive = ctx.node().attr_int("exclusive", 0) != 0;
  const bool reverse = ctx.node().attr_int("reverse", 0) != 0;
  int64_t O = 1, I = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axis) O *= x.dim(d);
    if (d > axis) I *= x.dim(d);
  }
  const int64_t R = x.dim(axis);
  Tensor& y = ctx.output(0, x.dtype(), x.shape());
  if (y.numel() == 0) return;
  MRT_EW_DISPATCH_NUMERIC(x.dtype(), what, {
    cum_apply<T, kProd>(ctx, x.data_as<T>(), y.data_as<T>(), O, R, I, exclusive, reverse);
  });
}

}  // namespace

void register_reduce_kernels(KernelRegistry& r) {
  r.add("ReduceSum", 1, reduce_sum);
  r.add("ReduceMean", 1, reduce_mean);
  r.add("ReduceMax", 1, reduce_max);
  r.add("ReduceMin", 1, reduce_min);
  r.add("ReduceProd", 1, reduce_prod);
  r.add("ReduceL1", 1, reduce_l1);
  r.add("ReduceL2", 1, reduce_l2);
  r.add("ReduceLogSum", 1, reduce_log_sum);
  r.add("ReduceLogSumExp", 1, reduce_log_sum_exp);
  r.add("ReduceSumSquare", 1, reduce_sum_square);
  r.add("ArgMax", 1, arg_kernel<true>);
  r.add("ArgMin", 1, arg_kernel<false>);
  r.add("CumSum", 11, cum_kernel<false>);
  r.add("CumProd", 26, cum_kernel<true>);
}

}  // namespace mrt
