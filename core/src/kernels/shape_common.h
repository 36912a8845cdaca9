// Helpers shared by the shape / data-movement kernels (shape*.cc). Data movement is
// typed by element size only (1/2/4/8 bytes), so every storable dtype takes the same path.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "../kernel.h"

namespace mrt {
namespace shape_kernels {

// Registration of the kernel files of this group (each defined in its shape_*.cc).
void register_view_ops(KernelRegistry& r);     // shape.cc: Reshape, Squeeze, Identity, Shape, Constant, ...
void register_copy_ops(KernelRegistry& r);     // shape_copy.cc: Transpose, Concat, Split, Slice, Expand, Tile, Pad, ...
void register_index_ops(KernelRegistry& r);    // shape_index.cc: Gather*, Scatter*, OneHot, NonZero, Compress, ...
void register_topk_ops(KernelRegistry& r);     // shape_topk.cc: TopK
void register_extra_ops(KernelRegistry& r);    // shape_extra.cc: BitCast, CenterCropPad, TensorScatter, Unique

// Map axis in [-rank, rank) to [0, rank); INVALID_ARGUMENT otherwise (also for rank 0,
// unlike normalize_axis, because these kernels index dims with the result).
inline int64_t checked_axis(int64_t axis, int64_t rank, const char* what = "axis") {
  if (axis < -rank || axis >= rank) fail(MRT_INVALID_ARGUMENT, what, " ", axis, " is out of range for rank ", rank);
  return axis < 0 ? axis + rank : axis;
}

// Element size of a tensor; NOT_IMPLEMENTED for types without fixed-size storage.
size_t element_size(const Tensor& t, const char* op);

// Run f(type_tag) with an unsigned integer type of the given byte size.
template <class F>
void dispatch_by_size(size_t esize, const char* op, F&& f) {
  switch (esize) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    case 8: f(uint64_t{}); break;
    default: fail(MRT_NOT_IMPLEMENTED, op, ": element size ", esize, " is not supported");
  }
}

// All elements of an integer index tensor (any rank) as int64.
std::vector<int64_t> read_int64s(const Tensor& t, const char* what);

// Convert a double to the element type `dt` and write its bytes to dst.
void store_scalar(DType dt, double v, void* dst);

// Fill `count` elements of size esize at dst with the element at value.
void fill_elements(void* dst, const void* value, size_t esize, int64_t count);

// dst (contiguous, shape out_shape) [i...] = src[offset + sum_k i_k * in_strides[k]]
// (strides and offset in elements, may be negative or zero). Merges dims, copies
// contiguous rows with memcpy, uses blocked 2-D transposes where the innermost output
// dim is strided, and splits work over the thread pool when large.
void strided_copy(const OpContext& ctx, size_t esize, const Shape& out_shape, const std::vector<int64_t>& in_strides,
                  const void* src, int64_t src_offset, void* dst);

// out = transpose(in, perm) where in has shape in_shape (contiguous).
void transpose_copy(const OpContext& ctx, size_t esize, const Shape& in_shape, const std::vector<int64_t>& perm,
                    const void* src, void* dst);

// y[o_0, ..., o_r-1] = x[maps[0][o_0], ..., maps[r-1][o_r-1]], or the element at `fill`
// when any map entry is -1 (Pad, CenterCropPad). y is allocated with the output shape;
// maps[k] has y.dim(k) entries, each -1 or in [0, x.dim(k)).
void gather_by_axis_maps(const OpContext& ctx, const Tensor& x, const std::vector<std::vector<int64_t>>& maps,
                         const void* fill, Tensor& y);

// Run fn(begin, end) over [0, n) on the pool when `work` (elements touched) is large.
void maybe_parallel(const OpContext& ctx, int64_t n, int64_t work, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace shape_kernels
}  // namespace mrt
