// ai.onnx.ml TreeEnsemble (opset 5): every tree walks from its root comparing one feature
// per node (BRANCH_LEQ/LT/GTE/GT/EQ/NEQ or set MEMBER, NaN following the true branch where
// nodes_missing_value_tracks_true says so) to a leaf, whose weight is added to its target
// (aggregate_function SUM, AVERAGE, MIN or MAX over the trees). A root whose both
// children are the same leaf is a one-leaf tree. post_transform other than NONE is
// refused at session creation. The parsed ensemble is cached per node. TreeEnsembleRegressor and
// TreeEnsembleClassifier (the older encoding scikit-learn converters emit, with every post_transform)
// share the tree walk.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <memory>
#include <vector>

#include "../resource_limits.h"
#include "ml_common.h"
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
  std::vector<double> y(checked_scratch({N, T}, sizeof(double), "TreeEnsemble output"), init);
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

// TreeEnsembleRegressor (ai.onnx.ml 1 and 3): the legacy encoding (per-tree node ids,
// string modes, LEAF nodes carrying target weights) is translated into the form above;
// base_values are added after aggregation. post_transform other than NONE is refused.
struct LegacyEnsemble {
  Ensemble e;
  std::vector<double> base;
  ml::Post post = ml::Post::kNone;
  // TreeEnsembleClassifier: the class labels, and the one class every leaf scores when all leaves score
  // the same class (a binary model's single score), else -1.
  std::vector<int64_t> int_labels;
  std::vector<std::string> string_labels;
  int64_t single_class = -1;
};

// Floats from `name`, or from its `name`_as_tensor form (opset 3).
std::vector<double> floats_or_tensor(const Node& n, const std::string& name) {
  if (const Tensor* t = n.attr_tensor(name + "_as_tensor")) {
    std::vector<double> v;
    for (int64_t i = 0; i < t->numel(); ++i) v.push_back(t->scalar_as_double(i));
    return v;
  }
  const std::vector<float> f = n.attr_floats(name);
  return std::vector<double>(f.begin(), f.end());
}

