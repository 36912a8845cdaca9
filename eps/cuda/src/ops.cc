// The CUDA EP's operators: which nodes it takes (check_node) and their kernels (host-side
// shape logic, cuBLAS calls and launches of the device kernels in the .cu files).
#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <numeric>

#include "cuda_common.h"
#include "device_kernels.h"

namespace mrt_cuda {
namespace {

using Dims = std::vector<int64_t>;

int64_t normalize_axis(int64_t axis, size_t rank, const char* op) {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= (r == 0 ? 1 : r))
    fail(MRT_INVALID_ARGUMENT, std::string("CUDA EP: ") + op + " axis " + std::to_string(axis) +
                                   " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + r : axis;
}

int64_t prod(const Dims& d, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end && i < d.size(); ++i) n *= d[i];
  return n;
}

Dims contiguous_strides(const Dims& d) {
  Dims s(d.size(), 1);
  for (size_t i = d.size(); i-- > 1;) s[i - 1] = s[i] * d[i];
  return s;
}

// Numpy-style broadcast of a and b (right-aligned); throws on mismatch.
Dims broadcast_shape(const Dims& a, const Dims& b, const char* op) {
  const size_t r = std::max(a.size(), b.size());
  Dims out(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1)
      fail(MRT_INVALID_ARGUMENT, std::string("CUDA EP: ") + op + ": shapes " + dims_str(a) + " and " + dims_str(b) +
                                     " cannot be broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// Strides of `in` read as the broadcast shape `out` (0 on broadcast dimensions).
Dims broadcast_strides(const Dims& in, const Dims& out) {
  Dims s(out.size(), 0);
  const Dims cs = contiguous_strides(in);
  const size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) s[off + i] = in[i] == 1 ? 0 : cs[i];
  return s;
}

// Packs (dims, strides of up to two operands) into an IndexMap, dropping size-1 dimensions and
// merging neighbours that are contiguous in every operand.
IndexMap make_map(const Dims& dims, const Dims& sa, const Dims& sb) {
  Dims d, a, b;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    if (!d.empty() && a.back() == sa[i] * dims[i] && b.back() == sb[i] * dims[i]) {
      d.back() *= dims[i];
      a.back() = sa[i];
      b.back() = sb[i];
      continue;
    }
    d.push_back(dims[i]);
    a.push_back(sa[i]);
    b.push_back(sb[i]);
  }
  if (d.size() > static_cast<size_t>(kMaxRank))
    fail(MRT_NOT_IMPLEMENTED, "CUDA EP: more than " + std::to_string(kMaxRank) + " non-mergeable dimensions");
  IndexMap m;
  m.rank = static_cast<int>(d.size());
  for (size_t i = 0; i < d.size(); ++i) {
    m.dims[i] = d[i];
    m.stride_a[i] = a[i];
    m.stride_b[i] = b[i];
  }
  return m;
}

// Row-major GEMM through column-major cuBLAS: C[M,N] = alpha * op(A) op(B) + beta * C, with
// A stored [M,K] ([K,M] when trans_a) and B stored [K,N] ([N,K] when trans_b). Computes the
// transposed problem C^T = op(B)^T op(A)^T, which is what column-major sees in row-major memory.
void gemm(CudaState& st, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          const float* b, float beta, float* c, int64_t batch = 1, int64_t stride_a = 0, int64_t stride_b = 0,
          int64_t stride_c = 0) {
  if (m == 0 || n == 0 || batch == 0) return;
  const int64_t lim = 0x7fffffff;
  if (m > lim || n > lim || k > lim || batch > lim)
    fail(MRT_NOT_IMPLEMENTED, "CUDA EP: GEMM dimension exceeds the 32-bit range of cuBLAS");
  const cublasOperation_t opa = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int lda = static_cast<int>(std::max<int64_t>(1, trans_a ? m : k));
  const int ldb = static_cast<int>(std::max<int64_t>(1, trans_b ? k : n));
  if (k == 0 && beta == 0.f) {  // empty inner dimension: C = 0
    MRT_CUDA_CHECK(cudaMemsetAsync(c, 0, static_cast<size_t>(batch * (stride_c ? stride_c : m * n)) * sizeof(float),
                                   st.stream));
    return;
  }
  if (batch == 1) {
    MRT_CUBLAS_CHECK(cublasSgemm(st.cublas, opb, opa, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k),
                                 &alpha, b, ldb, a, lda, &beta, c, static_cast<int>(n)));
  } else {
    MRT_CUBLAS_CHECK(cublasSgemmStridedBatched(st.cublas, opb, opa, static_cast<int>(n), static_cast<int>(m),
                                               static_cast<int>(k), &alpha, b, ldb, stride_b, a, lda, stride_a,
                                               &beta, c, static_cast<int>(n), stride_c, static_cast<int>(batch)));
  }
}

