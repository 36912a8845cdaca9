// Control flow: If (opsets 1-21+), Loop (1-21+), Scan (8 with its batch axis, 9-21+) and SequenceMap. Their branches and
// bodies were compiled by the session at creation (subgraph.h) and arrive through the
// node cache; values of enclosing graphs the subgraphs read follow the node's own
// inputs. Loop carries its state through the body until the trip count or the
// condition ends it and stacks the scan outputs along a new first axis; Scan slices its
// scan inputs along scan_input_axes (either direction) and stacks the body's scan outputs
// along scan_output_axes.
#include <cstring>
#include <limits>

#include "../session.h"
#include "../subgraph.h"
#include "../kernel.h"

namespace mrt {
namespace {

std::shared_ptr<CompiledSubgraphs> compiled(OpContext& ctx) {
  return ctx.node_cache<CompiledSubgraphs>([]() -> std::shared_ptr<CompiledSubgraphs> {
    fail(MRT_INTERNAL, "the node's subgraphs were not compiled by the session");
  });
}

const Graph& graph_attr(const Node& n, const char* name) {
  const Attribute* a = n.attr(name);
  MRT_ENFORCE(a && a->g, MRT_INVALID_MODEL, n.label(), ": required graph attribute '", name, "' is missing");
  return *a->g;
}

Session& body_of(const CompiledSubgraphs& c, const Node& n, const char* name) {
  auto it = c.by_attr.find(name);
  MRT_ENFORCE(it != c.by_attr.end(), MRT_INVALID_MODEL, n.label(), ": required graph attribute '", name,
              "' is missing");
  return *it->second;
}

// Runs `body` with its formal inputs bound to `formal` and the outer-scope values.
std::vector<Tensor> run_body(OpContext& ctx, Session& body, const Graph& g, const CompiledSubgraphs& c,
                             std::vector<Tensor> formal) {
  const Node& n = ctx.node();
  MRT_CHECK_ARG(formal.size() == g.inputs.size(), "the subgraph declares ", g.inputs.size(), " inputs but ",
                formal.size(), " values are passed to it");
  std::vector<std::string> names;
  for (const auto& v : g.inputs) names.push_back(v.name);
  const size_t first_outer = n.inputs.size();
  for (size_t k = 0; k < c.outer.size(); ++k) {
    names.push_back(c.outer[k]);
    const Tensor* t = ctx.optional_input(first_outer + k);
    MRT_CHECK_ARG(t != nullptr, "outer-scope value '", c.outer[k], "' is not available");
    formal.push_back(*t);
  }
  return body.run(names, formal, {});
}

Tensor scalar_bool(bool v) {
  Tensor t(DType::kBool, Shape{});
  *t.data<bool>() = v;
  return t;
}

bool read_bool(const Tensor& t, const char* what) {
  MRT_CHECK_ARG(t.numel() == 1, what, " must hold one value, got ", t.describe());
  if (t.dtype() == DType::kBool) return *t.data<bool>();
  return t.scalar_as_double(0) != 0;
}

void check_graphs(const Node& n, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    const Attribute* a = n.attr(name);
    MRT_ENFORCE(a && a->g, MRT_INVALID_MODEL, n.label(), ": required graph attribute '", name, "' is missing");
  }
}

void if_check(const Node& n, int64_t) {
  check_graphs(n, {"then_branch", "else_branch"});
  for (const char* b : {"then_branch", "else_branch"})
    MRT_ENFORCE(n.attr(b)->g->outputs.size() == n.outputs.size(), MRT_INVALID_MODEL, n.label(), ": ", b, " has ",
                n.attr(b)->g->outputs.size(), " outputs but the node has ", n.outputs.size());
}

void if_kernel(OpContext& ctx) {
  const Node& n = ctx.node();
  auto c = compiled(ctx);
  const char* branch = read_bool(ctx.input(0), "If condition") ? "then_branch" : "else_branch";
  std::vector<Tensor> outs = run_body(ctx, body_of(*c, n, branch), graph_attr(n, branch), *c, {});
  for (size_t i = 0; i < outs.size() && i < ctx.output_count(); ++i) ctx.set_output(i, std::move(outs[i]));
}

// Stacks equally shaped tensors along a new axis `axis` (reverse: last slice first).
Tensor stack(const std::vector<Tensor>& parts, int64_t axis, bool reverse, const char* what) {
  if (parts.empty()) return Tensor(DType::kFloat, Shape{0});
  const Tensor& first = parts[0];
  MRT_CHECK_ARG(first.is_tensor(), what, ": scan outputs must be tensors, got ", first.describe());
  for (const Tensor& p : parts)
    MRT_CHECK_ARG(p.shape() == first.shape() && p.dtype() == first.dtype(), what, ": iterations produced ",
                  first.describe(), " and ", p.describe(), "; scan outputs must keep their shape");
  const int64_t rank = static_cast<int64_t>(first.rank()) + 1;
  axis = normalize_axis(axis, rank, "scan output axis");
  Shape shape = first.shape();
  shape.insert(shape.begin() + axis, static_cast<int64_t>(parts.size()));
  Tensor out(first.dtype(), shape);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= first.dim(static_cast<size_t>(d));
  for (size_t d = static_cast<size_t>(axis); d < first.rank(); ++d) inner *= first.dim(d);
  const size_t esz = dtype_size(first.dtype());
  const int64_t T = static_cast<int64_t>(parts.size());
  for (int64_t t = 0; t < T; ++t) {
    const Tensor& p = parts[static_cast<size_t>(reverse ? T - 1 - t : t)];
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(static_cast<char*>(out.raw()) + static_cast<size_t>((o * T + t) * inner) * esz,
                  static_cast<const char*>(p.raw()) + static_cast<size_t>(o * inner) * esz,
                  static_cast<size_t>(inner) * esz);
  }
  for (const Tensor& p : parts) keep_strings(out, p);
  return out;
}

void loop_check(const Node& n, int64_t) {
  check_graphs(n, {"body"});
  MRT_ENFORCE(n.inputs.size() >= 2, MRT_INVALID_MODEL, n.label(), ": Loop takes M and cond (either may be \"\"), got ",
              n.inputs.size(), " inputs");
  const Graph& b = *n.attr("body")->g;
  const size_t carried = n.inputs.size() - 2;
  MRT_ENFORCE(b.inputs.size() == carried + 2, MRT_INVALID_MODEL, n.label(), ": the body has ", b.inputs.size(),
              " inputs; with ", carried, " loop-carried values it needs ", carried + 2);
  MRT_ENFORCE(b.outputs.size() >= carried + 1 && b.outputs.size() - 1 == n.outputs.size(),
              MRT_INVALID_MODEL, n.label(), ": the body has ", b.outputs.size(), " outputs, the node ",
              n.outputs.size(), "; expected the condition, ", carried, " carried values and the scan outputs");
}

void loop_kernel(OpContext& ctx) {
  const Node& n = ctx.node();
  auto c = compiled(ctx);
  Session& body = body_of(*c, n, "body");
  const Graph& g = graph_attr(n, "body");
  int64_t max_trip = std::numeric_limits<int64_t>::max();
  if (const Tensor* m = ctx.optional_input(0)) max_trip = m->int_at(0);
  bool cond = true;
  if (const Tensor* t = ctx.optional_input(1)) cond = read_bool(*t, "Loop condition");
  const size_t carried_n = n.inputs.size() - 2;
  std::vector<Tensor> carried;
  for (size_t i = 0; i < carried_n; ++i) carried.push_back(ctx.input(2 + i));
  const size_t scan_n = g.outputs.size() - 1 - carried_n;
  std::vector<std::vector<Tensor>> scans(scan_n);
  for (int64_t it = 0; it < max_trip && cond; ++it) {
    std::vector<Tensor> formal;
    Tensor iter(DType::kInt64, Shape{});
    *iter.data<int64_t>() = it;
    formal.push_back(iter);
    formal.push_back(scalar_bool(cond));
    for (auto& t : carried) formal.push_back(t);
    std::vector<Tensor> outs = run_body(ctx, body, g, *c, std::move(formal));
    cond = read_bool(outs[0], "Loop body condition output");
    for (size_t i = 0; i < carried_n; ++i) carried[i] = std::move(outs[1 + i]);
    for (size_t k = 0; k < scan_n; ++k) scans[k].push_back(std::move(outs[1 + carried_n + k]));
  }
  for (size_t i = 0; i < carried_n; ++i) ctx.set_output(i, carried[i]);
  for (size_t k = 0; k < scan_n; ++k) {
    if (scans[k].empty()) {
      const DType dt = g.outputs[1 + carried_n + k].elem_type;
      ctx.set_output(carried_n + k, Tensor(dt == DType::kUndefined ? DType::kFloat : dt, Shape{0}));
    } else {
      ctx.set_output(carried_n + k, stack(scans[k], 0, false, "Loop"));
    }
  }
}

void scan_check(const Node& n, int64_t) {
  check_graphs(n, {"body"});
  const int64_t m = n.attr_int("num_scan_inputs", -1);
  MRT_ENFORCE(m >= 1 && m <= static_cast<int64_t>(n.inputs.size()), MRT_INVALID_MODEL, n.label(),
              ": attribute num_scan_inputs must be between 1 and the input count ", n.inputs.size(), ", got ", m);
}

// Slice t of `x` along `axis` (that axis removed).
Tensor take_slice(const Tensor& x, int64_t axis, int64_t t) {
  Shape shape = x.shape();
  const int64_t len = shape[static_cast<size_t>(axis)];
  shape.erase(shape.begin() + axis);
  Tensor out(x.dtype(), shape);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(static_cast<size_t>(d));
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.rank(); ++d) inner *= x.dim(d);
  const size_t esz = dtype_size(x.dtype());
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(static_cast<char*>(out.raw()) + static_cast<size_t>(o * inner) * esz,
                static_cast<const char*>(x.raw()) + static_cast<size_t>((o * len + t) * inner) * esz,
                static_cast<size_t>(inner) * esz);
  keep_strings(out, x);
  return out;
}

