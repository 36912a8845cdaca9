// Kernel group: random — RandomUniform, RandomNormal, RandomUniformLike, RandomNormalLike, Bernoulli,
// Multinomial. Draws come from the node's stream (random_util.h): reproducible for a given `seed` attribute,
// continuing from run to run; these nodes are never constant-folded (constant_folding.cc).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "elementwise_common.h"
#include "norm_util.h"
#include "random_util.h"

namespace mrt {
namespace {

using ew::Compute;
using ew::compute_t;

constexpr int64_t kRandomGrain = 16384;

bool is_float_type(DType t) {
  return t == DType::kFloat || t == DType::kDouble || t == DType::kFloat16 || t == DType::kBFloat16;
}

std::optional<double> seed_of(const Node& n) {
  if (!n.has_attr("seed")) return std::nullopt;
  return static_cast<double>(n.attr_float("seed", 0.f));
}

// The output element type: the `dtype` attribute, else `fallback` (the input's type; float for the
// shape-attribute forms). Random values need a float type.
DType random_dtype(const Node& n, DType fallback) {
  const DType t = n.has_attr("dtype") ? static_cast<DType>(n.attr_int("dtype", 1)) : fallback;
  MRT_CHECK_ARG(is_float_type(t), n.op_type, ": dtype ", dtype_name(t),
                " is not a floating type (float16, float, double or bfloat16)");
  return t;
}

// out[i] = value(i) over a float tensor, split across the pool. With `below` set, a value that the
// conversion to the output type rounds up to `below` or past it is stored as `fallback` instead: a uniform
// draw just under `high` may round to `high` in float (or further in float16), and its interval is open there.
template <class F>
void fill_float(OpContext& ctx, Tensor& y, F value, std::optional<double> below = std::nullopt,
                double fallback = 0.0) {
  const int64_t n = y.numel();
  MRT_EW_DISPATCH_FLOATLIKE(y.dtype(), ctx.node().op_type.c_str(), {
    T* p = y.data_as<T>();
    const T fallback_t = Compute<T>::store(static_cast<compute_t<T>>(fallback));
    auto body = [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        p[i] = Compute<T>::store(static_cast<compute_t<T>>(value(i)));
        if (below && !(static_cast<double>(Compute<T>::load(p[i])) < *below)) p[i] = fallback_t;
      }
    };
    if (n < 2 * kRandomGrain) body(0, n);
    else ctx.threads().parallel_for(n, kRandomGrain, body);
  });
}

void fill_random(OpContext& ctx, Tensor& y, bool normal) {
  const Node& n = ctx.node();
  const int64_t count = y.numel();
  if (count == 0) return;
  uint64_t first = 0;
  const uint64_t key = rng::reserve(ctx, seed_of(n), static_cast<uint64_t>(count) * (normal ? 2 : 1), &first);
  if (normal) {
    const double mean = n.attr_float("mean", 0.f), scale = n.attr_float("scale", 1.f);
    const uint64_t base = first / 2;  // a normal node always reserves pairs: `first` is even
    fill_float(ctx, y, [&](int64_t i) { return mean + scale * rng::normal(key, base + static_cast<uint64_t>(i)); });
  } else {
    const double low = n.attr_float("low", 0.f), high = n.attr_float("high", 1.f);
    // the interval is [low, high): a draw that rounds to `high` becomes `low` (low == high gives low)
    fill_float(
        ctx, y, [&](int64_t i) { return low + (high - low) * rng::uniform01(key, first + static_cast<uint64_t>(i)); },
        high > low ? std::optional<double>(high) : std::nullopt, low);
  }
}

void random_check(const Node& n, int64_t) {
  (void)random_dtype(n, DType::kFloat);
  if (n.op_type == "RandomUniform" || n.op_type == "RandomNormal") {
    MRT_CHECK_ARG(n.has_attr("shape"), n.op_type, ": the shape attribute is required");
    for (int64_t d : n.attr_ints("shape")) MRT_CHECK_ARG(d >= 0, n.op_type, ": shape has a negative dimension ", d);
  }
  if (n.op_type == "RandomUniform" || n.op_type == "RandomUniformLike") {
    const float low = n.attr_float("low", 0.f), high = n.attr_float("high", 1.f);
    MRT_CHECK_ARG(std::isfinite(low) && std::isfinite(high) && low <= high, n.op_type, ": low ", low,
                  " and high ", high, " must be finite with low <= high");
  } else {
    const float mean = n.attr_float("mean", 0.f), scale = n.attr_float("scale", 1.f);
    MRT_CHECK_ARG(std::isfinite(mean) && std::isfinite(scale), n.op_type, ": mean ", mean, " and scale ", scale,
                  " must be finite");
  }
}

void random_from_shape(OpContext& ctx, bool normal) {
  const Node& n = ctx.node();
  const std::vector<int64_t> dims = n.attr_ints("shape");
  Tensor& y = ctx.output(0, random_dtype(n, DType::kFloat), Shape(dims.begin(), dims.end()));
  fill_random(ctx, y, normal);
}

void random_like(OpContext& ctx, bool normal) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0, random_dtype(ctx.node(), x.dtype()), x.shape());
  fill_random(ctx, y, normal);
}

void random_uniform(OpContext& ctx) { random_from_shape(ctx, false); }
void random_normal(OpContext& ctx) { random_from_shape(ctx, true); }
void random_uniform_like(OpContext& ctx) { random_like(ctx, false); }
void random_normal_like(OpContext& ctx) { random_like(ctx, true); }

// ---- Bernoulli: 1 with the input's probability -------------------------------------------

