#pragma once
#include <map>
#include <string>

#include "constant_folding.h"
#include "graph.h"
#include "threadpool.h"

namespace mrt {

struct GraphOptimizerStats {
  ConstantFoldingStats folding;
  int batchnorms_folded = 0;
  int activations_fused = 0;
  int residual_adds_fused = 0;
  int affines_folded = 0;  // Mul/Add by per-channel constants folded into Conv or BatchNormalization
  int qdq_groups_fused = 0;  // DequantizeLinear → Conv/MatMul → QuantizeLinear run as QLinearConv/QLinearMatMul
  int dynamic_matmuls_fused = 0;  // DynamicQuantizeLinear → MatMulInteger → Cast → Mul (→ Add) as one node
  int gelus_fused = 0;  // x * 0.5 * (1 + erf(x / sqrt 2)) written out, as com.microsoft Gelu
  int layernorms_fused = 0;  // LayerNormalization written out (ReduceMean, Sub, Pow, ... , Mul, Add)
  int scaled_matmuls_fused = 0;  // MatMul(A, Transpose(B)) / c as com.microsoft FusedMatMul (attention scores)
  int preactivations_fused = 0;  // BatchNormalization → Relu → Conv as an ai.mosaicrt FusedConv
  int matmul_adds_fused = 0;  // MatMul → Add of a constant vector (→ Gelu) (→ residual Add) as ai.mosaicrt MatMulAdd
  int unread_outputs_dropped = 0;  // a Dropout's mask or a MaxPool's Indices that nothing reads, no longer made
};

// onnxruntime's GraphOptimizationLevel values, read from the session config entry
// "session.graph_optimization_level" (absent or unparsable: all).
enum OptimizationLevel : int { kOptDisabled = 0, kOptBasic = 1, kOptExtended = 2, kOptAll = 99 };
int optimization_level(const std::map<std::string, std::string>& config);

// Inference-time rewrites that keep results within float rounding of the original graph.
// Basic level:
//  - constant folding (constant_folding.h), so weights computed from constants are
//    initializers before the rewrites below look at them;
//  - Conv → BatchNormalization with constant parameters: the BN is folded into new Conv
//    weights and bias;
//  - Conv / BatchNormalization → Mul/Add by a per-channel constant: folded into the Conv's
//    weights and bias or the BN's scale and bias;
// Extended level and above:
//  - Conv (→ Add/Sum with a same-shaped value) (→ Relu), each step only where the value
//    is used once: one com.microsoft FusedConv node with the residual input Z, so the
//    sum and the activation run while the output is still in cache;
//  - DequantizeLinear → Conv / MatMul → QuantizeLinear (onnxruntime's QDQ format) with constant
//    scales: one QLinearConv / QLinearMatMul that computes in integers;
//  - BatchNormalization → Relu → Conv (pre-activation), each value used once: one ai.mosaicrt FusedConv
//    that applies the BN and the Relu to its input as it reads it;
//  - MatMul by a constant float matrix → Add of a constant vector (→ com.microsoft Gelu) (→ Add of a
//    same-shaped value), each value used once: one ai.mosaicrt MatMulAdd that applies them on the GEMM's
//    finished tiles.
// Only constant initializers (not overridable by a graph input) are folded.
GraphOptimizerStats optimize_graph(Model& model, int level, ThreadPool& pool);

}  // namespace mrt