// TreeEnsembleRegressor (`target_*` leaves) and TreeEnsembleClassifier (`class_*` leaves, one target
// per class label).
std::shared_ptr<LegacyEnsemble> parse_legacy(const Node& n, bool classifier) {
  auto out = std::make_shared<LegacyEnsemble>();
  Ensemble& e = out->e;
  const std::vector<int64_t> tree = n.require_ints("nodes_treeids"), id = n.require_ints("nodes_nodeids");
  const std::vector<int64_t> feat = n.require_ints("nodes_featureids");
  const std::vector<int64_t> tn = n.require_ints("nodes_truenodeids"), fn = n.require_ints("nodes_falsenodeids");
  const std::vector<double> vals = floats_or_tensor(n, "nodes_values");
  const Attribute* modes = n.attr("nodes_modes");
  MRT_ENFORCE(modes, MRT_INVALID_MODEL, n.label(), ": required attribute 'nodes_modes' is missing");
  const size_t count = tree.size();
  MRT_ENFORCE(id.size() == count && feat.size() == count && tn.size() == count && fn.size() == count &&
                  vals.size() == count && modes->strings.size() == count,
              MRT_INVALID_MODEL, n.label(), ": the nodes_* attributes must all describe ", count, " nodes");
  const std::string agg = n.attr_string("aggregate_function", "SUM");
  e.aggregate = agg == "AVERAGE" ? 0 : agg == "SUM" ? 1 : agg == "MIN" ? 2 : agg == "MAX" ? 3 : -1;
  MRT_ENFORCE(e.aggregate >= 0, MRT_INVALID_MODEL, n.label(), ": aggregate_function '", agg, "' is not known");
  out->post = ml::post_transform(n);
  if (classifier) {
    out->int_labels = n.attr_ints("classlabels_int64s");
    if (const Attribute* s = n.attr("classlabels_strings")) out->string_labels = s->strings;
    MRT_ENFORCE(out->int_labels.empty() != out->string_labels.empty(), MRT_INVALID_MODEL, n.label(),
                ": exactly one of classlabels_int64s and classlabels_strings must be given");
    e.n_targets = static_cast<int64_t>(std::max(out->int_labels.size(), out->string_labels.size()));
  } else {
    e.n_targets = n.attr_int("n_targets", 1);
  }
  MRT_ENFORCE(e.n_targets >= 1, MRT_INVALID_MODEL, n.label(), ": no targets or class labels");
  const std::string leaf = classifier ? "class_" : "target_";
  // node (tree, id) -> index; targets grouped per leaf node
  std::map<std::pair<int64_t, int64_t>, size_t> index;
  for (size_t i = 0; i < count; ++i) index[{tree[i], id[i]}] = i;
  const std::vector<int64_t> tt = n.require_ints(leaf + "treeids"), tid = n.require_ints(leaf + "nodeids");
  const std::vector<int64_t> tgt = n.require_ints(leaf + "ids");
  const std::vector<double> tw = floats_or_tensor(n, leaf + "weights");
  MRT_ENFORCE(tid.size() == tt.size() && tgt.size() == tt.size() && tw.size() == tt.size(), MRT_INVALID_MODEL,
              n.label(), ": the ", leaf, "* attributes differ in length");
  if (classifier && !tgt.empty() && std::all_of(tgt.begin(), tgt.end(), [&](int64_t c) { return c == tgt[0]; }))
    out->single_class = tgt[0];
  // Each LEAF becomes a chain of leaves: one leaf per (target, weight) pair; a tree
  // reaching a legacy leaf contributes all of them. Encoded as extra tree roots per target
  // would change AVERAGE, so leaves keep a list.
  std::map<size_t, std::vector<std::pair<int64_t, double>>> leaf_targets;
  for (size_t k = 0; k < tt.size(); ++k) {
    auto it = index.find({tt[k], tid[k]});
    MRT_ENFORCE(it != index.end(), MRT_INVALID_MODEL, n.label(), ": target refers to unknown node ", tid[k], " of tree ",
                tt[k]);
    leaf_targets[it->second].push_back({tgt[k], tw[k]});
  }
  static const std::map<std::string, uint8_t> kModes = {{"BRANCH_LEQ", 0}, {"BRANCH_LT", 1}, {"BRANCH_GTE", 2},
                                                        {"BRANCH_GT", 3},  {"BRANCH_EQ", 4}, {"BRANCH_NEQ", 5}};
  e.splits = vals;
  e.feature = feat;
  e.missing_true = n.attr_ints("nodes_missing_value_tracks_true");
  for (size_t i = 0; i < count; ++i) {
    const std::string& m = modes->strings[i];
    if (m == "LEAF") {
      e.modes.push_back(7);  // marker: a leaf node
    } else {
      auto it = kModes.find(m);
      MRT_ENFORCE(it != kModes.end(), MRT_INVALID_MODEL, n.label(), ": nodes_modes value '", m, "' is not known");
      e.modes.push_back(it->second);
    }
    size_t t = i, f = i;
    if (m != "LEAF") {
      auto ti = index.find({tree[i], tn[i]}), fi = index.find({tree[i], fn[i]});
      MRT_ENFORCE(ti != index.end() && fi != index.end(), MRT_INVALID_MODEL, n.label(), ": node ", id[i], " of tree ",
                  tree[i], " points to a missing node");
      t = ti->second;
      f = fi->second;
    }
    e.truen.push_back(static_cast<int64_t>(t));
    e.falsen.push_back(static_cast<int64_t>(f));
  }
  std::set<int64_t> seen;
  for (size_t i = 0; i < count; ++i)
    if (seen.insert(tree[i]).second) e.roots.push_back(static_cast<int64_t>(index[{tree[i], 0}]));
  e.members.resize(count);
  out->base.assign(static_cast<size_t>(e.n_targets), 0.0);
  const std::vector<double> base = floats_or_tensor(n, "base_values");
  // (a binary classifier's single score may come with a single base value)
  const bool single_base = classifier && base.size() == 1 && out->single_class >= 0;
  MRT_ENFORCE(base.empty() || single_base || base.size() == static_cast<size_t>(e.n_targets), MRT_INVALID_MODEL,
              n.label(), ": base_values must hold one value per ", classifier ? "class" : "target");
  if (single_base && out->single_class < e.n_targets) out->base[static_cast<size_t>(out->single_class)] = base[0];
  else if (!single_base) for (size_t i = 0; i < base.size(); ++i) out->base[i] = base[i];
  // leaf payloads: leaf_target/leaf_weight hold the pairs, trueleaf[i] = first pair, falseleaf[i] = pair count
  for (size_t i = 0; i < count; ++i) {
    const auto& pairs = leaf_targets[i];
    e.trueleaf.push_back(static_cast<int64_t>(e.leaf_target.size()));
    e.falseleaf.push_back(static_cast<int64_t>(pairs.size()));
    for (const auto& p : pairs) {
      MRT_ENFORCE(p.first >= 0 && p.first < e.n_targets, MRT_INVALID_MODEL, n.label(), ": target id ", p.first,
                  " is outside n_targets ", e.n_targets);
      e.leaf_target.push_back(p.first);
      e.leaf_weight.push_back(p.second);
    }
  }
  return out;
}