void scan_kernel(OpContext& ctx) {
  const Node& n = ctx.node();
  auto c = compiled(ctx);
  Session& body = body_of(*c, n, "body");
  const Graph& g = graph_attr(n, "body");
  const size_t m = static_cast<size_t>(n.attr_int("num_scan_inputs", 1));
  const size_t states = n.inputs.size() - m;
  const size_t k_out = g.outputs.size() - states;
  auto per = [&](const char* name, size_t count) {
    std::vector<int64_t> v = n.attr_ints(name);
    if (v.empty()) v.assign(count, 0);
    MRT_CHECK_ARG(v.size() == count, "attribute ", name, " has ", v.size(), " values, expected ", count);
    return v;
  };
  const std::vector<int64_t> in_axes = per("scan_input_axes", m), in_dirs = per("scan_input_directions", m);
  const std::vector<int64_t> out_axes = per("scan_output_axes", k_out), out_dirs = per("scan_output_directions", k_out);
  int64_t T = -1;
  std::vector<int64_t> axes(m);
  for (size_t j = 0; j < m; ++j) {
    const Tensor& x = ctx.input(states + j);
    axes[j] = normalize_axis(in_axes[j], static_cast<int64_t>(x.rank()), "scan_input_axes");
    const int64_t len = x.dim(static_cast<size_t>(axes[j]));
    MRT_CHECK_ARG(T < 0 || T == len, "scan inputs have different lengths along their scan axes (", T, " and ", len, ")");
    T = len;
  }
  std::vector<Tensor> st;
  for (size_t i = 0; i < states; ++i) st.push_back(ctx.input(i));
  std::vector<std::vector<Tensor>> outs_k(k_out);
  for (int64_t t = 0; t < T; ++t) {
    std::vector<Tensor> formal = st;
    for (size_t j = 0; j < m; ++j)
      formal.push_back(take_slice(ctx.input(states + j), axes[j], in_dirs[j] ? T - 1 - t : t));
    std::vector<Tensor> outs = run_body(ctx, body, g, *c, std::move(formal));
    for (size_t i = 0; i < states; ++i) st[i] = std::move(outs[i]);
    for (size_t k = 0; k < k_out; ++k) outs_k[k].push_back(std::move(outs[states + k]));
  }
  for (size_t i = 0; i < states; ++i) ctx.set_output(i, st[i]);
  for (size_t k = 0; k < k_out; ++k) {
    if (outs_k[k].empty()) {
      const DType dt = g.outputs[states + k].elem_type;
      ctx.set_output(states + k, Tensor(dt == DType::kUndefined ? DType::kFloat : dt, Shape{0}));
      continue;
    }
    const int64_t rank = static_cast<int64_t>(outs_k[k][0].rank()) + 1;
    const int64_t ax = normalize_axis(out_axes[k], rank, "scan_output_axes");
    ctx.set_output(states + k, stack(outs_k[k], ax, out_dirs[k] != 0, "Scan"));
  }
}

