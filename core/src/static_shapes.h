// Concrete shapes of a graph's values where they follow from static input shapes and
// constants alone (no symbolic dims), for the graph optimizer: Shape/Size folding and
// fusions that must know two values have the same shape. Covers the ops of CNN and
// exported-transformer shape chains; any other op's outputs stay unknown.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "graph.h"

namespace mrt {

// `constant(name)` returns the value of a constant (nullptr otherwise). Seeds: graph inputs
// and value_info/outputs with fully static declared shapes, and the constants; with `feeds`,
// the graph inputs take these shapes instead (a run's, where the model declares symbolic dims).
// The shapes are those the CPU EP's kernels produce for these inputs; a node whose attributes
// or inputs are inconsistent leaves its outputs unknown (the run reports it).
std::map<std::string, Shape> static_shapes(const Graph& g, const std::vector<size_t>& order,
                                           const std::function<const Tensor*(const std::string&)>& constant,
                                           const std::map<std::string, Shape>* feeds = nullptr);

}  // namespace mrt