void legacy_regressor_check(const Node& n, int64_t) { (void)parse_legacy(n, false); }
void legacy_classifier_check(const Node& n, int64_t) { (void)parse_legacy(n, true); }

// Scores [N, targets] of the legacy ensemble: base values plus the aggregated leaf weights.
std::vector<double> legacy_scores(const LegacyEnsemble& le, const Tensor& X, const char* op) {
  const Ensemble& e = le.e;
  MRT_CHECK_ARG(X.rank() == 2 || X.rank() == 1, op, ": X must be [N, features], got ", X.describe());
  const int64_t N = X.rank() == 2 ? X.dim(0) : 1, F = X.rank() == 2 ? X.dim(1) : X.dim(0), T = e.n_targets;
  for (size_t i = 0; i < e.feature.size(); ++i)
    MRT_CHECK_ARG(e.modes[i] == 7 || (e.feature[i] >= 0 && e.feature[i] < F), op, ": feature id ", e.feature[i],
                  " is outside the ", F, " input features");
  std::vector<double> x(static_cast<size_t>(X.numel()));
  for (int64_t i = 0; i < X.numel(); ++i) x[static_cast<size_t>(i)] = X.scalar_as_double(i);
  std::vector<double> y(checked_scratch({N, T}, sizeof(double), op));
  std::vector<double> acc(static_cast<size_t>(T));
  std::vector<bool> hit(static_cast<size_t>(T));
  for (int64_t r = 0; r < N; ++r) {
    const double* xr = &x[static_cast<size_t>(r * F)];
    std::fill(acc.begin(), acc.end(), 0.0);
    std::fill(hit.begin(), hit.end(), false);
    for (int64_t root : e.roots) {
      size_t i = static_cast<size_t>(root);
      for (size_t steps = 0; e.modes[i] != 7; ++steps) {
        MRT_CHECK_ARG(steps <= e.splits.size(), op, ": a tree has a cycle");
        i = static_cast<size_t>(goes_true(e, i, xr[e.feature[i]]) ? e.truen[i] : e.falsen[i]);
      }
      for (int64_t k = 0; k < e.falseleaf[i]; ++k) {
        const size_t p = static_cast<size_t>(e.trueleaf[i] + k);
        const size_t t = static_cast<size_t>(e.leaf_target[p]);
        const double w = e.leaf_weight[p];
        if (e.aggregate == 2) acc[t] = hit[t] ? std::min(acc[t], w) : w;
        else if (e.aggregate == 3) acc[t] = hit[t] ? std::max(acc[t], w) : w;
        else acc[t] += w;
        hit[t] = true;
      }
    }
    for (int64_t t = 0; t < T; ++t) {
      double v = acc[static_cast<size_t>(t)];
      if (e.aggregate == 0) v /= static_cast<double>(e.roots.size());
      y[static_cast<size_t>(r * T + t)] = v + le.base[static_cast<size_t>(t)];
    }
  }
  return y;
}

