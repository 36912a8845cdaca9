// ai.onnx.ml TreeEnsemble (opset 5): every tree walks from its root comparing one feature
// per node (BRANCH_LEQ/LT/GTE/GT/EQ/NEQ or set MEMBER, NaN following the true branch where
// nodes_missing_value_tracks_true says so) to a leaf, whose weight is added to its target
// (aggregate_function SUM, AVERAGE, MIN or MAX over the trees). A root whose both
// children are the same leaf is a one-leaf tree. post_transform other than NONE is
// refused at session creation. The parsed ensemble is cached per node.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "norm_util.h"

namespace mrt {
namespace {

struct Ensemble {
  std::vector<double> splits;
  std::vector<int64_t> feature, truen, falsen, trueleaf, falseleaf, missing_true, roots, leaf_target;
  std::vector<uint8_t> modes;
  std::vector<double> leaf_weight;
  std::vector<std::vector<double>> members;  // per node (MEMBER mode)
  int64_t aggregate = 1, n_targets = 1;
};

std::vector<double> tensor_doubles(const Node& n, const char* name, bool required) {
  const Tensor* t = n.attr_tensor(name);
  if (!t) {
    MRT_ENFORCE(!required, MRT_INVALID_MODEL, n.label(), ": required attribute '", name, "' is missing");
    return {};
  }
  std::vector<double> v(static_cast<size_t>(t->numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = t->scalar_as_double(static_cast<int64_t>(i));
  return v;
}

std::shared_ptr<Ensemble> parse_ensemble(const Node& n) {
  auto e = std::make_shared<Ensemble>();
  e->splits = tensor_doubles(n, "nodes_splits", true);
  const std::vector<double> modes = tensor_doubles(n, "nodes_modes", true);
  for (double m : modes) e->modes.push_back(static_cast<uint8_t>(m));
  e->feature = n.require_ints("nodes_featureids");
  e->truen = n.require_ints("nodes_truenodeids");
  e->falsen = n.require_ints("nodes_falsenodeids");
  e->trueleaf = n.require_ints("nodes_trueleafs");
  e->falseleaf = n.require_ints("nodes_falseleafs");
  e->missing_true = n.attr_ints("nodes_missing_value_tracks_true");
  e->roots = n.require_ints("tree_roots");
  e->leaf_target = n.require_ints("leaf_targetids");
  e->leaf_weight = tensor_doubles(n, "leaf_weights", true);
  e->aggregate = n.attr_int("aggregate_function", 1);
  e->n_targets = n.require_int("n_targets");
  const size_t count = e->splits.size();
  MRT_ENFORCE(e->modes.size() == count && e->feature.size() == count && e->truen.size() == count &&
                  e->falsen.size() == count && e->trueleaf.size() == count && e->falseleaf.size() == count &&
                  (e->missing_true.empty() || e->missing_true.size() == count),
              MRT_INVALID_MODEL, n.label(), ": the nodes_* attributes must all describe ", count, " nodes");
  MRT_ENFORCE(e->leaf_target.size() == e->leaf_weight.size(), MRT_INVALID_MODEL, n.label(),
              ": leaf_targetids and leaf_weights differ in length");
  MRT_ENFORCE(e->aggregate >= 0 && e->aggregate <= 3, MRT_INVALID_MODEL, n.label(), ": aggregate_function ",
              e->aggregate, " is not 0 (AVERAGE), 1 (SUM), 2 (MIN) or 3 (MAX)");
  MRT_ENFORCE(n.attr_int("post_transform", 0) == 0, MRT_NOT_IMPLEMENTED, n.label(), ": post_transform ",
              n.attr_int("post_transform", 0), " is not supported (0, NONE, is)");
  const std::vector<double> mv = tensor_doubles(n, "membership_values", false);
  e->members.resize(count);
  size_t pos = 0;
  for (size_t i = 0; i < count; ++i) {
    MRT_ENFORCE(e->modes[i] <= 6, MRT_INVALID_MODEL, n.label(), ": nodes_modes value ", int(e->modes[i]),
                " is not a known comparison");
    if (e->modes[i] != 6) continue;
    while (pos < mv.size() && !std::isnan(mv[pos])) e->members[i].push_back(mv[pos++]);
    MRT_ENFORCE(pos < mv.size() || !e->members[i].empty() || !mv.empty(), MRT_INVALID_MODEL, n.label(),
                ": a MEMBER node needs membership_values");
    ++pos;  // the NaN separator
  }
  auto in_range = [&](int64_t idx, bool leaf) {
    return idx >= 0 && static_cast<size_t>(idx) < (leaf ? e->leaf_weight.size() : count);
  };
  for (size_t i = 0; i < count; ++i)
    MRT_ENFORCE(in_range(e->truen[i], e->trueleaf[i] != 0) && in_range(e->falsen[i], e->falseleaf[i] != 0),
                MRT_INVALID_MODEL, n.label(), ": node ", i, " points outside the node or leaf arrays");
  for (int64_t r : e->roots)
    MRT_ENFORCE(in_range(r, false), MRT_INVALID_MODEL, n.label(), ": tree root ", r, " is not a node");
  return e;
}

void tree_check(const Node& n, int64_t) { (void)parse_ensemble(n); }

bool goes_true(const Ensemble& e, size_t i, double x) {
  if (std::isnan(x) && !e.missing_true.empty() && e.missing_true[i]) return true;
  const double s = e.splits[i];
  switch (e.modes[i]) {
    case 0: return x <= s;
    case 1: return x < s;
    case 2: return x >= s;
    case 3: return x > s;
    case 4: return x == s;
    case 5: return x != s;
    default: return std::find(e.members[i].begin(), e.members[i].end(), x) != e.members[i].end();
  }
}

void tree_kernel(OpContext& ctx) {
  const Node& n = ctx.node();
  auto e = ctx.node_cache<Ensemble>([&] { return parse_ensemble(n); });
  const Tensor& X = ctx.input(0);
  MRT_CHECK_ARG(X.rank() == 2, "TreeEnsemble: X must be [N, features], got ", X.describe());
  const int64_t N = X.dim(0), F = X.dim(1), T = e->n_targets;
  const std::vector<double> x = norm::to_doubles(X, "TreeEnsemble X");
  for (int64_t f : e->feature)
    MRT_CHECK_ARG(f >= 0 && f < F, "TreeEnsemble: feature id ", f, " is outside the ", F, " input features");
  for (int64_t t : e->leaf_target)
    MRT_CHECK_ARG(t >= 0 && t < T, "TreeEnsemble: leaf target ", t, " is outside n_targets ", T);
  const double init = e->aggregate == 2 ? std::numeric_limits<double>::max()
                      : e->aggregate == 3 ? std::numeric_limits<double>::lowest() : 0.0;
  std::vector<double> y(static_cast<size_t>(N * T), init);
  const double trees = static_cast<double>(e->roots.size());
  for (int64_t r = 0; r < N; ++r) {
    const double* xr = &x[static_cast<size_t>(r * F)];
    for (int64_t root : e->roots) {
      size_t i = static_cast<size_t>(root);
      int64_t leaf;
      if (e->trueleaf[i] && e->falseleaf[i] && e->truen[i] == e->falsen[i]) {
        leaf = e->truen[i];
      } else {
        for (size_t steps = 0;; ++steps) {
          MRT_CHECK_ARG(steps <= e->splits.size(), "TreeEnsemble: a tree has a cycle");
          const bool t = goes_true(*e, i, xr[e->feature[i]]);
          const int64_t next = t ? e->truen[i] : e->falsen[i];
          if (t ? e->trueleaf[i] : e->falseleaf[i]) {
            leaf = next;
            break;
          }
          i = static_cast<size_t>(next);
        }
      }
      const double w = e->leaf_weight[static_cast<size_t>(leaf)];
      double& out = y[static_cast<size_t>(r * T + e->leaf_target[static_cast<size_t>(leaf)])];
      switch (e->aggregate) {
        case 0: out += w / trees; break;
        case 1: out += w; break;
        case 2: out = std::min(out, w); break;
        default: out = std::max(out, w); break;
      }
    }
  }
  Tensor& Y = ctx.output(0, X.dtype(), Shape{N, T});
  norm::from_doubles(Y, y);
}

}  // namespace

void register_ml_tree_kernels(KernelRegistry& r) {
  r.add_domain("ai.onnx.ml", "TreeEnsemble", 5, tree_kernel, tree_check);
}

}  // namespace mrt
