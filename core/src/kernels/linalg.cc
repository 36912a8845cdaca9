// Kernel group: linalg — MatMul and Gemm (Einsum lives in linalg_einsum.cc).
// float32 runs on the blocked SGEMM (constant B operands are packed once per session);
// float16/bfloat16 compute in float32; double and the integer types use a plain loop
// (integers wrap like two's complement machine arithmetic).
#include <algorithm>
#include <memory>
#include <type_traits>
#include <vector>

#include "../resource_limits.h"
#include "../gemm/sgemm.h"
#include "../kernel.h"
#include "elementwise_common.h"
#include "elementwise_math.h"
#include "linalg_util.h"

namespace mrt {

namespace {

// ---------------------------------------------------------------------------------------
// Generic (non-float32) matrix product: Y[M,N] (+)= op(A) * op(B), row-major, ld = row length.

template <class T>
void matmul_loop(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const T* A, const T* B, T* Y) {
  using Acc = linalg_acc_t<T>;
  std::vector<Acc> row(static_cast<size_t>(N));
  const int64_t lda = ta ? M : K, ldb = tb ? K : N;
  for (int64_t i = 0; i < M; ++i) {
    std::fill(row.begin(), row.end(), Acc(0));
    for (int64_t k = 0; k < K; ++k) {
      const Acc a = linalg_to_acc<T>(ta ? A[k * lda + i] : A[i * lda + k]);
      if (!tb) {
        const T* bk = B + k * ldb;
        for (int64_t j = 0; j < N; ++j) row[j] += a * linalg_to_acc<T>(bk[j]);
      } else {
        for (int64_t j = 0; j < N; ++j) row[j] += a * linalg_to_acc<T>(B[j * ldb + k]);
      }
    }
    for (int64_t j = 0; j < N; ++j) Y[i * N + j] = linalg_from_acc<T>(row[j]);
  }
}

// ---------------------------------------------------------------------------------------
// MatMul: numpy matmul semantics (1-D promotion, broadcast batch dimensions).

struct MatMulPlan {
  int64_t M = 1, N = 1, K = 1;
  Shape out_shape;
  int64_t batch = 1;
  std::vector<int64_t> a_index, b_index;  // per output matrix: which A / B matrix
  int64_t a_matrices = 1, b_matrices = 1;
};

MatMulPlan plan_matmul(const Shape& a_in, const Shape& b_in) {
  MRT_CHECK_ARG(!a_in.empty() && !b_in.empty(), "MatMul: inputs must have rank >= 1, got ", shape_str(a_in), " and ",
                shape_str(b_in));
  Shape a = a_in, b = b_in;
  const bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  if (a_vec) a.insert(a.begin(), 1);
  if (b_vec) b.push_back(1);
  MatMulPlan p;
  p.M = a[a.size() - 2];
  p.K = a[a.size() - 1];
  p.N = b[b.size() - 1];
  MRT_CHECK_ARG(b[b.size() - 2] == p.K, "MatMul: inner dimensions differ: ", shape_str(a_in), " x ", shape_str(b_in));
  Shape a_batch(a.begin(), a.end() - 2), b_batch(b.begin(), b.end() - 2);
  Shape batch = broadcast_shapes(a_batch, b_batch);
  p.out_shape = batch;
  if (!a_vec) p.out_shape.push_back(p.M);
  if (!b_vec) p.out_shape.push_back(p.N);
  p.batch = shape_size(batch);
  p.a_matrices = shape_size(a_batch);
  p.b_matrices = shape_size(b_batch);
  p.a_index = broadcast_index_map(a_batch, batch);
  p.b_index = broadcast_index_map(b_batch, batch);
  return p;
}

// `tile` (optional) runs on finished pieces of Y, rows numbered across the batch (MatMulAdd's sums).
void matmul_float(OpContext& ctx, const MatMulPlan& p, const float* A, const float* B, float* Y,
                  const TileEpilogue* tile = nullptr) {
  const int64_t M = p.M, N = p.N, K = p.K;
  const int64_t a_stride = M * K, b_stride = K * N, y_stride = M * N;
  // One B matrix shared by every output matrix whose A matrices are laid out in order:
  // fold the batch into M (a single large GEMM), with B packed once when constant.
  if (p.b_matrices == 1 && p.a_matrices == p.batch) {
    const int64_t rows = p.batch * M;
    if (ctx.input_is_constant(1) && N > 1) {
      auto packed = ctx.node_cache<PackedB>([&] { return std::make_shared<PackedB>(sgemm_pack_b(false, K, N, B, N)); });
      sgemm_packed_b(false, rows, 1.f, A, K, *packed, 0.f, Y, N, &ctx.threads(), tile);
    } else {
      sgemm(false, false, rows, N, K, 1.f, A, K, B, N, 0.f, Y, N, &ctx.threads());
      if (tile) tile->apply(tile->ctx, 0, rows, 0, N, Y, N);
    }
    return;
  }
  linalg_for_each_matrix(ctx, p.batch, 2.0 * M * N * K, true, [&](int64_t b0, int64_t b1, ThreadPool* pool) {
    for (int64_t b = b0; b < b1; ++b) {
      sgemm(false, false, M, N, K, 1.f, A + p.a_index[b] * a_stride, K, B + p.b_index[b] * b_stride, N, 0.f,
            Y + b * y_stride, N, pool);
      if (tile) tile->apply(tile->ctx, b * M, M, 0, N, Y + b * y_stride, N);
    }
  });
}

void matmul_kernel(OpContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  MRT_CHECK_ARG(a.dtype() == b.dtype(), "MatMul: input types differ (", dtype_name(a.dtype()), " vs ",
                dtype_name(b.dtype()), ")");
  const MatMulPlan p = plan_matmul(a.shape(), b.shape());
  Tensor& y = ctx.output(0, a.dtype(), p.out_shape);
  if (y.numel() == 0) return;
  const int64_t M = p.M, N = p.N, K = p.K;
  switch (a.dtype()) {
    case DType::kFloat:
      matmul_float(ctx, p, a.data<float>(), b.data<float>(), y.data<float>());
      return;
    case DType::kFloat16:
    case DType::kBFloat16: {
      std::vector<float> af = linalg_to_float(a), bf = linalg_to_float(b), yf(static_cast<size_t>(y.numel()));
      matmul_float(ctx, p, af.data(), bf.data(), yf.data());
      linalg_from_float(yf, y);
      return;
    }
    default:
      break;
  }
  MRT_DISPATCH_NUMERIC(a.dtype(), "MatMul", {
    const T* A = a.data<T>();
    const T* B = b.data<T>();
    T* Y = y.data<T>();
    linalg_for_each_matrix(ctx, p.batch, 2.0 * M * N * K, false, [&](int64_t b0, int64_t b1, ThreadPool*) {
      for (int64_t i = b0; i < b1; ++i)
        matmul_loop<T>(false, false, M, N, K, A + p.a_index[i] * M * K, B + p.b_index[i] * K * N, Y + i * M * N);
    });
  });
}

// ai.mosaicrt MatMulAdd (the graph optimizer's MatMul → Add of a constant vector (→ Gelu) (→ Add of a residual)):
// Y = act(MatMul(A, B) + C) + Z, B a float matrix, C its N column values broadcast along the last axis,
// act com.microsoft Gelu (attribute activation = "Gelu") or none, Z optional. Applied on each finished tile of the
// GEMM, in that order, when Z has the output's shape; a Z of another shape (the optimizer fuses a residual Add
// whose shapes it cannot compare, such as a symbolic batch) is added with broadcasting after the product.
struct BiasResidual {
  const float* bias;  // N values
  const float* z;     // rows x N, or null
  int64_t n;
  bool gelu;          // com.microsoft Gelu after the bias
};

void add_bias_residual(const void* ctx, int64_t i, int64_t m, int64_t j, int64_t n, float* c, int64_t ldc) {
  const BiasResidual& t = *static_cast<const BiasResidual*>(ctx);
  for (int64_t r = 0; r < m; ++r) {
    float* __restrict row = c + r * ldc;
    const float* __restrict b = t.bias + j;
    for (int64_t k = 0; k < n; ++k) row[k] += b[k];
    if (t.gelu) gelu_erf_float(row, row, n);
    if (t.z) {
      const float* __restrict z = t.z + (i + r) * t.n + j;
      for (int64_t k = 0; k < n; ++k) row[k] += z[k];
    }
  }
}

void matmul_add_kernel(OpContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const Tensor& c = ctx.input(2);
  const Tensor* z = ctx.optional_input(3);
  MRT_CHECK_IMPL(a.dtype() == DType::kFloat && b.dtype() == DType::kFloat && c.dtype() == DType::kFloat &&
                     (!z || z->dtype() == DType::kFloat),
                 "MatMulAdd (ai.mosaicrt): float inputs only, got ", dtype_name(a.dtype()), " x ",
                 dtype_name(b.dtype()), " + ", dtype_name(c.dtype()));
  MRT_CHECK_ARG(b.rank() == 2, "MatMulAdd (ai.mosaicrt): B must be a matrix, got ", shape_str(b.shape()));
  const MatMulPlan p = plan_matmul(a.shape(), b.shape());
  MRT_CHECK_ARG(c.numel() == p.N, "MatMulAdd (ai.mosaicrt): C must hold the ", p.N, " values of a row, got ",
                shape_str(c.shape()));
  const std::string activation = ctx.node().attr_string("activation", "");
  MRT_CHECK_IMPL(activation.empty() || activation == "Gelu", "MatMulAdd (ai.mosaicrt): activation '", activation,
                 "' is not supported (Gelu or none)");
  const bool z_after = z && z->shape() != p.out_shape;  // added with broadcasting, after the product
  Tensor product = z_after ? Tensor(DType::kFloat, p.out_shape, ctx.allocator()) : Tensor();
  Tensor& y = z_after ? product : ctx.output(0, DType::kFloat, p.out_shape);
  const BiasResidual sums{c.data<float>(), z && !z_after ? z->data<float>() : nullptr, p.N, activation == "Gelu"};
  TileEpilogue tile;
  tile.apply = add_bias_residual;
  tile.ctx = &sums;
  if (y.numel() > 0) matmul_float(ctx, p, a.data<float>(), b.data<float>(), y.data<float>(), &tile);
  if (z_after) {
    Tensor& out = ctx.output(0, DType::kFloat, broadcast_shapes(p.out_shape, z->shape()));
    ew::binary_apply<float, float, float>(ctx, product, *z, out, [](float u, float v) { return u + v; });
  }
}

// ---------------------------------------------------------------------------------------
// Gemm: Y = alpha * op(A) * op(B) + beta * C, C unidirectionally broadcast to [M, N].

// Broadcast C ([], [N], [1], [M,1], [1,N], [M,N], ...) into Y[M,N]; element conversion by `conv`.
template <class T, class U, class Conv>
void broadcast_bias(const Tensor& c, int64_t M, int64_t N, U* Y, Conv conv) {
  const Shape& cs = c.shape();
  MRT_CHECK_ARG(cs.size() <= 2, "Gemm: C must have rank <= 2, got ", shape_str(cs));
  const int64_t cm = cs.size() == 2 ? cs[0] : 1;
  const int64_t cn = cs.empty() ? 1 : cs.back();
  MRT_CHECK_ARG((cm == 1 || cm == M) && (cn == 1 || cn == N), "Gemm: C of shape ", shape_str(cs),
                " cannot be broadcast to [", M, ",", N, "]");
  const T* C = c.data<T>();
  for (int64_t i = 0; i < M; ++i) {
    const T* ci = C + (cm == 1 ? 0 : i * cn);
    U* yi = Y + i * N;
    if (cn == 1) {
      std::fill(yi, yi + N, conv(ci[0]));
    } else {
      for (int64_t j = 0; j < N; ++j) yi[j] = conv(ci[j]);
    }
  }
}

void gemm_float(OpContext& ctx, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, float beta,
                const float* A, const float* B, const Tensor* c, const float* Cf, float* Y) {
  float beta_eff = 0.f;
  if (c != nullptr && beta != 0.f) {
    if (Cf != nullptr) {  // C already converted to float [M,N] by the caller
      std::copy(Cf, Cf + M * N, Y);
    } else {
      broadcast_bias<float>(*c, M, N, Y, [](float v) { return v; });
    }
    beta_eff = beta;
  }
  const int64_t lda = ta ? M : K, ldb = tb ? K : N;
  // a constant B packed once, at batch 1 too (a classifier's single row: the packed path reads the weights in
  // one sequential stream with a vectorized tile, where the unpacked matrix-vector loop ran baseline code)
  if (ctx.input_is_constant(1) && N > 1) {
    auto packed = ctx.node_cache<PackedB>([&] { return std::make_shared<PackedB>(sgemm_pack_b(tb, K, N, B, ldb)); });
    sgemm_packed_b(ta, M, alpha, A, lda, *packed, beta_eff, Y, N, &ctx.threads());
  } else {
    sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta_eff, Y, N, &ctx.threads());
  }
}

void gemm_kernel(OpContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const Tensor* c = ctx.optional_input(2);
  const Node& node = ctx.node();
  const bool ta = node.attr_int("transA", 0) != 0, tb = node.attr_int("transB", 0) != 0;
  const float alpha = node.attr_float("alpha", 1.f), beta = node.attr_float("beta", 1.f);
  MRT_CHECK_ARG(a.rank() == 2 && b.rank() == 2, "Gemm: A and B must be 2-D, got ", shape_str(a.shape()), " and ",
                shape_str(b.shape()));
  MRT_CHECK_ARG(a.dtype() == b.dtype() && (!c || c->dtype() == a.dtype()), "Gemm: input types differ");
  const int64_t M = ta ? a.dim(1) : a.dim(0), K = ta ? a.dim(0) : a.dim(1);
  const int64_t Kb = tb ? b.dim(1) : b.dim(0), N = tb ? b.dim(0) : b.dim(1);
  MRT_CHECK_ARG(K == Kb, "Gemm: inner dimensions differ: op(A) is [", M, ",", K, "], op(B) is [", Kb, ",", N, "]");
  Tensor& y = ctx.output(0, a.dtype(), {M, N});
  if (y.numel() == 0) return;
  switch (a.dtype()) {
    case DType::kFloat:
      gemm_float(ctx, ta, tb, M, N, K, alpha, beta, a.data<float>(), b.data<float>(), c, nullptr, y.data<float>());
      return;
    case DType::kFloat16:
    case DType::kBFloat16: {
      std::vector<float> af = linalg_to_float(a), bf = linalg_to_float(b), yf(static_cast<size_t>(M * N));
      std::vector<float> cf;
      if (c) {
        std::vector<float> cflat = linalg_to_float(*c);
        Tensor cview = Tensor::borrow(DType::kFloat, c->shape(), cflat.data());
        cf.resize(static_cast<size_t>(M * N));
        broadcast_bias<float>(cview, M, N, cf.data(), [](float v) { return v; });
      }
      gemm_float(ctx, ta, tb, M, N, K, alpha, beta, af.data(), bf.data(), c, c ? cf.data() : nullptr, yf.data());
      linalg_from_float(yf, y);
      return;
    }
    default:
      break;
  }
  MRT_DISPATCH_NUMERIC(a.dtype(), "Gemm", {
    T* Y = y.data<T>();
    matmul_loop<T>(ta, tb, M, N, K, a.data<T>(), b.data<T>(), Y);
    const bool plain = alpha == 1.f && (c == nullptr || beta == 1.f);
    if (plain && c != nullptr) {
      std::vector<T> cb(checked_scratch({M, N}, sizeof(T), "Gemm bias"));
      broadcast_bias<T>(*c, M, N, cb.data(), [](T v) { return v; });
      for (int64_t i = 0; i < M * N; ++i)
        Y[i] = linalg_from_acc<T>(linalg_to_acc<T>(Y[i]) + linalg_to_acc<T>(cb[i]));
    } else if (!plain) {
      std::vector<double> cb(checked_scratch({M, N}, sizeof(double), "Gemm bias"), 0.0);
      if (c != nullptr && beta != 0.f)
        broadcast_bias<T>(*c, M, N, cb.data(), [](T v) { return static_cast<double>(v); });
      for (int64_t i = 0; i < M * N; ++i)
        Y[i] = static_cast<T>(static_cast<double>(alpha) * static_cast<double>(Y[i]) + static_cast<double>(beta) * cb[i]);
    }
  });
}

void gemm_check(const Node& node, int64_t opset) {
  (void)opset;  // opset < 7 'broadcast' is accepted: broadcasting C is always allowed
  MRT_CHECK_IMPL(node.attr_int("transA", 0) == 0 || node.attr_int("transA", 0) == 1, "Gemm: transA must be 0 or 1");
  MRT_CHECK_IMPL(node.attr_int("transB", 0) == 0 || node.attr_int("transB", 0) == 1, "Gemm: transB must be 0 or 1");
}

}  // namespace

void register_einsum_kernel(KernelRegistry& r);  // linalg_einsum.cc

void register_linalg_kernels(KernelRegistry& r) {
  r.add("MatMul", 1, matmul_kernel);
  r.add_domain("ai.mosaicrt", "MatMulAdd", 1, matmul_add_kernel);
  r.add("Gemm", 1, gemm_kernel, gemm_check);
  register_einsum_kernel(r);
}

}  // namespace mrt
