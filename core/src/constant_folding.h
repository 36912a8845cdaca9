// Constant folding at session creation: nodes whose inputs are all constant run once with
// the CPU EP's own kernels and their outputs become initializers.
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "graph.h"
#include "threadpool.h"

namespace mrt {

// Initializers a feed may replace at run time: those the graph also lists as inputs, from
// IR version 4 on. Up to IR version 3 every initializer had to be listed among the graph
// inputs, so the listing says nothing about intent there and the initializers are constant
// (onnxruntime reads such models the same way).
std::set<std::string> overridable_initializers(const Model& model);

struct ConstantFoldingStats {
  int nodes_folded = 0;   // nodes evaluated once and replaced by initializers
  int shapes_folded = 0;  // Shape/Size nodes answered from static shapes
  int initializers_dropped = 0;  // initializers no node reads any more
};

// A folded output larger than this is kept only when it is no larger than the node's
// constant inputs together (a transpose or cast of a big weight); an expansion (Expand,
// ConstantOfShape, Tile, ...) beyond it stays a node and is computed per run.
constexpr int64_t kMaxFoldedExpansionBytes = int64_t{64} << 20;

// Folds in execution order until nothing changes: every deterministic node of a supported
// op whose inputs are constant (non-overridable initializers or folded values), and Shape /
// Size of values whose shape is fully static. Nodes with subgraph attributes and random ops
// are left alone, and DequantizeLinear / QuantizeLinear unless `quantize_ops` (the optimizer
// keeps them until the quantized patterns are fused, then folds what is left: weights of
// groups that stay float are dequantized once); a node whose kernel fails is left for the run
// to report. Initializers nothing reads any more are dropped (graph inputs and outputs are kept).
ConstantFoldingStats fold_constants(Model& model, ThreadPool& pool, bool quantize_ops = false);

// Removes initializers that no node (nested graphs included), graph input or graph output
// reads; returns how many.
int drop_unread_initializers(Graph& g);

// Execution order of the graph's nodes (Kahn, model order among ready nodes); empty when
// the graph is not a DAG or defines a value twice (the session reports those).
std::vector<size_t> topological_order(const Graph& g);

}  // namespace mrt