// ---- elementwise ----
class BinaryKernel : public Kernel {
 public:
  explicit BinaryKernel(BinaryOp op, const char* name) : op_(op), name_(name) {}
  void compute(RunContext& rc) override {
    DevTensor a = rc.input(0), b = rc.input(1);
    Dims out = broadcast_shape(a.dims, b.dims, name_);
    float* y = rc.output(0, out);
    const int64_t n = numel(out);
    if (n > 0) {
      if (a.dims == b.dims) {
        launch_binary(op_, a.data, b.data, y, n, nullptr, rc.st.stream);
      } else {
        IndexMap m = make_map(out, broadcast_strides(a.dims, out), broadcast_strides(b.dims, out));
        launch_binary(op_, a.data, b.data, y, n, &m, rc.st.stream);
      }
    }
    rc.finish();
  }

 private:
  BinaryOp op_;
  const char* name_;
};

class UnaryKernel : public Kernel {
 public:
  UnaryKernel(UnaryOp op, float alpha) : op_(op), alpha_(alpha) {}
  void compute(RunContext& rc) override {
    DevTensor x = rc.input(0);
    float* y = rc.output(0, x.dims);
    launch_unary(op_, alpha_, x.data, y, x.size(), rc.st.stream);
    rc.finish();
  }

 private:
  UnaryOp op_;
  float alpha_;
};

// ---- MatMul / Gemm ----
class MatMulKernel : public Kernel {
 public:
  void compute(RunContext& rc) override {
    DevTensor a = rc.input(0), b = rc.input(1);
    if (a.dims.empty() || b.dims.empty()) fail(MRT_INVALID_ARGUMENT, "CUDA EP: MatMul inputs must not be scalars");
    Dims ad = a.dims, bd = b.dims;
    const bool a_vec = ad.size() == 1, b_vec = bd.size() == 1;
    if (a_vec) ad.insert(ad.begin(), 1);
    if (b_vec) bd.push_back(1);
    const int64_t m = ad[ad.size() - 2], k = ad.back(), n = bd.back();
    if (bd[bd.size() - 2] != k)
      fail(MRT_INVALID_ARGUMENT, "CUDA EP: MatMul inner dimensions differ: " + dims_str(a.dims) + " x " +
                                     dims_str(b.dims));
    const Dims batch_a(ad.begin(), ad.end() - 2), batch_b(bd.begin(), bd.end() - 2);
    const Dims batch = broadcast_shape(batch_a, batch_b, "MatMul");
    Dims out = batch;
    if (!a_vec) out.push_back(m);
    if (!b_vec) out.push_back(n);
    float* y = rc.output(0, out);
    const int64_t count = numel(batch);
    if (numel(out) == 0) return rc.finish();

    const int64_t na = numel(batch_a), nb = numel(batch_b);
    if (nb == 1 && na == count) {
      // B is one matrix: fold A's batch into M.
      gemm(rc.st, false, false, count * m, n, k, 1.f, a.data, b.data, 0.f, y);
      return rc.finish();
    }
    // Offsets of every batch in A and B; one strided-batched call when they are regular.
    const Dims sa = broadcast_strides(batch_a, batch), sb = broadcast_strides(batch_b, batch);
    std::vector<int64_t> off_a(static_cast<size_t>(count)), off_b(static_cast<size_t>(count));
    Dims idx(batch.size(), 0);
    for (int64_t i = 0; i < count; ++i) {
      int64_t oa = 0, ob = 0;
      for (size_t d = 0; d < batch.size(); ++d) {
        oa += idx[d] * sa[d];
        ob += idx[d] * sb[d];
      }
      off_a[static_cast<size_t>(i)] = oa * m * k;
      off_b[static_cast<size_t>(i)] = ob * k * n;
      for (size_t d = batch.size(); d-- > 0;) {
        if (++idx[d] < batch[d]) break;
        idx[d] = 0;
      }
    }
    auto regular = [&](const std::vector<int64_t>& off) {
      const int64_t step = count > 1 ? off[1] - off[0] : 0;
      for (int64_t i = 0; i < count; ++i)
        if (off[static_cast<size_t>(i)] != off[0] + i * step) return int64_t{-1};
      return step;
    };
    const int64_t step_a = regular(off_a), step_b = regular(off_b);
    if (step_a >= 0 && step_b >= 0 && off_a[0] == 0 && off_b[0] == 0) {
      gemm(rc.st, false, false, m, n, k, 1.f, a.data, b.data, 0.f, y, count, step_a, step_b, m * n);
    } else {
      for (int64_t i = 0; i < count; ++i)
        gemm(rc.st, false, false, m, n, k, 1.f, a.data + off_a[static_cast<size_t>(i)],
             b.data + off_b[static_cast<size_t>(i)], 0.f, y + i * m * n);
    }
    rc.finish();
  }
};

