// ai.onnx.preview FlexAttention: scaled dot-product attention over 4-D Q, K, V (grouped
// query heads allowed) whose scores and probabilities pass through the optional
// score_mod / prob_mod subgraphs (one [B, Hq, L, S] tensor in, one out). Scores,
// softmax and the subgraphs run in float32 (double for double inputs or
// softmax_precision = DOUBLE); the output has V's element type. The subgraphs are
// compiled by the session at creation (subgraph.h).
#include <cmath>
#include <vector>

#include "../resource_limits.h"
#include "../session.h"
#include "../subgraph.h"
#include "norm_util.h"

namespace mrt {
namespace {

void flex_check(const Node& n, int64_t) {
  if (n.has_attr("softmax_precision")) {
    const int64_t p = n.attr_int("softmax_precision", 1);
    MRT_ENFORCE(p == 1 || p == 11, MRT_NOT_IMPLEMENTED, n.label(), ": softmax_precision ", p,
                " is not supported (1, FLOAT, and 11, DOUBLE, are)");
  }
  for (const char* g : {"score_mod", "prob_mod"}) {
    const Attribute* a = n.attr(g);
    if (!a) continue;
    MRT_ENFORCE(a->g && a->g->inputs.size() == 1 && a->g->outputs.size() == 1, MRT_INVALID_MODEL, n.label(), ": ", g,
                " must be a graph with one input and one output");
  }
}

Tensor run_mod(OpContext& ctx, const CompiledSubgraphs& c, const char* name, Tensor t) {
  auto it = c.by_attr.find(name);
  if (it == c.by_attr.end()) return t;
  const Graph& g = *ctx.node().attr(name)->g;
  std::vector<std::string> names{g.inputs[0].name};
  std::vector<Tensor> values{std::move(t)};
  for (size_t k = 0; k < c.outer.size(); ++k) {
    names.push_back(c.outer[k]);
    values.push_back(ctx.input(ctx.node().inputs.size() + k));
  }
  std::vector<Tensor> out = it->second->run(names, values, {});
  return out[0];
}

template <class C>
void flex_run(OpContext& ctx, DType cdt) {
  const Node& n = ctx.node();
  const Tensor& Q = ctx.input(0);
  const Tensor& K = ctx.input(1);
  const Tensor& V = ctx.input(2);
  MRT_CHECK_ARG(Q.rank() == 4 && K.rank() == 4 && V.rank() == 4, "FlexAttention: Q, K and V must be 4-D, got ",
                Q.describe(), ", ", K.describe(), ", ", V.describe());
  const int64_t B = Q.dim(0), Hq = Q.dim(1), L = Q.dim(2), E = Q.dim(3);
  const int64_t Hkv = K.dim(1), S = K.dim(2), Ev = V.dim(3);
  MRT_CHECK_ARG(K.dim(0) == B && V.dim(0) == B && V.dim(1) == Hkv && V.dim(2) == S && K.dim(3) == E &&
                    Hkv > 0 && Hq % Hkv == 0,
                "FlexAttention: Q ", Q.describe(), ", K ", K.describe(), " and V ", V.describe(), " do not match");
  const double scale = n.has_attr("scale") ? n.attr_float("scale", 1.f) : 1.0 / std::sqrt(static_cast<double>(E));
  const C sq = static_cast<C>(std::sqrt(static_cast<float>(scale)));
  const std::vector<double> q = norm::to_doubles(Q, "Q"), k = norm::to_doubles(K, "K"), v = norm::to_doubles(V, "V");
  const int64_t group = Hq / Hkv;
  auto compiled = ctx.node_cache<CompiledSubgraphs>([]() -> std::shared_ptr<CompiledSubgraphs> {
    return std::make_shared<CompiledSubgraphs>();  // no modifier subgraphs
  });
  Tensor scores(cdt, Shape{B, Hq, L, S}, ctx.allocator());
  C* sc = scores.data<C>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < L; ++i)
        for (int64_t j = 0; j < S; ++j) {
          C s = 0;
          const double* qi = &q[static_cast<size_t>(((b * Hq + h) * L + i) * E)];
          const double* kj = &k[static_cast<size_t>(((b * Hkv + h / group) * S + j) * E)];
          for (int64_t e = 0; e < E; ++e) s += (static_cast<C>(qi[e]) * sq) * (static_cast<C>(kj[e]) * sq);
          sc[((b * Hq + h) * L + i) * S + j] = s;
        }
  Tensor modded = run_mod(ctx, *compiled, "score_mod", scores);
  MRT_CHECK_ARG(modded.dtype() == cdt && modded.shape() == scores.shape(), "FlexAttention: score_mod returned ",
                modded.describe(), ", expected ", scores.describe());
  Tensor probs(cdt, Shape{B, Hq, L, S}, ctx.allocator());
  const C* ms = modded.data<C>();
  C* pr = probs.data<C>();
  for (int64_t r = 0; r < B * Hq * L; ++r) {
    C m = -INFINITY;
    for (int64_t j = 0; j < S; ++j) m = std::max(m, ms[r * S + j]);
    C sum = 0;
    for (int64_t j = 0; j < S; ++j) {
      pr[r * S + j] = std::exp(ms[r * S + j] - m);
      sum += pr[r * S + j];
    }
    for (int64_t j = 0; j < S; ++j) pr[r * S + j] /= sum;
  }
  Tensor pm = run_mod(ctx, *compiled, "prob_mod", probs);
  MRT_CHECK_ARG(pm.dtype() == cdt && pm.shape() == probs.shape(), "FlexAttention: prob_mod returned ", pm.describe(),
                ", expected ", probs.describe());
  const C* p = pm.data<C>();
  std::vector<double> y(checked_scratch({B, Hq, L, Ev}, sizeof(double), "FlexAttention output"), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < L; ++i) {
        double* yo = &y[static_cast<size_t>(((b * Hq + h) * L + i) * Ev)];
        for (int64_t e = 0; e < Ev; ++e) {
          C acc = 0;
          for (int64_t j = 0; j < S; ++j)
            acc += p[((b * Hq + h) * L + i) * S + j] *
                   static_cast<C>(v[static_cast<size_t>(((b * Hkv + h / group) * S + j) * Ev + e)]);
          yo[e] = static_cast<double>(acc);
        }
      }
  norm::from_doubles(ctx.output(0, V.dtype(), Shape{B, Hq, L, Ev}), y);
}

void flex_kernel(OpContext& ctx) {
  const Node& n = ctx.node();
  const bool dbl = ctx.input(0).dtype() == DType::kDouble || n.attr_int("softmax_precision", 0) == 11;
  if (dbl) flex_run<double>(ctx, DType::kDouble);
  else flex_run<float>(ctx, DType::kFloat);
}

}  // namespace

void register_flex_attention_kernels(KernelRegistry& r) {
  r.add_domain("ai.onnx.preview", "FlexAttention", 1, flex_kernel, flex_check);
}

}  // namespace mrt
