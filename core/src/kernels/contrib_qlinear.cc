// com.microsoft quantized operators that onnxruntime's static quantizer emits in the
// QOperator format: QLinearAdd, QLinearMul (numpy broadcasting), QLinearSigmoid,
// QLinearLeakyRelu, QLinearGlobalAveragePool (NCHW or channels_last), QLinearConcat and
// QGemm (quantized or float output, per-tensor or per-column B scale). Each dequantizes
// (x - zero_point) * scale, computes in float and requantizes to the output scale and
// zero point, rounding half to even and saturating to uint8/int8.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant_common.h"

namespace mrt {
namespace {

struct QParam {
  float scale = 1.f;
  int32_t zp = 0;
};

QParam qparam(const OpContext& ctx, size_t scale_idx, size_t zp_idx, const char* what) {
  QParam q;
  const Tensor& s = ctx.input(scale_idx);
  MRT_CHECK_ARG(s.numel() == 1, what, " scale must be a scalar, got ", s.describe());
  q.scale = static_cast<float>(s.scalar_as_double(0));
  if (const Tensor* z = ctx.optional_input(zp_idx)) {
    MRT_CHECK_ARG(z->numel() == 1, what, " zero point must be a scalar, got ", z->describe());
    q.zp = static_cast<int32_t>(z->scalar_as_double(0));
  }
  return q;
}

void check_u8_s8(const Tensor& t, const char* what) {
  MRT_CHECK_IMPL(t.dtype() == DType::kUInt8 || t.dtype() == DType::kInt8, what, ": element type ",
                 dtype_name(t.dtype()), " is not supported (uint8 and int8 are)");
}

inline float deq(const Tensor& t, int64_t i, const QParam& q) {
  const int32_t v = t.dtype() == DType::kUInt8 ? t.data<uint8_t>()[i] : t.data<int8_t>()[i];
  return static_cast<float>(v - q.zp) * q.scale;
}

inline void store_q(Tensor& y, int64_t i, float v, const QParam& q) {
  const float r = quant::round_even(v / q.scale) + static_cast<float>(q.zp);
  if (y.dtype() == DType::kUInt8) y.data<uint8_t>()[i] = static_cast<uint8_t>(quant::saturate(r, 0.f, 255.f));
  else y.data<int8_t>()[i] = static_cast<int8_t>(quant::saturate(r, -128.f, 127.f));
}

// Offsets of every output element into a and b under numpy broadcasting.
void broadcast_offsets(const Shape& a, const Shape& b, const Shape& out, std::vector<int64_t>& oa,
                       std::vector<int64_t>& ob) {
  const size_t r = out.size();
  auto strides = [&](const Shape& s) {
    std::vector<int64_t> st(r, 0);
    int64_t acc = 1;
    for (size_t i = 0; i < s.size(); ++i) {
      const size_t d = s.size() - 1 - i, od = r - 1 - i;
      st[od] = s[d] == 1 ? 0 : acc;
      acc *= s[d];
    }
    return st;
  };
  const std::vector<int64_t> sa = strides(a), sb = strides(b);
  const int64_t n = shape_size(out);
  oa.resize(static_cast<size_t>(n));
  ob.resize(static_cast<size_t>(n));
  std::vector<int64_t> idx(r, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t pa = 0, pb = 0;
    for (size_t d = 0; d < r; ++d) {
      pa += idx[d] * sa[d];
      pb += idx[d] * sb[d];
    }
    oa[static_cast<size_t>(i)] = pa;
    ob[static_cast<size_t>(i)] = pb;
    for (size_t d = r; d-- > 0;) {
      if (++idx[d] < out[d]) break;
      idx[d] = 0;
    }
  }
}

template <bool kMul>
void qlinear_binary(OpContext& ctx) {
  const char* op = kMul ? "QLinearMul" : "QLinearAdd";
  const Tensor& A = ctx.input(0);
  const Tensor& B = ctx.input(3);
  check_u8_s8(A, op);
  MRT_CHECK_ARG(B.dtype() == A.dtype(), op, ": A is ", A.describe(), " but B is ", B.describe());
  const QParam qa = qparam(ctx, 1, 2, "A"), qb = qparam(ctx, 4, 5, "B"), qc = qparam(ctx, 6, 7, "C");
  const Shape out = broadcast_shapes(A.shape(), B.shape());
  Tensor& Y = ctx.output(0, A.dtype(), out);
  std::vector<int64_t> oa, ob;
  broadcast_offsets(A.shape(), B.shape(), out, oa, ob);
  for (int64_t i = 0; i < Y.numel(); ++i) {
    const float a = deq(A, oa[static_cast<size_t>(i)], qa), b = deq(B, ob[static_cast<size_t>(i)], qb);
    store_q(Y, i, kMul ? a * b : a + b, qc);
  }
}

template <bool kLeaky>
void qlinear_unary(OpContext& ctx) {
  const Tensor& X = ctx.input(0);
  check_u8_s8(X, kLeaky ? "QLinearLeakyRelu" : "QLinearSigmoid");
  const QParam qx = qparam(ctx, 1, 2, "X"), qy = qparam(ctx, 3, 4, "Y");
  const float alpha = ctx.node().attr_float("alpha", 0.01f);
  Tensor& Y = ctx.output(0, X.dtype(), X.shape());
  // one lookup per possible input byte
  float table[256];
  for (int v = 0; v < 256; ++v) {
    const int32_t q = X.dtype() == DType::kUInt8 ? v : static_cast<int8_t>(v);
    const float x = static_cast<float>(q - qx.zp) * qx.scale;
    table[v] = kLeaky ? (x >= 0 ? x : alpha * x) : 1.f / (1.f + std::exp(-x));
  }
  const uint8_t* xb = X.data_as<uint8_t>();
  for (int64_t i = 0; i < X.numel(); ++i) store_q(Y, i, table[xb[i]], qy);
}

void qlinear_global_avg_pool(OpContext& ctx) {
  const Tensor& X = ctx.input(0);
  check_u8_s8(X, "QLinearGlobalAveragePool");
  const QParam qx = qparam(ctx, 1, 2, "X"), qy = qparam(ctx, 3, 4, "Y");
  const bool nhwc = ctx.node().attr_int("channels_last", 0) != 0;
  MRT_CHECK_ARG(X.rank() >= 3, "QLinearGlobalAveragePool: input must have rank >= 3, got ", X.describe());
  const int64_t N = X.dim(0), C = nhwc ? X.dim(X.rank() - 1) : X.dim(1);
  const int64_t S = X.numel() / std::max<int64_t>(1, N * C);
  Shape out = X.shape();
  for (size_t d = nhwc ? 1 : 2; d < (nhwc ? X.rank() - 1 : X.rank()); ++d) out[d] = 1;
  Tensor& Y = ctx.output(0, X.dtype(), out);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      double sum = 0;
      for (int64_t s = 0; s < S; ++s) sum += deq(X, nhwc ? (n * S + s) * C + c : (n * C + c) * S + s, qx);
      store_q(Y, n * C + c, static_cast<float>(sum / static_cast<double>(S)), qy);
    }
}

void qlinear_concat(OpContext& ctx) {
  const QParam qy = qparam(ctx, 0, 1, "Y");
  const size_t n_in = (ctx.input_count() - 2) / 3;
  MRT_CHECK_ARG(n_in >= 1 && ctx.input_count() == 2 + 3 * n_in, "QLinearConcat: inputs must be Y_scale, Y_zero_point "
                "and (X, X_scale, X_zero_point) triples, got ", ctx.input_count());
  const Tensor& X0 = ctx.input(2);
  check_u8_s8(X0, "QLinearConcat");
  const int64_t axis = normalize_axis(ctx.node().require_int("axis"), static_cast<int64_t>(X0.rank()), "axis");
  Shape out = X0.shape();
  out[static_cast<size_t>(axis)] = 0;
  for (size_t k = 0; k < n_in; ++k) {
    const Tensor& X = ctx.input(2 + 3 * k);
    MRT_CHECK_ARG(X.dtype() == X0.dtype() && X.rank() == X0.rank(), "QLinearConcat: input ", k, " ", X.describe(),
                  " does not match ", X0.describe());
    for (size_t d = 0; d < X.rank(); ++d)
      MRT_CHECK_ARG(static_cast<int64_t>(d) == axis || X.dim(d) == X0.dim(d), "QLinearConcat: input ", k, " ",
                    X.describe(), " differs from ", X0.describe(), " outside axis ", axis);
    out[static_cast<size_t>(axis)] += X.dim(static_cast<size_t>(axis));
  }
  Tensor& Y = ctx.output(0, X0.dtype(), out);
  const int64_t outer = shape_size(Shape(out.begin(), out.begin() + axis));
  const int64_t inner = shape_size(Shape(out.begin() + axis + 1, out.end()));
  const int64_t total = out[static_cast<size_t>(axis)];
  int64_t offset = 0;
  for (size_t k = 0; k < n_in; ++k) {
    const Tensor& X = ctx.input(2 + 3 * k);
    const QParam qx = qparam(ctx, 3 + 3 * k, 4 + 3 * k, "X");
    const int64_t len = X.dim(static_cast<size_t>(axis));
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < len * inner; ++j)
        store_q(Y, (o * total + offset) * inner + j, deq(X, o * len * inner + j, qx), qy);
    offset += len;
  }
}