class GemmKernel : public Kernel {
 public:
  explicit GemmKernel(const MrtEpNode& node)
      : trans_a_(attr_int(node, "transA", 0) != 0),
        trans_b_(attr_int(node, "transB", 0) != 0),
        alpha_(attr_float(node, "alpha", 1.f)),
        beta_(attr_float(node, "beta", 1.f)) {}
  void compute(RunContext& rc) override {
    DevTensor a = rc.input(0), b = rc.input(1);
    if (a.dims.size() != 2 || b.dims.size() != 2)
      fail(MRT_INVALID_ARGUMENT, "CUDA EP: Gemm needs 2-D A and B, got " + dims_str(a.dims) + " and " +
                                     dims_str(b.dims));
    const int64_t m = trans_a_ ? a.dims[1] : a.dims[0], k = trans_a_ ? a.dims[0] : a.dims[1];
    const int64_t kb = trans_b_ ? b.dims[1] : b.dims[0], n = trans_b_ ? b.dims[0] : b.dims[1];
    if (k != kb)
      fail(MRT_INVALID_ARGUMENT, "CUDA EP: Gemm inner dimensions differ: " + dims_str(a.dims) + " and " +
                                     dims_str(b.dims));
    const Dims out{m, n};
    float* y = rc.output(0, out);
    float beta = 0.f;
    if (rc.has_input(2) && beta_ != 0.f && m * n > 0) {
      DevTensor c = rc.input(2);
      if (broadcast_shape(c.dims, out, "Gemm") != out || c.dims.size() > 2)
        fail(MRT_INVALID_ARGUMENT, "CUDA EP: Gemm C of shape " + dims_str(c.dims) + " does not broadcast to " +
                                       dims_str(out));
      IndexMap map = make_map(out, broadcast_strides(c.dims, out), Dims(2, 0));
      launch_gather_copy(c.data, y, m * n, map, rc.st.stream);
      beta = beta_;
    }
    gemm(rc.st, trans_a_, trans_b_, m, n, k, alpha_, a.data, b.data, beta, y);
    rc.finish();
  }

 private:
  bool trans_a_, trans_b_;
  float alpha_, beta_;
};

// ---- Conv (1-D and 2-D) ----
class ConvKernel : public Kernel {
 public:
  explicit ConvKernel(const MrtEpNode& node)
      : group_(attr_int(node, "group", 1)),
        auto_pad_(attr_string(node, "auto_pad", "NOTSET")),
        strides_(attr_ints(node, "strides")),
        dilations_(attr_ints(node, "dilations")),
        pads_(attr_ints(node, "pads")) {}

