// RotaryEmbedding (ai.onnx opset 23): rotates the first rotary_embedding_dim features of
// every head by the angle whose cos/sin the caches hold, for 4-D [batch, heads, seq,
// head_size] or 3-D [batch, seq, heads * head_size] input (num_heads given). With
// position_ids the caches are [max_position + 1, dim / 2] tables indexed by position;
// without, they are [batch, seq, dim / 2]. interleaved pairs features (2i, 2i + 1),
// otherwise (i, i + dim / 2). Features past rotary_embedding_dim pass through. The
// com.microsoft form (inputs reordered, position_ids may be one start offset) shares it.
#include <cmath>

#include "norm_util.h"

namespace mrt {
namespace {

void rotary_check(const Node& n, int64_t) {
  const int64_t dim = n.attr_int("rotary_embedding_dim", 0);
  MRT_ENFORCE(dim >= 0 && dim % 2 == 0, MRT_INVALID_MODEL, n.label(),
              ": rotary_embedding_dim must be a nonnegative even number, got ", dim);
  MRT_ENFORCE(n.attr_int("num_heads", 0) >= 0, MRT_INVALID_MODEL, n.label(), ": num_heads must be positive, got ",
              n.attr_int("num_heads", 0));
}

template <class T>
void rotate(OpContext& ctx, const Tensor& X, const Tensor& cosT, const Tensor& sinT, const Tensor* pos, Tensor& Y,
            bool interleaved, int64_t rot_dim, int64_t B, int64_t S, int64_t H, int64_t D, bool four_d) {
  const T* x = X.data<T>();
  T* y = Y.data<T>();
  const T* cs = cosT.data<T>();
  const T* sn = sinT.data<T>();
  const int64_t half = rot_dim / 2;
  const int64_t max_pos = pos ? cosT.dim(0) : 0;
  std::vector<int64_t> pids;
  if (pos && pos->numel() == 1 && B * S != 1) {  // com.microsoft form: one start offset for every sequence
    for (int64_t i = 0; i < B * S; ++i) pids.push_back(pos->int_at(0) + i % S);
  } else if (pos) {
    for (int64_t i = 0; i < pos->numel(); ++i) pids.push_back(pos->int_at(i));
  }
  for (int64_t p : pids)
    MRT_CHECK_ARG(p >= 0 && p < max_pos, "RotaryEmbedding: position id ", p, " is outside the cache of ", max_pos,
                  " positions");
  ctx.threads().parallel_for(B * S, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bs = begin; bs < end; ++bs) {
      const int64_t b = bs / S, s = bs % S;
      const int64_t row = pos ? pids[static_cast<size_t>(bs)] : bs;
      const T* c = cs + row * half;
      const T* si = sn + row * half;
      for (int64_t h = 0; h < H; ++h) {
        const int64_t base = four_d ? ((b * H + h) * S + s) * D : ((b * S + s) * H + h) * D;
        const T* xi = x + base;
        T* yo = y + base;
        for (int64_t i = 0; i < half; ++i) {
          const int64_t i1 = interleaved ? 2 * i : i;
          const int64_t i2 = interleaved ? 2 * i + 1 : i + half;
          const float x1 = norm::load(xi[i1]), x2 = norm::load(xi[i2]);
          const float cv = norm::load(c[i]), sv = norm::load(si[i]);
          yo[i1] = norm::store<T>(cv * x1 - sv * x2);
          yo[i2] = norm::store<T>(sv * x1 + cv * x2);
        }
        for (int64_t d = rot_dim; d < D; ++d) yo[d] = xi[d];
      }
    }
  });
}

void rotary_run(OpContext& ctx, const Tensor& X, const Tensor& cosT, const Tensor& sinT, const Tensor* pos,
                bool ms_layout);

void rotary_kernel(OpContext& ctx) {
  rotary_run(ctx, ctx.input(0), ctx.input(1), ctx.input(2), ctx.optional_input(3), false);
}