// Scan-8: inputs (sequence_lens, states..., scan inputs...) all with a leading batch axis;
// each batch entry scans along axis 1 (per `directions`) for its sequence length, and the
// outputs stack the per-entry results along the batch axis.
void scan8_kernel(OpContext& ctx) {
  const Node& n = ctx.node();
  auto c = compiled(ctx);
  Session& body = body_of(*c, n, "body");
  const Graph& g = graph_attr(n, "body");
  const size_t m = static_cast<size_t>(n.attr_int("num_scan_inputs", 1));
  const size_t states = n.inputs.size() - 1 - m;
  const size_t k_out = g.outputs.size() - states;
  std::vector<int64_t> dirs = n.attr_ints("directions");
  if (dirs.empty()) dirs.assign(m, 0);
  MRT_CHECK_ARG(dirs.size() == m, "attribute directions has ", dirs.size(), " values, expected ", m);
  const Tensor& first = ctx.input(1 + states);
  MRT_CHECK_ARG(first.rank() >= 2, "Scan-8 inputs need a batch and a sequence axis, got ", first.describe());
  const int64_t batch = first.dim(0), max_len = first.dim(1);
  std::vector<int64_t> lens(static_cast<size_t>(batch), max_len);
  if (const Tensor* sl = ctx.optional_input(0)) {
    MRT_CHECK_ARG(sl->numel() == batch, "sequence_lens must hold ", batch, " values, got ", sl->describe());
    for (int64_t b = 0; b < batch; ++b) lens[static_cast<size_t>(b)] = sl->int_at(b);
  }
  std::vector<std::vector<Tensor>> state_out(states), scan_out(k_out);
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<Tensor> st;
    for (size_t i = 0; i < states; ++i) st.push_back(take_slice(ctx.input(1 + i), 0, b));
    std::vector<Tensor> xs;
    for (size_t j = 0; j < m; ++j) xs.push_back(take_slice(ctx.input(1 + states + j), 0, b));
    const int64_t T = lens[static_cast<size_t>(b)];
    MRT_CHECK_ARG(T >= 0 && T <= max_len, "sequence length ", T, " is outside [0, ", max_len, "]");
    std::vector<std::vector<Tensor>> outs_k(k_out);
    for (int64_t t = 0; t < T; ++t) {
      std::vector<Tensor> formal = st;
      for (size_t j = 0; j < m; ++j) formal.push_back(take_slice(xs[j], 0, dirs[j] ? T - 1 - t : t));
      std::vector<Tensor> outs = run_body(ctx, body, g, *c, std::move(formal));
      for (size_t i = 0; i < states; ++i) st[i] = std::move(outs[i]);
      for (size_t k = 0; k < k_out; ++k) outs_k[k].push_back(std::move(outs[states + k]));
    }
    for (size_t i = 0; i < states; ++i) state_out[i].push_back(st[i]);
    for (size_t k = 0; k < k_out; ++k) {
      MRT_CHECK_IMPL(!outs_k[k].empty(), "Scan-8 with an empty sequence is not supported");
      scan_out[k].push_back(stack(outs_k[k], 0, false, "Scan"));
    }
  }
  for (size_t i = 0; i < states; ++i) ctx.set_output(i, stack(state_out[i], 0, false, "Scan"));
  for (size_t k = 0; k < k_out; ++k) ctx.set_output(states + k, stack(scan_out[k], 0, false, "Scan"));
}