  void compute(RunContext& rc) override {
    DevTensor x = rc.input(0), w = rc.input(1);
    const size_t sr = w.dims.size() >= 2 ? w.dims.size() - 2 : 0;
    if ((sr != 1 && sr != 2) || x.dims.size() != sr + 2)
      fail(MRT_NOT_IMPLEMENTED, "CUDA EP: Conv supports 1-D and 2-D convolutions; got X " + dims_str(x.dims) +
                                    ", W " + dims_str(w.dims));
    const int64_t batch = x.dims[0], channels = x.dims[1], out_ch = w.dims[0];
    if (group_ <= 0 || channels % group_ != 0 || out_ch % group_ != 0 || w.dims[1] * group_ != channels)
      fail(MRT_INVALID_ARGUMENT, "CUDA EP: Conv channels do not match: X " + dims_str(x.dims) + ", W " +
                                     dims_str(w.dims) + ", group " + std::to_string(group_));
    // Spatial geometry as 2-D (a 1-D conv has height 1).
    int64_t in[2] = {1, 1}, ker[2] = {1, 1}, stride[2] = {1, 1}, dil[2] = {1, 1}, pb[2] = {0, 0}, pe[2] = {0, 0},
            out[2] = {1, 1};
    for (size_t d = 0; d < sr; ++d) {
      const size_t t = d + (2 - sr);
      in[t] = x.dims[2 + d];
      ker[t] = w.dims[2 + d];
      if (d < strides_.size()) stride[t] = strides_[d];
      if (d < dilations_.size()) dil[t] = dilations_[d];
      if (stride[t] <= 0 || dil[t] <= 0) fail(MRT_INVALID_ARGUMENT, "CUDA EP: Conv strides/dilations must be > 0");
      const int64_t span = dil[t] * (ker[t] - 1) + 1;
      if (auto_pad_ == "SAME_UPPER" || auto_pad_ == "SAME_LOWER") {
        out[t] = (in[t] + stride[t] - 1) / stride[t];
        const int64_t total = std::max<int64_t>(0, (out[t] - 1) * stride[t] + span - in[t]);
        const int64_t small = total / 2;
        pb[t] = auto_pad_ == "SAME_UPPER" ? small : total - small;
        pe[t] = total - pb[t];
      } else {
        if (auto_pad_ == "NOTSET" && pads_.size() == 2 * sr) {
          pb[t] = pads_[d];
          pe[t] = pads_[d + sr];
        }
        out[t] = (in[t] + pb[t] + pe[t] - span) / stride[t] + 1;
      }
      if (out[t] < 0) out[t] = 0;
    }
    Dims ydims{batch, out_ch};
    for (size_t d = 0; d < sr; ++d) ydims.push_back(out[d + (2 - sr)]);
    float* y = rc.output(0, ydims);
    const float* bias = nullptr;
    if (rc.has_input(2)) {
      DevTensor b = rc.input(2);
      if (b.size() != out_ch) fail(MRT_INVALID_ARGUMENT, "CUDA EP: Conv bias must have " + std::to_string(out_ch) +
                                                             " values, got " + dims_str(b.dims));
      bias = b.data;
    }
    const int64_t out_hw = out[0] * out[1], in_hw = in[0] * in[1];
    if (numel(ydims) == 0) return rc.finish();
    const int64_t cg = channels / group_, mg = out_ch / group_, kg = cg * ker[0] * ker[1];
    const bool pointwise = ker[0] == 1 && ker[1] == 1 && stride[0] == 1 && stride[1] == 1 && pb[0] == 0 &&
                           pb[1] == 0 && pe[0] == 0 && pe[1] == 0;
    float* col = pointwise ? nullptr : rc.scratch(static_cast<size_t>(channels * ker[0] * ker[1] * out_hw));
    for (int64_t i = 0; i < batch; ++i) {
      const float* xi = x.data + i * channels * in_hw;
      float* yi = y + i * out_ch * out_hw;
      const float* src = xi;
      if (!pointwise) {
        launch_im2col(xi, col, channels, in[0], in[1], ker[0], ker[1], pb[0], pb[1], stride[0], stride[1], dil[0],
                      dil[1], out[0], out[1], rc.st.stream);
        src = col;
      }
      // Per group: Y_g[mg, out_hw] = W_g[mg, kg] * col_g[kg, out_hw].
      gemm(rc.st, false, false, mg, out_hw, kg, 1.f, w.data, src, 0.f, yi, group_, mg * kg, kg * out_hw,
           mg * out_hw);
    }
    if (bias) launch_add_channel_bias(y, bias, batch, out_ch, out_hw, rc.st.stream);
    rc.finish();
  }

