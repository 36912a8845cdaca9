// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (log-softmax over the class
// axis followed by the same negative log-likelihood).
//
// Input [N, C, d1, ...] is viewed as [N, C, D]; target [N, d1, ...] as [N, D]. Each
// position's loss is -input[n, target, d] * weight[target]; positions whose target equals
// ignore_index contribute 0 with weight 0. reduction "mean" divides the weighted sum by
// the sum of the weights used.
#include <algorithm>
#include <cmath>
#include <limits>

#include "norm_util.h"

namespace mrt {
namespace {

enum class Reduction { kNone, kSum, kMean };

Reduction reduction_of(const Node& node) {
  const std::string r = node.attr_string("reduction", "mean");
  if (r == "none") return Reduction::kNone;
  if (r == "sum") return Reduction::kSum;
  if (r == "mean") return Reduction::kMean;
  fail(MRT_NOT_IMPLEMENTED, node.label(), ": reduction '", r, "' is not supported (none, sum, mean)");
}

void loss_check(const Node& node, int64_t) { (void)reduction_of(node); }

// loss over log-probabilities lp ([N, C, D], compute type A) written to output 0.
template <class T, class A>
void nll_from_logprob(OpContext& ctx, const A* lp, int64_t N, int64_t C, int64_t D, const char* op) {
  const Node& node = ctx.node();
  const Tensor& target = ctx.input(1);
  const Reduction red = reduction_of(node);
  const bool has_ignore = node.has_attr("ignore_index");
  const int64_t ignore = node.attr_int("ignore_index", 0);
  std::vector<double> weight;
  if (const Tensor* w = ctx.optional_input(2)) {
    MRT_CHECK_ARG(w->numel() == C, op, ": weight must have ", C, " elements, got ", w->describe());
    weight = norm::to_doubles(*w, "weight");
  }
  MRT_CHECK_ARG(target.dtype() == DType::kInt64 || target.dtype() == DType::kInt32, op,
                ": target must be int32 or int64, got ", target.describe());
  std::vector<double> loss(static_cast<size_t>(N * D));
  double wsum = 0, lsum = 0;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t d = 0; d < D; ++d) {
      const int64_t t = target.int_at(n * D + d);
      double l = 0, w = 0;
      if (!(has_ignore && t == ignore)) {
        MRT_CHECK_ARG(t >= 0 && t < C, op, ": target value ", t, " is outside [0, ", C, ")");
        w = weight.empty() ? 1.0 : weight[t];
        l = -static_cast<double>(lp[(n * C + t) * D + d]) * w;
      }
      loss[n * D + d] = l;
      lsum += l;
      wsum += w;
    }
  }
  if (red == Reduction::kNone) {
    T* y = ctx.output(0, ctx.input(0).dtype(), target.shape()).template data<T>();
    for (size_t i = 0; i < loss.size(); ++i) y[i] = norm::store<T>(loss[i]);
    return;
  }
  T* y = ctx.output(0, ctx.input(0).dtype(), {}).template data<T>();
  if (red == Reduction::kSum) y[0] = norm::store<T>(lsum);
  else y[0] = norm::store<T>(wsum == 0 ? std::numeric_limits<double>::quiet_NaN() : lsum / wsum);
}

void loss_shapes(const OpContext& ctx, int64_t& N, int64_t& C, int64_t& D, const char* op) {
  const Tensor& x = ctx.input(0);
  const Tensor& target = ctx.input(1);
  MRT_CHECK_ARG(x.rank() >= 2, op, ": input must have rank >= 2 (N x C ...), got ", x.describe());
  const Shape& s = x.shape();
  N = s[0];
  C = s[1];
  D = norm::prod(s, 2, s.size());
  Shape want{N};
  want.insert(want.end(), s.begin() + 2, s.end());
  MRT_CHECK_ARG(target.shape() == want, op, ": target shape ", shape_str(target.shape()), " must be ",
                shape_str(want), " for input ", x.describe());
}

template <class T>
void nll_typed(OpContext& ctx) {
  using A = norm::Acc<T>;
  int64_t N, C, D;
  loss_shapes(ctx, N, C, D, "NegativeLogLikelihoodLoss");
  const T* x = ctx.input(0).data<T>();
  std::vector<A> lp(static_cast<size_t>(N * C * D));
  for (size_t i = 0; i < lp.size(); ++i) lp[i] = norm::load(x[i]);
  nll_from_logprob<T, A>(ctx, lp.data(), N, C, D, "NegativeLogLikelihoodLoss");
}

template <class T>
void sce_typed(OpContext& ctx) {
  using A = norm::Acc<T>;
  int64_t N, C, D;
  loss_shapes(ctx, N, C, D, "SoftmaxCrossEntropyLoss");
  const T* x = ctx.input(0).data<T>();
  std::vector<A> lp(static_cast<size_t>(N * C * D));
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t d = 0; d < D; ++d) {
      const T* px = x + n * C * D + d;
      A* pl = lp.data() + n * C * D + d;
      A mx = -std::numeric_limits<A>::infinity();
      for (int64_t c = 0; c < C; ++c) mx = std::max<A>(mx, norm::load(px[c * D]));
      A sum = 0;
      for (int64_t c = 0; c < C; ++c) sum += std::exp(static_cast<A>(norm::load(px[c * D])) - mx);
      const A lse = std::log(sum);
      for (int64_t c = 0; c < C; ++c) pl[c * D] = (static_cast<A>(norm::load(px[c * D])) - mx) - lse;
    }
  }
  if (ctx.has_output(1)) {
    T* out = ctx.output(1, ctx.input(0).dtype(), ctx.input(0).shape()).template data<T>();
    for (size_t i = 0; i < lp.size(); ++i) out[i] = norm::store<T>(lp[i]);
  }
  nll_from_logprob<T, A>(ctx, lp.data(), N, C, D, "SoftmaxCrossEntropyLoss");
}

void nll_kernel(OpContext& ctx) {
  MRT_NORM_DISPATCH(ctx.input(0).dtype(), "NegativeLogLikelihoodLoss", { nll_typed<T>(ctx); });
}
void sce_kernel(OpContext& ctx) {
  MRT_NORM_DISPATCH(ctx.input(0).dtype(), "SoftmaxCrossEntropyLoss", { sce_typed<T>(ctx); });
}

}  // namespace

void register_loss_kernels(KernelRegistry& r) {
  r.add("NegativeLogLikelihoodLoss", 12, nll_kernel, loss_check);
  r.add("SoftmaxCrossEntropyLoss", 12, sce_kernel, loss_check);
}

}  // namespace mrt
