// MatMulInteger and QLinearMatMul: numpy matmul shapes (1-D operands, broadcast batch
// dimensions) over uint8/int8 operands with zero points, on the integer GEMM.
//
// Zero points: A's is a scalar or one per row (M, or batch x M elements); B's is a scalar
// or one per column (N, or batch x N elements). When B has no batch dimensions, all of
// A's rows form one GEMM, and a constant B (with a constant zero point) is packed once per
// session: the path that dynamically quantized MLPs (DynamicQuantizeLinear ->
// MatMulInteger -> Cast -> Mul) run through.
#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>

#include "quant_common.h"

namespace mrt {
namespace {

using quant::PackedB;

struct MatMulPlan {
  Shape out;
  int64_t M = 0, K = 0, N = 0;
  int64_t batch_a = 1, batch_b = 1;  // number of matrices in A and B
  std::vector<int64_t> a_index, b_index;  // per output batch: which A / B matrix
};

MatMulPlan plan_matmul(const Tensor& A, const Tensor& B, const char* op) {
  MatMulPlan p;
  MRT_CHECK_ARG(A.rank() >= 1 && B.rank() >= 1, op, ": operands must have rank >= 1, got ", A.describe(), " and ",
                B.describe());
  Shape a = A.shape(), b = B.shape();
  const bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  if (a_vec) a.insert(a.begin(), 1);
  if (b_vec) b.push_back(1);
  p.M = a[a.size() - 2];
  p.K = a[a.size() - 1];
  p.N = b[b.size() - 1];
  MRT_CHECK_ARG(b[b.size() - 2] == p.K, op, ": inner dimensions differ: ", A.describe(), " x ", B.describe());
  const Shape ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  const Shape bo = broadcast_shapes(ba, bb);
  p.batch_a = norm::prod(ba, 0, ba.size());
  p.batch_b = norm::prod(bb, 0, bb.size());
  const int64_t batches = norm::prod(bo, 0, bo.size());
  // Map every output batch index to the A / B matrix it reads (broadcast dims repeat).
  auto index_into = [&](const Shape& src, std::vector<int64_t>& idx) {
    idx.resize(static_cast<size_t>(batches));
    const size_t off = bo.size() - src.size();
    const std::vector<int64_t> st = shape_strides(src);
    std::vector<int64_t> coord(bo.size(), 0);
    for (int64_t t = 0; t < batches; ++t) {
      int64_t li = 0;
      for (size_t d = 0; d < src.size(); ++d)
        if (src[d] != 1) li += coord[off + d] * st[d];
      idx[t] = li;
      for (size_t d = bo.size(); d-- > 0;) {
        if (++coord[d] < bo[d]) break;
        coord[d] = 0;
      }
    }
  };
  index_into(ba, p.a_index);
  index_into(bb, p.b_index);
  p.out = bo;
  if (!a_vec) p.out.push_back(p.M);
  if (!b_vec) p.out.push_back(p.N);
  return p;
}

// Zero point as a flat vector with `group` consecutive entries per matrix (1 = scalar).
struct ZeroPoints {
  std::vector<int32_t> v;
  bool per_item = false;  // one value per row (A) / column (B)
  int64_t group = 1;      // values per matrix when per_item
};

ZeroPoints zero_points(const Tensor* z, DType operand, int64_t items, int64_t matrices, const char* op,
                       const char* what) {
  ZeroPoints zp;
  if (!z) return zp;
  MRT_CHECK_ARG(z->dtype() == operand, op, ": ", what, " type ", dtype_name(z->dtype()), " differs from its operand's ",
                dtype_name(operand));
  zp.v = quant::to_int32s(*z);
  if (zp.v.size() == 1) return zp;
  const int64_t n = static_cast<int64_t>(zp.v.size());
  MRT_CHECK_ARG(n == items || n == items * matrices, op, ": ", what, " ", z->describe(), " must hold 1, ", items,
                " or ", items * matrices, " elements");
  zp.per_item = true;
  zp.group = n == items ? 0 : items;  // 0: the same values for every matrix
  return zp;
}

const int32_t* zp_ptr(const ZeroPoints& z, int64_t matrix) {
  if (z.v.empty()) return nullptr;
  return z.v.data() + (z.per_item ? z.group * matrix : 0);
}

// Products of at most this many rows run the int16 kernel over B's raw bytes, where it has that form: they are bound
// by reading B, and the bytes are half of it (batch-1 dynamically quantized MLPs 0.78-0.85 of the int16 panels' time
// at 1 and 2 rows, on an AMD Zen 3); from 4 rows on the int16 panels were 2-4 % faster.
constexpr int64_t kByteFormRows = 2;

// B packed for whichever integer GEMM this CPU runs: 8-bit dot products (b8), else the int16 kernel over int16
// panels (b16) or, for products of few rows, over B's raw bytes (b16_bytes). Each form is packed once, when a product
// first needs it: a constant B's PackedAny lives in the node cache, shared by concurrent runs.
struct PackedAny {
  PackedB b16;
  quant::PackedBBytes b16_bytes;
  quant::PackedB8 b8;
  std::once_flag b16_once, bytes_once, b8_once;
};

enum class BForm { kBytes8, kInt16, kInt16Bytes };

BForm b_form(int64_t M) {
  // A kernel with saturating pairs fixes them up per row of A, here the activations, on every run: the int16
  // forms instead (a convolution's A is its constant weights, fixed up once).
  const quant::Igemm8Kernel* k8 = quant::igemm8_active();
  if (k8 && k8->pair_limit == 0) return BForm::kBytes8;
  return M <= kByteFormRows && quant::igemm16_active().bytes_block ? BForm::kInt16Bytes : BForm::kInt16;
}

// The form of B (matrix `matrix` of a stack) that a product of M rows runs on, packed into `out` unless it already is.
void pack_b_matrix(PackedAny& out, const Tensor& B, int64_t matrix, int64_t K, int64_t N, const ZeroPoints& zb,
                   int64_t M) {
  MRT_CHECK_IMPL(B.dtype() == DType::kUInt8 || B.dtype() == DType::kInt8, "integer MatMul: B element type ",
                 dtype_name(B.dtype()), " is not supported (uint8/int8)");
  const uint8_t* bytes = static_cast<const uint8_t*>(B.raw()) + matrix * K * N;
  const bool b_u8 = B.dtype() == DType::kUInt8;
  switch (b_form(M)) {
    case BForm::kBytes8:
      std::call_once(out.b8_once, [&] {
        quant::pack_b8(*quant::igemm8_active(), out.b8, bytes, b_u8, N, K, N, zp_ptr(zb, matrix), zb.per_item);
      });
      break;
    case BForm::kInt16Bytes:
      std::call_once(out.bytes_once, [&] {
        quant::pack_b_bytes(out.b16_bytes, bytes, !b_u8, N, K, N, zp_ptr(zb, matrix), zb.per_item);
      });
      break;
    case BForm::kInt16:
      std::call_once(out.b16_once, [&] {
        if (b_u8) quant::pack_b_u8(out.b16, bytes, N, K, N, zp_ptr(zb, matrix), zb.per_item);
        else
          quant::pack_b_s8(out.b16, reinterpret_cast<const int8_t*>(bytes), N, K, N, zp_ptr(zb, matrix), zb.per_item);
      });
      break;
  }
}

// Where B's forms are packed: the node cache for a constant B (packed once, shared by the runs), else a new one.
std::shared_ptr<PackedAny> packed_b(OpContext& ctx, bool b_const) {
  if (!b_const) return std::make_shared<PackedAny>();
  return ctx.node_cache<PackedAny>([] { return std::make_shared<PackedAny>(); });
}

// C[M, N] = (A[offset..] - za) x B for M rows of K values, on the form of B pack_b_matrix packed for M rows.
void gemm_rows(ThreadPool& pool, int64_t M, const Tensor& A, int64_t offset, int64_t K, const int32_t* za,
               bool za_per_row, const PackedAny& B, int32_t* C, int64_t ldc) {
  switch (b_form(M)) {
    case BForm::kBytes8:
      quant::igemm8(M, static_cast<const uint8_t*>(A.raw()) + offset, A.dtype() == DType::kInt8, K, K, za,
                    za_per_row, B.b8, C, ldc, &pool);
      return;
    case BForm::kInt16Bytes: {
      const std::vector<int16_t> a16 = quant::pack_a(A, offset, M, K, za, za_per_row, B.b16_bytes.Kp);
      quant::igemm_bytes_with(quant::igemm16_active(), M, a16.data(), B.b16_bytes, C, ldc, &pool);
      return;
    }
    case BForm::kInt16: {
      const std::vector<int16_t> a16 = quant::pack_a(A, offset, M, K, za, za_per_row, B.b16.Kp);
      quant::igemm(M, a16.data(), B.b16, C, ldc, &pool);
      return;
    }
  }
}

// int32 C (shape p.out) = (A - za) x (B - zb). b_in / zb_in: input indices of B and its zero
// point, for packing a constant B once.
void integer_matmul(OpContext& ctx, const MatMulPlan& p, size_t a_in, size_t za_in, size_t b_in, size_t zb_in,
                    int32_t* C, const char* op) {
  const Tensor& A = ctx.input(a_in);
  const Tensor& B = ctx.input(b_in);
  MRT_CHECK_IMPL(A.dtype() == DType::kUInt8 || A.dtype() == DType::kInt8, op, ": A element type ",
                 dtype_name(A.dtype()), " is not supported (uint8/int8)");
  MRT_CHECK_IMPL(B.dtype() == DType::kUInt8 || B.dtype() == DType::kInt8, op, ": B element type ",
                 dtype_name(B.dtype()), " is not supported (uint8/int8)");
  const ZeroPoints za = zero_points(ctx.optional_input(za_in), A.dtype(), p.M, p.batch_a, op, "A zero point");
  const ZeroPoints zb = zero_points(ctx.optional_input(zb_in), B.dtype(), p.N, p.batch_b, op, "B zero point");
  const int64_t M = p.M, K = p.K, N = p.N;
  const int64_t batches = static_cast<int64_t>(p.a_index.size());
  if (batches == 0 || M == 0 || N == 0) return;
  ThreadPool& pool = ctx.threads();

  const bool b_const = ctx.input_is_constant(b_in) && (!ctx.has_input(zb_in) || ctx.input_is_constant(zb_in));
  if (p.batch_b == 1) {
    const std::shared_ptr<PackedAny> packed = packed_b(ctx, b_const);
    // Every A row against the same B: one GEMM over all of A's matrices (in output order).
    const bool a_in_order = [&] {
      for (int64_t t = 0; t < batches; ++t)
        if (p.a_index[t] != t) return false;
      return true;
    }();
    pack_b_matrix(*packed, B, 0, K, N, zb, a_in_order ? batches * M : M);
    if (a_in_order) {
      std::vector<int32_t> rows_zp;
      const int32_t* zap = zp_ptr(za, 0);
      if (za.per_item && za.group == 0 && batches > 1) {  // the same per-row values for every matrix
        rows_zp.resize(static_cast<size_t>(batches * M));
        for (int64_t t = 0; t < batches; ++t) std::copy(za.v.begin(), za.v.end(), rows_zp.begin() + t * M);
        zap = rows_zp.data();
      }
      gemm_rows(pool, batches * M, A, 0, K, zap, za.per_item, *packed, C, N);
      return;
    }
    for (int64_t t = 0; t < batches; ++t) {
      const int64_t ai = p.a_index[t];
      gemm_rows(pool, M, A, ai * M * K, K, zp_ptr(za, ai), za.per_item, *packed, C + t * M * N, N);
    }
    return;
  }
  std::unique_ptr<PackedAny> packed;
  int64_t packed_index = -1;
  for (int64_t t = 0; t < batches; ++t) {
    const int64_t ai = p.a_index[t], bi = p.b_index[t];
    if (bi != packed_index) {
      packed = std::make_unique<PackedAny>();
      pack_b_matrix(*packed, B, bi, K, N, zb, M);
      packed_index = bi;
    }
    gemm_rows(pool, M, A, ai * M * K, K, zp_ptr(za, ai), za.per_item, *packed, C + t * M * N, N);
  }
}

void matmul_integer_kernel(OpContext& ctx) {
  const MatMulPlan p = plan_matmul(ctx.input(0), ctx.input(1), "MatMulInteger");
  Tensor& Y = ctx.output(0, DType::kInt32, p.out);
  integer_matmul(ctx, p, 0, 2, 1, 3, Y.data<int32_t>(), "MatMulInteger");
}

// Scale value rounded to the precision of its element type (products of float16 scales
// are formed in float16, like the reference).
double round_to(DType t, double v) {
  switch (t) {
    case DType::kFloat: return static_cast<float>(v);
    case DType::kFloat16: return half_to_float(float_to_half(static_cast<float>(v)));
    case DType::kBFloat16: return bfloat16_to_float(float_to_bfloat16(static_cast<float>(v)));
    default: return v;
  }
}

void qlinear_matmul_kernel(OpContext& ctx) {
  const char* op = "QLinearMatMul";
  const Tensor& A = ctx.input(0);
  const Tensor& B = ctx.input(3);
  const MatMulPlan p = plan_matmul(A, B, op);
  const Tensor& sa = ctx.input(1);
  const Tensor& sb = ctx.input(4);
  const Tensor& sy = ctx.input(6);
  const Tensor* zy = ctx.optional_input(7);
  const DType out = zy ? zy->dtype() : A.dtype();
  MRT_CHECK_IMPL(out == DType::kUInt8 || out == DType::kInt8, op, ": output element type ", dtype_name(out),
                 " is not supported (uint8/int8)");
  const std::vector<double> a_scale = norm::to_doubles(sa, "a_scale");
  const std::vector<double> b_scale = norm::to_doubles(sb, "b_scale");
  const std::vector<double> y_scale = norm::to_doubles(sy, "y_scale");
  MRT_CHECK_ARG(y_scale.size() == 1, op, ": y_scale must be a scalar, got ", sy.describe());
  MRT_CHECK_ARG(a_scale.size() == 1 || static_cast<int64_t>(a_scale.size()) == p.M, op, ": a_scale ",
                sa.describe(), " must be a scalar or hold one value per row (", p.M, ")");
  MRT_CHECK_ARG(b_scale.size() == 1 || static_cast<int64_t>(b_scale.size()) == p.N, op, ": b_scale ",
                sb.describe(), " must be a scalar or hold one value per column (", p.N, ")");
  const int32_t yzp = zy ? quant::to_int32s(*zy).at(0) : 0;
  MRT_CHECK_ARG(!zy || zy->numel() == 1, op, ": y_zero_point must be a scalar, got ", zy ? zy->describe() : "");

  const int64_t total = shape_size(p.out);
  std::vector<int32_t> acc(static_cast<size_t>(total));
  integer_matmul(ctx, p, 0, 2, 3, 5, acc.data(), op);

  const DType st = sa.dtype();
  std::vector<double> mult(a_scale.size() * b_scale.size());
  for (size_t i = 0; i < a_scale.size(); ++i)
    for (size_t j = 0; j < b_scale.size(); ++j)
      mult[i * b_scale.size() + j] = round_to(st, round_to(st, a_scale[i] * b_scale[j]) / y_scale[0]);
  double lo, hi;
  quant::qrange(out, lo, hi);
  Tensor& Y = ctx.output(0, out, p.out);
  const int64_t M = p.M, N = p.N;
  const bool row_scale = a_scale.size() > 1, col_scale = b_scale.size() > 1;
  auto write = [&](auto* y) {
    using TOut = std::remove_pointer_t<decltype(y)>;
    if (!row_scale && !col_scale) {
      ctx.threads().parallel_for(total, 8192, [&](int64_t b, int64_t e) {
        quant::requantize_row<TOut>(acc.data() + b, 0, mult[0], yzp, lo, hi, y + b, e - b);
      });
      return;
    }
    ctx.threads().parallel_for(total, 8192, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const int64_t n = i % N, m = (i / N) % M;
        const double mu = mult[(row_scale ? m * b_scale.size() : 0) + (col_scale ? n : 0)];
        y[i] = static_cast<TOut>(quant::requantize(acc[i], mu, yzp, lo, hi));
      }
    });
  };
  if (total == 0) return;
  if (out == DType::kUInt8) write(Y.data<uint8_t>());
  else write(Y.data<int8_t>());
}