 private:
  int64_t group_;
  std::string auto_pad_;
  Dims strides_, dilations_, pads_;
};

// ---- Softmax / LogSoftmax ----
class SoftmaxKernel : public Kernel {
 public:
  SoftmaxKernel(const MrtEpNode& node, bool log)
      : legacy_(node.opset < 13), axis_(attr_int(node, "axis", node.opset < 13 ? 1 : -1)), log_(log) {}
  void compute(RunContext& rc) override {
    DevTensor x = rc.input(0);
    float* y = rc.output(0, x.dims);
    if (x.size() > 0) {
      const size_t r = x.dims.size();
      const size_t axis = static_cast<size_t>(normalize_axis(axis_, r, "Softmax"));
      const int64_t outer = prod(x.dims, 0, axis);
      const int64_t len = legacy_ ? prod(x.dims, axis, r) : (r ? x.dims[axis] : 1);
      const int64_t inner = legacy_ ? 1 : prod(x.dims, axis + 1, r);
      launch_softmax(x.data, y, outer, len, inner, log_, rc.st.stream);
    }
    rc.finish();
  }

 private:
  bool legacy_;
  int64_t axis_;
  bool log_;
};

// ---- LayerNormalization ----
class LayerNormKernel : public Kernel {
 public:
  explicit LayerNormKernel(const MrtEpNode& node)
      : axis_(attr_int(node, "axis", -1)), epsilon_(attr_float(node, "epsilon", 1e-5f)) {}
  void compute(RunContext& rc) override {
    DevTensor x = rc.input(0);
    const size_t r = x.dims.size();
    const size_t axis = static_cast<size_t>(normalize_axis(axis_, r, "LayerNormalization"));
    const int64_t rows = prod(x.dims, 0, axis), cols = prod(x.dims, axis, r);
    const Dims norm_shape(x.dims.begin() + static_cast<std::ptrdiff_t>(axis), x.dims.end());
    float* y = rc.output(0, x.dims);
    Dims stat_dims(x.dims.begin(), x.dims.begin() + static_cast<std::ptrdiff_t>(axis));
    stat_dims.resize(r, 1);
    float* mean = rc.wants_output(1) ? rc.output(1, stat_dims) : nullptr;
    float* inv_std = rc.wants_output(2) ? rc.output(2, stat_dims) : nullptr;
    if (x.size() > 0) {
      const float* scale = expand_to(rc, rc.input(1), norm_shape, cols);
      const float* bias = rc.has_input(2) ? expand_to(rc, rc.input(2), norm_shape, cols) : nullptr;
      launch_layer_norm(x.data, scale, bias, y, mean, inv_std, rows, cols, epsilon_, rc.st.stream);
    }
    rc.finish();
  }

 private:
  static const float* expand_to(RunContext& rc, const DevTensor& t, const Dims& shape, int64_t count) {
    if (t.size() == count && t.dims.size() <= shape.size()) return t.data;
    if (broadcast_shape(t.dims, shape, "LayerNormalization") != shape)
      fail(MRT_INVALID_ARGUMENT, "CUDA EP: LayerNormalization scale/bias " + dims_str(t.dims) +
                                     " does not broadcast to " + dims_str(shape));
    float* out = rc.scratch(static_cast<size_t>(count));
    launch_gather_copy(t.data, out, count, make_map(shape, broadcast_strides(t.dims, shape), Dims(shape.size(), 0)),
                       rc.st.stream);
    return out;
  }
  int64_t axis_;
  float epsilon_;
};

// ---- Transpose ----
void transpose_into(RunContext& rc, const DevTensor& x, const Dims& perm, float* y) {
  const Dims in_strides = contiguous_strides(x.dims);
  Dims out_dims(perm.size()), strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    out_dims[i] = x.dims[static_cast<size_t>(perm[i])];
    strides[i] = in_strides[static_cast<size_t>(perm[i])];
  }
  const int64_t n = numel(out_dims);
  if (n == 0) return;
  IndexMap map = make_map(out_dims, strides, Dims(perm.size(), 0));
  if (map.rank <= 1 && (map.rank == 0 || map.stride_a[0] == 1))
    MRT_CUDA_CHECK(cudaMemcpyAsync(y, x.data, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToDevice,
                                   rc.st.stream));
  else
    launch_gather_copy(x.data, y, n, map, rc.st.stream);
}

