// ai.onnx.preview.training optimizers: Adagrad, Momentum (standard and nesterov) and
// Adam, each updating one or more (X, G, state...) groups with learning rate R and step
// count T, as the training spec defines them. Computed in double, stored as the inputs.
#include <cmath>
#include <string>

#include "norm_util.h"

namespace mrt {
namespace {

enum class Optimizer { kAdagrad, kMomentum, kAdam };

template <Optimizer kind>
void optimizer_kernel(OpContext& ctx) {
  const Node& n = ctx.node();
  const int per = kind == Optimizer::kAdam ? 4 : 3;  // X, G, state(s)
  const size_t count = (ctx.input_count() - 2) / static_cast<size_t>(per);
  MRT_CHECK_ARG(count >= 1 && ctx.input_count() == 2 + count * static_cast<size_t>(per), n.op_type,
                ": expected R, T and groups of ", per, " tensors, got ", ctx.input_count(), " inputs");
  const double r = ctx.input(0).scalar_as_double(0);
  const double t = static_cast<double>(ctx.input(1).int_at(0));
  const double norm = n.attr_float("norm_coefficient", 0.f);
  for (size_t i = 0; i < count; ++i) {
    const Tensor& X = ctx.input(2 + i);
    const Tensor& G = ctx.input(2 + count + i);
    const Tensor& V = ctx.input(2 + 2 * count + i);
    MRT_CHECK_ARG(G.shape() == X.shape() && V.shape() == X.shape(), n.op_type, ": X ", X.describe(), ", G ",
                  G.describe(), " and state ", V.describe(), " must have one shape");
    const std::vector<double> x = norm::to_doubles(X, "X"), g = norm::to_doubles(G, "G"), v = norm::to_doubles(V, "V");
    std::vector<double> xn(x.size()), vn(x.size()), hn;
    if (kind == Optimizer::kAdagrad) {
      const double decay = n.attr_float("decay_factor", 0.f), eps = n.attr_float("epsilon", 0.f);
      const double rr = r / (1 + t * decay);
      for (size_t k = 0; k < x.size(); ++k) {
        const double gr = norm * x[k] + g[k];
        vn[k] = v[k] + gr * gr;
        xn[k] = x[k] - rr * gr / (std::sqrt(vn[k]) + eps);
      }
    } else if (kind == Optimizer::kMomentum) {
      const double alpha = n.attr_float("alpha", 0.f), beta = n.attr_float("beta", 0.f);
      const std::string mode = n.attr_string("mode", "standard");
      MRT_CHECK_ARG(mode == "standard" || mode == "nesterov", "Momentum: mode is '", mode,
                    "'; expected standard or nesterov");
      const double b = t > 0 ? beta : 1.0;
      for (size_t k = 0; k < x.size(); ++k) {
        const double gr = norm * x[k] + g[k];
        vn[k] = alpha * v[k] + b * gr;
        xn[k] = mode == "standard" ? x[k] - r * vn[k] : x[k] - r * (gr + alpha * vn[k]);
      }
    } else {
      const Tensor& H = ctx.input(2 + 3 * count + i);
      MRT_CHECK_ARG(H.shape() == X.shape(), n.op_type, ": X ", X.describe(), " and its second-moment state ",
                    H.describe(), " must have one shape");
      const std::vector<double> h = norm::to_doubles(H, "H");
      const double alpha = n.attr_float("alpha", 0.9f), beta = n.attr_float("beta", 0.999f);
      const double eps = n.attr_float("epsilon", 1e-6f), post = n.attr_float("norm_coefficient_post", 0.f);
      const double ra = t > 0 ? r * std::sqrt(1 - std::pow(beta, t)) / (1 - std::pow(alpha, t)) : r;
      hn.resize(x.size());
      for (size_t k = 0; k < x.size(); ++k) {
        const double gr = norm * x[k] + g[k];
        vn[k] = alpha * v[k] + (1 - alpha) * gr;
        hn[k] = beta * h[k] + (1 - beta) * gr * gr;
        xn[k] = (1 - post) * (x[k] - ra * (vn[k] / (std::sqrt(hn[k]) + eps)));
      }
    }
    norm::from_doubles(ctx.output(i, X.dtype(), X.shape()), xn);
    norm::from_doubles(ctx.output(count + i, V.dtype(), V.shape()), vn);
    if (kind == Optimizer::kAdam) {
      const Tensor& H = ctx.input(2 + 3 * count + i);
      norm::from_doubles(ctx.output(2 * count + i, H.dtype(), H.shape()), hn);
    }
  }
}

void momentum_check(const Node& n, int64_t) {
  const std::string mode = n.attr_string("mode", "standard");
  MRT_ENFORCE(mode == "standard" || mode == "nesterov", MRT_INVALID_MODEL, n.label(), ": attribute mode is '", mode,
              "'; expected standard or nesterov");
}

}  // namespace

void register_training_optimizer_kernels(KernelRegistry& r) {
  r.add_domain("ai.onnx.preview.training", "Adagrad", 1, optimizer_kernel<Optimizer::kAdagrad>);
  r.add_domain("ai.onnx.preview.training", "Momentum", 1, optimizer_kernel<Optimizer::kMomentum>, momentum_check);
  r.add_domain("ai.onnx.preview.training", "Adam", 1, optimizer_kernel<Optimizer::kAdam>);
}

}  // namespace mrt