void bernoulli_check(const Node& n, int64_t) {
  if (n.has_attr("dtype")) {
    const DType t = static_cast<DType>(n.attr_int("dtype", 1));
    const bool integer = t == DType::kInt8 || t == DType::kInt16 || t == DType::kInt32 || t == DType::kInt64 ||
                         t == DType::kUInt8 || t == DType::kUInt16 || t == DType::kUInt32 || t == DType::kUInt64;
    MRT_CHECK_ARG(t == DType::kBool || is_float_type(t) || integer, "Bernoulli: dtype ",
                  dtype_name(t), " is not a numeric or bool type");
  }
}

void bernoulli(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Node& n = ctx.node();
  MRT_CHECK_ARG(is_float_type(x.dtype()), "Bernoulli: input must hold probabilities of a floating type, got ",
                x.describe());
  const DType out_t = n.has_attr("dtype") ? static_cast<DType>(n.attr_int("dtype", 1)) : x.dtype();
  Tensor& y = ctx.output(0, out_t, x.shape());
  const int64_t count = y.numel();
  if (count == 0) return;
  uint64_t first = 0;
  const uint64_t key = rng::reserve(ctx, seed_of(n), static_cast<uint64_t>(count), &first);
  std::vector<uint8_t> hit(static_cast<size_t>(count));
  MRT_EW_DISPATCH_FLOATLIKE(x.dtype(), "Bernoulli", {
    const T* p = x.data_as<T>();
    // A NaN or negative probability never draws 1; one of 1 or more always does.
    for (int64_t i = 0; i < count; ++i)
      hit[static_cast<size_t>(i)] =
          rng::uniform01(key, first + static_cast<uint64_t>(i)) < static_cast<double>(Compute<T>::load(p[i]));
  });
  MRT_DISPATCH_ALL(out_t, "Bernoulli", {
    T* q = y.data_as<T>();
    const T one = Compute<T>::store(1), zero = Compute<T>::store(0);
    for (int64_t i = 0; i < count; ++i) q[i] = hit[static_cast<size_t>(i)] ? one : zero;
  });
}

// ---- Multinomial: class indices drawn from unnormalized log-probabilities -----------------

void multinomial_check(const Node& n, int64_t) {
  const DType t = static_cast<DType>(n.attr_int("dtype", static_cast<int64_t>(DType::kInt32)));
  MRT_CHECK_ARG(t == DType::kInt32 || t == DType::kInt64, "Multinomial: dtype ", dtype_name(t),
                " must be int32 or int64");
  MRT_CHECK_ARG(n.attr_int("sample_size", 1) >= 1, "Multinomial: sample_size ", n.attr_int("sample_size", 1),
                " must be at least 1");
}

void multinomial(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Node& n = ctx.node();
  MRT_CHECK_ARG(x.rank() == 2 && is_float_type(x.dtype()),
                "Multinomial: input must be [batch_size, class_size] of a floating type, got ", x.describe());
  const int64_t batch = x.dim(0), classes = x.dim(1), samples = n.attr_int("sample_size", 1);
  const DType out_t = static_cast<DType>(n.attr_int("dtype", static_cast<int64_t>(DType::kInt32)));
  Tensor& y = ctx.output(0, out_t, Shape{batch, samples});
  if (y.numel() == 0) return;
  MRT_CHECK_ARG(classes > 0, "Multinomial: cannot draw from an empty class axis (", x.describe(), ")");
  uint64_t first = 0;
  const uint64_t key = rng::reserve(ctx, seed_of(n), static_cast<uint64_t>(y.numel()), &first);
  const std::vector<double> logits = norm::to_doubles(x, "Multinomial input");
  std::vector<double> cumulative(static_cast<size_t>(classes));
  for (int64_t b = 0; b < batch; ++b) {
    const double* row = logits.data() + b * classes;
    double top = -std::numeric_limits<double>::infinity();
    for (int64_t c = 0; c < classes; ++c) {
      const double v = row[c];
      MRT_CHECK_ARG(!std::isnan(v) && v != std::numeric_limits<double>::infinity(), "Multinomial: row ", b,
                    " holds ", v, " (log-probabilities must be finite or -inf)");
      top = std::max(top, v);
    }
    MRT_CHECK_ARG(std::isfinite(top), "Multinomial: every class of row ", b, " has probability 0");
    double total = 0;
    for (int64_t c = 0; c < classes; ++c) {
      total += std::exp(row[c] - top);
      cumulative[static_cast<size_t>(c)] = total;
    }
    for (int64_t s = 0; s < samples; ++s) {
      const uint64_t pos = first + static_cast<uint64_t>(b * samples + s);
      const double u = rng::uniform01(key, pos) * total;
      int64_t c = std::upper_bound(cumulative.begin(), cumulative.end(), u) - cumulative.begin();
      c = std::min(c, classes - 1);
      if (out_t == DType::kInt32) y.data_as<int32_t>()[b * samples + s] = static_cast<int32_t>(c);
      else y.data_as<int64_t>()[b * samples + s] = c;
    }
  }
}

}  // namespace

void register_random_kernels(KernelRegistry& r) {
  r.add("RandomUniform", 1, random_uniform, random_check);
  r.add("RandomNormal", 1, random_normal, random_check);
  r.add("RandomUniformLike", 1, random_uniform_like, random_check);
  r.add("RandomNormalLike", 1, random_normal_like, random_check);
  r.add("Bernoulli", 15, bernoulli, bernoulli_check);
  r.add("Multinomial", 7, multinomial, multinomial_check);
}

}  // namespace mrt