class TransposeKernel : public Kernel {
 public:
  explicit TransposeKernel(const MrtEpNode& node) : perm_(attr_ints(node, "perm")) {}
  void compute(RunContext& rc) override {
    DevTensor x = rc.input(0);
    Dims perm = perm_;
    const size_t r = x.dims.size();
    if (perm.empty()) {
      perm.resize(r);
      for (size_t i = 0; i < r; ++i) perm[i] = static_cast<int64_t>(r - 1 - i);
    }
    std::vector<bool> seen(r, false);
    if (perm.size() != r) fail(MRT_INVALID_ARGUMENT, "CUDA EP: Transpose perm does not match the input rank");
    for (int64_t& p : perm) {
      if (p < 0) p += static_cast<int64_t>(r);
      if (p < 0 || p >= static_cast<int64_t>(r) || seen[static_cast<size_t>(p)])
        fail(MRT_INVALID_ARGUMENT, "CUDA EP: Transpose perm is not a permutation");
      seen[static_cast<size_t>(p)] = true;
    }
    Dims out(r);
    for (size_t i = 0; i < r; ++i) out[i] = x.dims[static_cast<size_t>(perm[i])];
    float* y = rc.output(0, out);
    transpose_into(rc, x, perm, y);
    rc.finish();
  }

 private:
  Dims perm_;
};

// ---- ReduceSum / ReduceMean / ReduceMax / ReduceMin ----
class ReduceKernel : public Kernel {
 public:
  ReduceKernel(const MrtEpNode& node, ReduceOp op, Dims axes)
      : op_(op),
        keepdims_(attr_int(node, "keepdims", 1) != 0),
        noop_empty_(attr_int(node, "noop_with_empty_axes", 0) != 0),
        axes_(std::move(axes)) {}
  void compute(RunContext& rc) override {
    DevTensor x = rc.input(0);
    const size_t r = x.dims.size();
    if (axes_.empty() && noop_empty_) {  // identity
      float* y = rc.output(0, x.dims);
      if (x.size() > 0)
        MRT_CUDA_CHECK(cudaMemcpyAsync(y, x.data, static_cast<size_t>(x.size()) * sizeof(float),
                                       cudaMemcpyDeviceToDevice, rc.st.stream));
      return rc.finish();
    }
    std::vector<bool> reduced(r, axes_.empty());
    for (int64_t a : axes_) reduced[static_cast<size_t>(normalize_axis(a, r, "Reduce"))] = true;
    // Output shape, and the permutation that moves the reduced axes last (kept axes in order).
    Dims out, perm;
    int64_t rows = 1, cols = 1;
    for (size_t i = 0; i < r; ++i) {
      if (!reduced[i]) {
        out.push_back(x.dims[i]);
        perm.push_back(static_cast<int64_t>(i));
        rows *= x.dims[i];
      } else if (keepdims_) {
        out.push_back(1);
      }
    }
    for (size_t i = 0; i < r; ++i) {
      if (reduced[i]) {
        perm.push_back(static_cast<int64_t>(i));
        cols *= x.dims[i];
      }
    }
    float* y = rc.output(0, out);
    if (rows == 0) return rc.finish();
    // cols == 0 reduces an empty set: Sum 0, Mean NaN, Max -inf, Min +inf (the row kernel reads nothing).
    const float* src = x.data;
    bool trailing = true;
    for (size_t i = 0; i < r; ++i)
      if (perm[i] != static_cast<int64_t>(i)) trailing = false;
    if (!trailing && cols > 0) {
      float* t = rc.scratch(static_cast<size_t>(x.size()));
      transpose_into(rc, x, perm, t);
      src = t;
    }
    launch_reduce_rows(op_, src, y, rows, cols, rc.st.stream);
    rc.finish();
  }

 private:
  ReduceOp op_;
  bool keepdims_, noop_empty_;
  Dims axes_;
};

// ---- op table ----
enum class Kind { Binary, Unary, MatMul, Gemm, Conv, Softmax, LogSoftmax, LayerNorm, Transpose, Reduce };
struct OpInfo {
  Kind kind;
  int code;        // BinaryOp / UnaryOp / ReduceOp
  int min_opset;   // first opset with these semantics
  int axes_input;  // Reduce: first opset where axes is an input
};

