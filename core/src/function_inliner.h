#pragma once
#include "graph.h"

namespace mrt {

// Replace every call of a model-local function that has no kernel by the function's
// body (inputs/outputs/attribute references bound, internal names made unique).
void inline_model_functions(Model& model);

}  // namespace mrt
