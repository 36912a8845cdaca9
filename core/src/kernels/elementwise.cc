// Kernel group: elementwise. This file holds the shared broadcast machinery and the
// group's registration; the ops live in elementwise_binary.cc (binary math, compare,
// logic, bitwise, variadic, Where), elementwise_unary.cc (math functions, activations,
// Clip) and elementwise_cast.cc (Cast, CastLike).
#include "elementwise_common.h"

namespace mrt {
namespace ew {

void BroadcastPlan::for_rows(int64_t r0, int64_t r1, RowFn fn, const void* state) const {
  const size_t nd = dims.size();
  std::vector<int64_t> idx(nd, 0);
  std::array<int64_t, 3> off{{0, 0, 0}};
  int64_t rem = r0;
  for (size_t d = nd; d-- > 0;) {
    idx[d] = rem % dims[d];
    rem /= dims[d];
    for (int k = 0; k < n_inputs; ++k) off[k] += idx[d] * strides[d][k];
  }
  for (int64_t r = r0; r < r1; ++r) {
    fn(state, off[0], off[1], off[2], r * inner, inner);
    for (size_t d = nd; d-- > 0;) {
      if (++idx[d] < dims[d]) {
        for (int k = 0; k < n_inputs; ++k) off[k] += strides[d][k];
        break;
      }
      for (int k = 0; k < n_inputs; ++k) off[k] -= (dims[d] - 1) * strides[d][k];
      idx[d] = 0;
    }
  }
}

void BroadcastPlan::run(OpContext& ctx, RowFn fn, const void* state) const {
  if (numel == 0) return;
  if (numel < 2 * kGrain || rows == 1) {
    if (rows == 1 && numel >= 2 * kGrain) {
      // one long row: split it
      ctx.threads().parallel_for(inner, kGrain, [&](int64_t b, int64_t e) {
        fn(state, inner_stride[0] * b, inner_stride[1] * b, inner_stride[2] * b, b, e - b);
      });
      return;
    }
    for_rows(0, rows, fn, state);
    return;
  }
  int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(inner, 1));
  ctx.threads().parallel_for(rows, grain, [&](int64_t b, int64_t e) { for_rows(b, e, fn, state); });
}

BroadcastPlan::BroadcastPlan(const Shape& out, const std::vector<const Shape*>& ins) : out_shape(out) {
  MRT_ENFORCE(ins.size() <= 3, MRT_INTERNAL, "broadcast plan supports at most 3 inputs");
  n_inputs = static_cast<int>(ins.size());
  numel = shape_size(out);
  const size_t rank = out.size();

  // Per-input contiguous strides.
  std::vector<std::vector<int64_t>> in_strides;
  for (const Shape* s : ins) {
    MRT_CHECK_ARG(s->size() <= rank, "input of shape ", shape_str(*s), " cannot broadcast to ",
                  shape_str(out));
    in_strides.push_back(shape_strides(*s));
  }

  std::vector<int64_t> sizes;
  std::vector<std::array<int64_t, 3>> st;
  for (size_t d = 0; d < rank; ++d) {
    if (out[d] == 1) continue;
    std::array<int64_t, 3> s{{0, 0, 0}};
    for (int k = 0; k < n_inputs; ++k) {
      const Shape& in = *ins[k];
      const int64_t j = static_cast<int64_t>(d) - static_cast<int64_t>(rank - in.size());
      if (j < 0 || in[j] == 1) continue;
      MRT_CHECK_ARG(in[j] == out[d], "input of shape ", shape_str(in), " cannot broadcast to ", shape_str(out));
      s[k] = in_strides[k][j];
    }
    if (!sizes.empty()) {
      const std::array<int64_t, 3>& p = st.back();
      bool merge = true;
      for (int k = 0; k < n_inputs; ++k) merge = merge && p[k] == s[k] * out[d];
      if (merge) {
        sizes.back() *= out[d];
        st.back() = s;
        continue;
      }
    }
    sizes.push_back(out[d]);
    st.push_back(s);
  }
  if (sizes.empty()) {
    inner = 1;
    rows = numel;
    return;
  }
  inner = sizes.back();
  inner_stride = st.back();
  sizes.pop_back();
  st.pop_back();
  dims = std::move(sizes);
  strides = std::move(st);
  rows = inner == 0 ? 0 : numel / inner;
}

Shape broadcast_all(const OpContext& ctx) {
  MRT_CHECK_ARG(ctx.input_count() >= 1 && ctx.has_input(0), "at least one input is required");
  Shape s = ctx.input(0).shape();
  for (size_t i = 1; i < ctx.input_count(); ++i) s = broadcast_shapes(s, ctx.input(i).shape());
  return s;
}

}  // namespace ew

void register_elementwise_kernels(KernelRegistry& r) {
  ew::register_binary_kernels(r);
  ew::register_unary_kernels(r);
  ew::register_cast_kernels(r);
}

}  // namespace mrt