const std::map<std::string, OpInfo>& op_table() {
  static const std::map<std::string, OpInfo> t = {
      {"Add", {Kind::Binary, static_cast<int>(BinaryOp::Add), 7, 0}},
      {"Sub", {Kind::Binary, static_cast<int>(BinaryOp::Sub), 7, 0}},
      {"Mul", {Kind::Binary, static_cast<int>(BinaryOp::Mul), 7, 0}},
      {"Div", {Kind::Binary, static_cast<int>(BinaryOp::Div), 7, 0}},
      {"Pow", {Kind::Binary, static_cast<int>(BinaryOp::Pow), 7, 0}},
      {"Relu", {Kind::Unary, static_cast<int>(UnaryOp::Relu), 6, 0}},
      {"Sigmoid", {Kind::Unary, static_cast<int>(UnaryOp::Sigmoid), 6, 0}},
      {"Tanh", {Kind::Unary, static_cast<int>(UnaryOp::Tanh), 6, 0}},
      {"Erf", {Kind::Unary, static_cast<int>(UnaryOp::Erf), 9, 0}},
      {"Gelu", {Kind::Unary, static_cast<int>(UnaryOp::Gelu), 20, 0}},
      {"Exp", {Kind::Unary, static_cast<int>(UnaryOp::Exp), 6, 0}},
      {"Log", {Kind::Unary, static_cast<int>(UnaryOp::Log), 6, 0}},
      {"Sqrt", {Kind::Unary, static_cast<int>(UnaryOp::Sqrt), 6, 0}},
      {"Neg", {Kind::Unary, static_cast<int>(UnaryOp::Neg), 6, 0}},
      {"Abs", {Kind::Unary, static_cast<int>(UnaryOp::Abs), 6, 0}},
      {"LeakyRelu", {Kind::Unary, static_cast<int>(UnaryOp::LeakyRelu), 6, 0}},
      {"MatMul", {Kind::MatMul, 0, 1, 0}},
      {"Gemm", {Kind::Gemm, 0, 7, 0}},
      {"Conv", {Kind::Conv, 0, 1, 0}},
      {"Softmax", {Kind::Softmax, 0, 1, 0}},
      {"LogSoftmax", {Kind::LogSoftmax, 0, 1, 0}},
      {"LayerNormalization", {Kind::LayerNorm, 0, 17, 0}},
      {"Transpose", {Kind::Transpose, 0, 1, 0}},
      {"ReduceSum", {Kind::Reduce, static_cast<int>(ReduceOp::Sum), 1, 13}},
      {"ReduceMean", {Kind::Reduce, static_cast<int>(ReduceOp::Mean), 1, 18}},
      {"ReduceMax", {Kind::Reduce, static_cast<int>(ReduceOp::Max), 1, 18}},
      {"ReduceMin", {Kind::Reduce, static_cast<int>(ReduceOp::Min), 1, 18}},
  };
  return t;
}

}  // namespace

std::string check_node(const MrtEpNode& node) {
  if (node.domain && node.domain[0] != '\0') return "domain " + std::string(node.domain) + " is not supported";
  auto it = op_table().find(node.op_type);
  if (it == op_table().end()) return "op is not implemented by the CUDA EP";
  const OpInfo& info = it->second;
  if (node.opset < info.min_opset) return "opset " + std::to_string(node.opset) + " is too old";
  for (size_t i = 0; i < node.input_count; ++i) {
    const MrtEpValue& v = node.inputs[i];
    if (!has_input(node, i)) continue;
    const bool axes = info.kind == Kind::Reduce && i == 1;
    if (axes) {
      if (!v.constant_value) return "Reduce axes must be a constant input";
      if (v.constant_value->elem_type != kInt64) return "Reduce axes must be int64";
      continue;
    }
    // 0 = not inferred by the core; a non-float tensor then fails in Compute with a clear message.
    if (v.elem_type != kFloat && v.elem_type != 0) return "input " + std::to_string(i) + " is not float32";
    if (v.rank > kMaxRank && info.kind != Kind::MatMul) return "rank above 8";
  }
  for (size_t i = 0; i < node.output_count; ++i)
    if (node.outputs[i].name && node.outputs[i].name[0] && node.outputs[i].elem_type != kFloat &&
        node.outputs[i].elem_type != 0)
      return "output " + std::to_string(i) + " is not float32";
  switch (info.kind) {
    case Kind::Conv: {
      if (node.input_count < 2) return "Conv needs X and W";
      const int64_t wr = node.inputs[1].rank;
      if (wr != 3 && wr != 4) return "only 1-D and 2-D Conv (W rank 3 or 4; rank must be known)";
      const std::string pad = attr_string(node, "auto_pad", "NOTSET");
      if (pad != "NOTSET" && pad != "VALID" && pad != "SAME_UPPER" && pad != "SAME_LOWER")
        return "auto_pad " + pad + " is not supported";
      break;
    }
    case Kind::Unary:
      if (std::strcmp(node.op_type, "Gelu") == 0) {
        const std::string ap = attr_string(node, "approximate", "none");
        if (ap != "none" && ap != "tanh") return "Gelu approximate=" + ap + " is not supported";
      }
      break;
    case Kind::Binary:
      if (node.input_count != 2) return "binary op needs 2 inputs";
      break;
    default:
      break;
  }
  return "";
}