// com.microsoft DynamicQuantizeMatMul(A float, B 8-bit [K, N], b_scale, b_zero_point?, bias?): A quantized as
// DynamicQuantizeLinear does, the integer product, then float(acc) * (a_scale * b_scale[n]) + bias[n] in
// float, operation by operation as the unfused DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul -> Add
// chain rounds (the graph optimizer fuses that chain, which dynamically quantized models are made of, into
// this node: one node instead of five, and the weights packed once).
void dynamic_quantize_matmul_kernel(OpContext& ctx) {
  const char* op = "DynamicQuantizeMatMul";
  const Tensor& A = ctx.input(0);
  const Tensor& B = ctx.input(1);
  const Tensor& bs = ctx.input(2);
  MRT_CHECK_IMPL(A.dtype() == DType::kFloat, op, ": A must be float32, got ", A.describe());
  MRT_CHECK_IMPL(B.rank() == 2, op, ": B must be a 2-D matrix, got ", B.describe());
  const MatMulPlan p = plan_matmul(A, B, op);
  const int64_t N = p.N;
  MRT_CHECK_ARG(bs.dtype() == DType::kFloat && (bs.numel() == 1 || bs.numel() == N), op, ": b_scale ",
                bs.describe(), " must be float32 with 1 or ", N, " elements");
  const Tensor* bias = ctx.optional_input(4);
  MRT_CHECK_ARG(!bias || (bias->dtype() == DType::kFloat && bias->numel() == N), op, ": bias ",
                bias ? bias->describe() : "", " must be float32 with ", N, " elements");
  // ai.mosaicrt's extension: the graph optimizer fuses a Relu that follows the chain (activation="Relu")
  const std::string activation = ctx.node().attr_string("activation", "");
  MRT_CHECK_ARG(activation.empty() || activation == "Relu", op, ": activation '", activation,
                "' is not supported (Relu or none)");
  const bool relu = !activation.empty();
  // Relu as the unfused node computes it (a NaN stays NaN)
  auto activate = [relu](float* yr, int64_t n) {
    if (relu)
      for (int64_t i = 0; i < n; ++i) yr[i] = yr[i] < 0.f ? 0.f : yr[i];
  };
  Tensor& Y = ctx.output(0, DType::kFloat, p.out);
  if (Y.numel() == 0) return;
  const int64_t rows = Y.numel() / N;
  if (p.K == 0) {  // an empty product: the bias (or zeros) in every row
    float* y = Y.data<float>();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t n = 0; n < N; ++n) y[r * N + n] = bias ? bias->data<float>()[n] : 0.f;
      activate(y + r * N, N);
    }
    return;
  }
  Tensor q(DType::kUInt8, A.shape(), ctx.allocator());
  const quant::DynamicQuantized dq = quant::dynamic_quantize_u8(ctx.threads(), A.data<float>(), A.numel(),
                                                                q.data<uint8_t>());
  MRT_CHECK_IMPL(B.dtype() == DType::kUInt8 || B.dtype() == DType::kInt8, op, ": B element type ",
                 dtype_name(B.dtype()), " is not supported (uint8/int8)");
  const bool b_const = ctx.input_is_constant(1) && (!ctx.has_input(3) || ctx.input_is_constant(3));
  const std::shared_ptr<PackedAny> packed = packed_b(ctx, b_const);
  pack_b_matrix(*packed, B, 0, p.K, N, zero_points(ctx.optional_input(3), B.dtype(), N, 1, op, "b_zero_point"),
                rows);
  static thread_local std::vector<int32_t> acc_buf;
  quant::Scratch<int32_t> acc(acc_buf, static_cast<size_t>(rows * N));
  const int32_t za = dq.zero_point;
  gemm_rows(ctx.threads(), rows, q, 0, p.K, &za, false, *packed, acc.data(), N);
  // the scale products as the unfused Mul forms them: a_scale * b_scale in float
  static thread_local std::vector<float> mult_buf;
  quant::Scratch<float> mult_scratch(mult_buf, static_cast<size_t>(N));
  float* mult = mult_scratch.data();
  const float* b_scale = bs.data<float>();
  for (int64_t n = 0; n < N; ++n) mult[n] = dq.scale * b_scale[bs.numel() == 1 ? 0 : n];
  const float* b = bias ? bias->data<float>() : nullptr;
  float* y = Y.data<float>();
  const int32_t* a = acc.data();
  ctx.threads().parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(N, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int32_t* ar = a + r * N;
      float* yr = y + r * N;
      for (int64_t n = 0; n < N; ++n) yr[n] = static_cast<float>(ar[n]) * mult[n];
      // the bias in a loop of its own: a compiler that contracts a * b + c (GCC does on arm64 and RISC-V)
      // would otherwise round once where the chain's Mul and Add round twice
      if (b)
        for (int64_t n = 0; n < N; ++n) yr[n] += b[n];
      activate(yr, N);
    }
  });
}

}  // namespace

void register_quant_matmul_kernels(KernelRegistry& r) {
  r.add("MatMulInteger", 10, matmul_integer_kernel);
  r.add("QLinearMatMul", 10, qlinear_matmul_kernel);
  r.add_domain("com.microsoft", "DynamicQuantizeMatMul", 1, dynamic_quantize_matmul_kernel);
}

}  // namespace mrt