void legacy_regressor_kernel(OpContext& ctx) {
  auto le = ctx.node_cache<LegacyEnsemble>([&] { return parse_legacy(ctx.node(), false); });
  const Tensor& X = ctx.input(0);
  std::vector<double> y = legacy_scores(*le, X, "TreeEnsembleRegressor");
  const int64_t T = le->e.n_targets, N = static_cast<int64_t>(y.size()) / T;
  for (int64_t r = 0; r < N; ++r) ml::apply_post(le->post, &y[static_cast<size_t>(r * T)], T);
  norm::from_doubles(ctx.output(0, DType::kFloat, Shape{N, T}), y);
}

// TreeEnsembleClassifier: label = the class of the highest score (the first on a tie) after the post
// transform. A model whose leaves all score one class (a binary model's single score s) is laid out as
// two columns first, [-s, s], as onnxruntime does (class 1 wins when s > 0).
void legacy_classifier_kernel(OpContext& ctx) {
  auto le = ctx.node_cache<LegacyEnsemble>([&] { return parse_legacy(ctx.node(), true); });
  const Tensor& X = ctx.input(0);
  std::vector<double> y = legacy_scores(*le, X, "TreeEnsembleClassifier");
  const int64_t T = le->e.n_targets, N = static_cast<int64_t>(y.size()) / T;
  const bool binary = le->single_class >= 0 && T <= 2;
  const int64_t width = binary ? 2 : T;
  std::vector<double> scores(static_cast<size_t>(N * width));
  for (int64_t r = 0; r < N; ++r) {
    double* row = &scores[static_cast<size_t>(r * width)];
    if (binary) {
      const double s = y[static_cast<size_t>(r * T + le->single_class)];
      row[0] = -s;
      row[1] = s;
    } else {
      std::copy(&y[static_cast<size_t>(r * T)], &y[static_cast<size_t>(r * T)] + T, row);
    }
    ml::apply_post(le->post, row, width);
  }
  const bool strings = !le->string_labels.empty();
  Tensor& label = ctx.output(0, strings ? DType::kString : DType::kInt64, Shape{N});
  for (int64_t r = 0; r < N; ++r) {
    const double* row = &scores[static_cast<size_t>(r * width)];
    const int64_t k = std::max_element(row, row + width) - row;
    // (a binary model with one label: class 1 when it wins, else 0)
    if (strings) {
      MRT_CHECK_ARG(k < T, "TreeEnsembleClassifier: score column ", k, " has no class label");
      set_string(label, r, le->string_labels[static_cast<size_t>(k)]);
    } else {
      label.data<int64_t>()[r] = k < T ? le->int_labels[static_cast<size_t>(k)] : k;
    }
  }
  if (ctx.has_output(1)) norm::from_doubles(ctx.output(1, DType::kFloat, Shape{N, width}), scores);
}

}  // namespace

void register_ml_tree_kernels(KernelRegistry& r) {
  r.add_domain("ai.onnx.ml", "TreeEnsemble", 5, tree_kernel, tree_check);
  r.add_domain("ai.onnx.ml", "TreeEnsembleRegressor", 1, legacy_regressor_kernel, legacy_regressor_check);
  r.add_domain("ai.onnx.ml", "TreeEnsembleClassifier", 1, legacy_classifier_kernel, legacy_classifier_check);
}

}  // namespace mrt
