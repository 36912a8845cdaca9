#pragma once
#include "graph.h"

namespace mrt {

struct GraphOptimizerStats {
  int batchnorms_folded = 0;
  int activations_fused = 0;
};

// Inference-time rewrites that keep results within float rounding of the original graph:
//  - Conv → BatchNormalization with constant parameters: the BN is folded into new Conv
//    weights and bias;
//  - Conv → Relu (Conv output used only there): one com.microsoft FusedConv node, so the
//    activation runs while the output is still in cache.
// Only constant initializers (not overridable by a graph input) are folded.
GraphOptimizerStats optimize_graph(Model& model);

}  // namespace mrt
