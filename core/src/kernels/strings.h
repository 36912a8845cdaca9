// String kernels other kernel groups call for their string inputs (kernels/strings.cc).
#pragma once
#include "../kernel.h"

namespace mrt {

void string_equal(OpContext& ctx);  // Equal on two string tensors (broadcasting)
void string_cast(OpContext& ctx, const Tensor& x, DType to);  // Cast/CastLike to or from string

}  // namespace mrt