std::unique_ptr<Kernel> create_kernel(const MrtEpNode& node, CudaState& st) {
  const std::string why = check_node(node);
  if (!why.empty()) fail(MRT_NOT_IMPLEMENTED, "CUDA EP: cannot run " + std::string(node.op_type) + ": " + why);
  const OpInfo& info = op_table().at(node.op_type);
  std::unique_ptr<Kernel> k;
  switch (info.kind) {
    case Kind::Binary:
      k = std::make_unique<BinaryKernel>(static_cast<BinaryOp>(info.code), node.op_type);
      break;
    case Kind::Unary: {
      UnaryOp op = static_cast<UnaryOp>(info.code);
      if (op == UnaryOp::Gelu && attr_string(node, "approximate", "none") == "tanh") op = UnaryOp::GeluTanh;
      k = std::make_unique<UnaryKernel>(op, attr_float(node, "alpha", 0.01f));
      break;
    }
    case Kind::MatMul: k = std::make_unique<MatMulKernel>(); break;
    case Kind::Gemm: k = std::make_unique<GemmKernel>(node); break;
    case Kind::Conv: k = std::make_unique<ConvKernel>(node); break;
    case Kind::Softmax: k = std::make_unique<SoftmaxKernel>(node, false); break;
    case Kind::LogSoftmax: k = std::make_unique<SoftmaxKernel>(node, true); break;
    case Kind::LayerNorm: k = std::make_unique<LayerNormKernel>(node); break;
    case Kind::Transpose: k = std::make_unique<TransposeKernel>(node); break;
    case Kind::Reduce: {
      Dims axes;
      if (find_attr(node, "axes"))
        axes = attr_ints(node, "axes");
      else if (has_input(node, 1))
        axes = constant_int64s(*node.inputs[1].constant_value);
      k = std::make_unique<ReduceKernel>(node, static_cast<ReduceOp>(info.code), std::move(axes));
      break;
    }
  }
  // Constant float inputs (weights) move to the device once, for the kernel's life.
  k->constants.resize(node.input_count);
  for (size_t i = 0; i < node.input_count; ++i) {
    const MrtEpTensor* c = has_input(node, i) ? node.inputs[i].constant_value : nullptr;
    if (!c || c->elem_type != kFloat) continue;
    auto dc = std::make_unique<DeviceConstant>();
    dc->dims.assign(c->dims, c->dims + c->rank);
    const size_t bytes = static_cast<size_t>(numel(dc->dims)) * sizeof(float);
    if (bytes != c->data_bytes) fail(MRT_INVALID_MODEL, "CUDA EP: constant input has an inconsistent size");
    if (bytes > 0) {
      MRT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&dc->data), bytes));
      MRT_CUDA_CHECK(cudaMemcpyAsync(dc->data, c->data, bytes, cudaMemcpyHostToDevice, st.stream));
    }
    k->constants[i] = std::move(dc);
  }
  MRT_CUDA_CHECK(cudaStreamSynchronize(st.stream));
  return k;
}

}  // namespace mrt_cuda