// com.microsoft RotaryEmbedding: inputs (input, position_ids, cos_cache, sin_cache);
// position_ids is [batch, seq] or a single start offset; 4-D input is [batch, heads,
// seq, head_size] as in the ai.onnx form.
void ms_rotary_check(const Node& n, int64_t opset) {
  rotary_check(n, opset);
  MRT_ENFORCE(n.attr_int("is_packed_batching", 0) == 0, MRT_NOT_IMPLEMENTED, n.label(),
              ": is_packed_batching=1 is not supported");
  MRT_ENFORCE(!n.has_attr("scale") || n.attr_float("scale", 1.f) == 1.f, MRT_NOT_IMPLEMENTED, n.label(),
              ": a scale other than 1 is not supported");
}

void ms_rotary_kernel(OpContext& ctx) {
  rotary_run(ctx, ctx.input(0), ctx.input(2), ctx.input(3), &ctx.input(1), true);
}

void rotary_run(OpContext& ctx, const Tensor& X, const Tensor& cosT, const Tensor& sinT, const Tensor* pos,
                bool ms_layout) {
  const Node& n = ctx.node();
  const bool interleaved = n.attr_int("interleaved", 0) != 0;
  const int64_t num_heads = n.attr_int("num_heads", 0);
  int64_t B, S, H, D;
  const bool four_d = X.rank() == 4;
  if (four_d) {
    B = X.dim(0); H = X.dim(1); S = X.dim(2); D = X.dim(3);
  } else {
    MRT_CHECK_ARG(X.rank() == 3, "RotaryEmbedding: input must be 3-D or 4-D, got ", X.describe());
    MRT_CHECK_ARG(num_heads > 0 && X.dim(2) % num_heads == 0, "RotaryEmbedding: a 3-D input needs num_heads dividing "
                  "its hidden size ", X.dim(2), ", got num_heads ", num_heads);
    B = X.dim(0); S = X.dim(1); H = num_heads; D = X.dim(2) / num_heads;
  }
  int64_t rot_dim = n.attr_int("rotary_embedding_dim", 0);
  if (rot_dim == 0) rot_dim = D;
  MRT_CHECK_ARG(rot_dim <= D && rot_dim % 2 == 0, "RotaryEmbedding: rotary_embedding_dim ", rot_dim,
                " must be even and at most the head size ", D);
  const int64_t half = rot_dim / 2;
  MRT_CHECK_ARG(cosT.dtype() == X.dtype() && sinT.dtype() == X.dtype(), "RotaryEmbedding: caches ", cosT.describe(),
                " / ", sinT.describe(), " must have the input's element type ", dtype_name(X.dtype()));
  MRT_CHECK_ARG(cosT.shape() == sinT.shape(), "RotaryEmbedding: cos_cache ", cosT.describe(), " and sin_cache ",
                sinT.describe(), " differ in shape");
  if (pos) {
    MRT_CHECK_ARG((pos->rank() == 2 && pos->dim(0) == B && pos->dim(1) == S) || (ms_layout && pos->numel() == 1),
                  "RotaryEmbedding: position_ids must be [", B, ",", S, "]", ms_layout ? " or one offset" : "",
                  ", got ", pos->describe());
    MRT_CHECK_ARG(cosT.rank() == 2 && cosT.dim(1) == half, "RotaryEmbedding: with position_ids the caches must be "
                  "[positions,", half, "], got ", cosT.describe());
  } else {
    MRT_CHECK_ARG(cosT.rank() == 3 && cosT.dim(0) == B && cosT.dim(1) == S && cosT.dim(2) == half,
                  "RotaryEmbedding: without position_ids the caches must be [", B, ",", S, ",", half, "], got ",
                  cosT.describe());
  }
  Tensor& Y = ctx.output(0, X.dtype(), X.shape());
  MRT_NORM_DISPATCH(X.dtype(), "RotaryEmbedding", {
    rotate<T>(ctx, X, cosT, sinT, pos, Y, interleaved, rot_dim, B, S, H, D, four_d);
  });
}

}  // namespace

void register_rotary_embedding_kernels(KernelRegistry& r) {
  r.add("RotaryEmbedding", 23, rotary_kernel, rotary_check);
  r.add_domain("com.microsoft", "RotaryEmbedding", 1, ms_rotary_kernel, ms_rotary_check);
}

}  // namespace mrt