void sequence_map_check(const Node& n, int64_t) {
  check_graphs(n, {"body"});
  const Graph& b = *n.attr("body")->g;
  MRT_ENFORCE(b.inputs.size() == n.inputs.size() && b.outputs.size() == n.outputs.size(), MRT_INVALID_MODEL,
              n.label(), ": the body has ", b.inputs.size(), " inputs and ", b.outputs.size(), " outputs; the node ",
              n.inputs.size(), " and ", n.outputs.size());
}

// SequenceMap: the body runs once per item of the input sequence; further inputs are sequences of the
// same length (their i-th item is passed) or tensors (passed to every run). Output k collects the body's
// k-th output of every run.
void sequence_map_kernel(OpContext& ctx) {
  const Node& n = ctx.node();
  auto c = compiled(ctx);
  Session& body = body_of(*c, n, "body");
  const Graph& g = graph_attr(n, "body");
  const size_t count = ctx.input(0).seq().items.size();
  for (size_t j = 1; j < n.inputs.size(); ++j) {
    const Tensor& in = ctx.input(j);
    MRT_CHECK_ARG(!in.is_sequence() || in.seq().items.size() == count, "SequenceMap: input ", j, " holds ",
                  in.is_sequence() ? in.seq().items.size() : 0, " tensors but input 0 holds ", count);
  }
  std::vector<std::vector<Tensor>> collected(n.outputs.size());
  for (size_t i = 0; i < count; ++i) {
    std::vector<Tensor> formal;
    for (size_t j = 0; j < n.inputs.size(); ++j) {
      const Tensor& in = ctx.input(j);
      formal.push_back(in.is_sequence() ? in.seq().items[i] : in);
    }
    std::vector<Tensor> outs = run_body(ctx, body, g, *c, std::move(formal));
    for (size_t k = 0; k < outs.size() && k < collected.size(); ++k) collected[k].push_back(std::move(outs[k]));
  }
  for (size_t k = 0; k < collected.size(); ++k) {
    const DType declared = g.outputs[k].elem_type;
    ctx.set_output(k, Tensor::sequence(collected[k].empty() ? declared : DType::kUndefined, std::move(collected[k])));
  }
}

}  // namespace

void register_control_flow_kernels(KernelRegistry& r) {
  r.add("SequenceMap", 17, sequence_map_kernel, sequence_map_check);
  r.add("Scan", 8, scan8_kernel, scan_check, 8);
  r.add("If", 1, if_kernel, if_check);
  r.add("Loop", 1, loop_kernel, loop_check);
  r.add("Scan", 9, scan_kernel, scan_check);
}

}  // namespace mrt
