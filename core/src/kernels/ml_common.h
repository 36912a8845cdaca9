// Shared by the ai.onnx.ml kernels (ml_classic.cc, ml_tree_ensemble.cc): the post_transform attribute
// of linear models and tree ensembles, applied to one row of scores.
#pragma once
#include <cstdint>

#include "../graph.h"

namespace mrt {
namespace ml {

enum class Post { kNone, kLogistic, kSoftmax, kSoftmaxZero, kProbit };

// NONE, LOGISTIC, SOFTMAX, SOFTMAX_ZERO or PROBIT; INVALID_MODEL naming the node otherwise.
Post post_transform(const Node& n);
void apply_post(Post post, double* row, int64_t n);

}  // namespace ml
}  // namespace mrt
