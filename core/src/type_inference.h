#pragma once
#include <map>
#include <string>
#include <vector>

#include "graph.h"

namespace mrt {

// Static type and shape propagation over a graph in execution order. Seeds: graph inputs,
// initializers and declared value_info/outputs. Dimensions stay symbolic (dim_param) where
// the rules allow; unknown dims are -1 with no name.
// - Graph outputs the model declares without type/shape get the inferred ones.
// - A declared element type that contradicts a certain inference is an INVALID_MODEL error
//   naming the node.
// - `known`, when given, receives every value's inferred type/shape (for plugin EPs).
void infer_types(const Graph& graph, const std::vector<const Node*>& order, std::vector<ValueInfo>& outputs,
                 std::map<std::string, ValueInfo>* known = nullptr);

}  // namespace mrt