void qgemm(OpContext& ctx) {
  const Node& n = ctx.node();
  const Tensor& A = ctx.input(0);
  const Tensor& B = ctx.input(3);
  check_u8_s8(A, "QGemm");
  check_u8_s8(B, "QGemm");
  const bool ta = n.attr_int("transA", 0) != 0, tb = n.attr_int("transB", 0) != 0;
  const float alpha = n.attr_float("alpha", 1.f);
  MRT_CHECK_ARG(A.rank() == 2 && B.rank() == 2, "QGemm: A and B must be 2-D, got ", A.describe(), " and ",
                B.describe());
  const int64_t M = ta ? A.dim(1) : A.dim(0), K = ta ? A.dim(0) : A.dim(1);
  const int64_t N = tb ? B.dim(0) : B.dim(1);
  MRT_CHECK_ARG((tb ? B.dim(1) : B.dim(0)) == K, "QGemm: inner dimensions of ", A.describe(), " and ", B.describe(),
                " differ");
  const QParam qa = qparam(ctx, 1, 2, "A");
  const Tensor& bs = ctx.input(4);
  MRT_CHECK_ARG(bs.numel() == 1 || bs.numel() == N, "QGemm: b_scale must have 1 or ", N, " values, got ",
                bs.describe());
  std::vector<float> b_scale(static_cast<size_t>(N)), b_zp(static_cast<size_t>(N), 0.f);
  for (int64_t j = 0; j < N; ++j) b_scale[static_cast<size_t>(j)] = static_cast<float>(bs.scalar_as_double(bs.numel() == 1 ? 0 : j));
  if (const Tensor* bz = ctx.optional_input(5)) {
    MRT_CHECK_ARG(bz->numel() == 1 || bz->numel() == N, "QGemm: b_zero_point must have 1 or ", N, " values");
    for (int64_t j = 0; j < N; ++j) b_zp[static_cast<size_t>(j)] = static_cast<float>(bz->scalar_as_double(bz->numel() == 1 ? 0 : j));
  }
  const Tensor* C = ctx.optional_input(6);
  const bool quant_out = ctx.has_input(7);
  QParam qy;
  if (quant_out) qy = qparam(ctx, 7, 8, "Y");
  const DType out_type = !quant_out ? DType::kFloat : ctx.has_input(8) ? ctx.input(8).dtype() : A.dtype();
  if (quant_out) check_u8_s8(Tensor(out_type, Shape{0}), "QGemm output");
  Tensor& Y = ctx.output(0, out_type, Shape{M, N});
  auto bval = [&](int64_t k, int64_t j) {
    const int64_t i = tb ? j * K + k : k * N + j;
    const int32_t v = B.dtype() == DType::kUInt8 ? B.data<uint8_t>()[i] : B.data<int8_t>()[i];
    return static_cast<float>(v) - b_zp[static_cast<size_t>(j)];
  };
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) {
        const int64_t ai = ta ? k * M + i : i * K + k;
        const int32_t av = A.dtype() == DType::kUInt8 ? A.data<uint8_t>()[ai] : A.data<int8_t>()[ai];
        acc += static_cast<double>(av - qa.zp) * bval(k, j);
      }
      if (C) acc += static_cast<double>(C->int_at(C->numel() == 1 ? 0 : (C->numel() == N ? j : i * N + j)));
      const float v = static_cast<float>(acc * alpha * qa.scale * b_scale[static_cast<size_t>(j)]);
      if (quant_out) store_q(Y, i * N + j, v, qy);
      else Y.data<float>()[i * N + j] = v;
    }
}

}  // namespace

void register_contrib_qlinear_kernels(KernelRegistry& r) {
  r.add_domain("com.microsoft", "QLinearAdd", 1, qlinear_binary<false>);
  r.add_domain("com.microsoft", "QLinearMul", 1, qlinear_binary<true>);
  r.add_domain("com.microsoft", "QLinearSigmoid", 1, qlinear_unary<false>);
  r.add_domain("com.microsoft", "QLinearLeakyRelu", 1, qlinear_unary<true>);
  r.add_domain("com.microsoft", "QLinearGlobalAveragePool", 1, qlinear_global_avg_pool);
  r.add_domain("com.microsoft", "QLinearConcat", 1, qlinear_concat);
  r.add_domain("com.microsoft", "QGemm", 1, qgemm);
}

}  // namespace mrt
