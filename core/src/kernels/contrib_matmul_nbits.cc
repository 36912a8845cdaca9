// com.microsoft MatMulNBits: Y = A * dequant(B)^T (+ bias) with B's N x K weights stored
// block-wise in `bits` (2, 4 or 8) bit integers: B is [N, K / block_size, block_size *
// bits / 8] uint8, element k of a block in the low bits first; scales [N * blocks];
// zero_points either packed like B ([N * ceil(blocks * bits / 8)]) or one per block in
// the scales' type; absent means 2^(bits - 1). The weights are dequantized a panel of
// columns at a time into a small buffer that one SGEMM consumes, so no float copy of the
// whole matrix is made. g_idx (act-order) is refused at session creation.
#include <algorithm>
#include <cmath>
#include <vector>

#include "../gemm/sgemm.h"
#include "norm_util.h"

namespace mrt {
namespace {

void nbits_check(const Node& n, int64_t) {
  const int64_t bits = n.attr_int("bits", 4);
  MRT_ENFORCE(bits == 2 || bits == 4 || bits == 8, MRT_NOT_IMPLEMENTED, n.label(), ": bits=", bits,
              " is not supported (2, 4 and 8 are)");
  const int64_t bs = n.attr_int("block_size", 0);
  MRT_ENFORCE(bs >= 16 && (bs & (bs - 1)) == 0, MRT_INVALID_MODEL, n.label(),
              ": block_size must be a power of two >= 16, got ", bs);
  MRT_ENFORCE(n.attr_int("K", 0) > 0 && n.attr_int("N", 0) > 0, MRT_INVALID_MODEL, n.label(),
              ": attributes K and N must be positive, got ", n.attr_int("K", 0), " and ", n.attr_int("N", 0));
  MRT_ENFORCE(n.inputs.size() <= 4 || n.inputs[4].empty(), MRT_NOT_IMPLEMENTED, n.label(),
              ": g_idx (act-order quantization) is not supported");
}

void nbits_kernel(OpContext& ctx) {
  const Node& n = ctx.node();
  const Tensor& A = ctx.input(0);
  const Tensor& B = ctx.input(1);
  const Tensor& S = ctx.input(2);
  const Tensor* Z = ctx.optional_input(3);
  const Tensor* bias = ctx.optional_input(5);
  const int64_t K = n.attr_int("K", 0), N = n.attr_int("N", 0), bits = n.attr_int("bits", 4);
  const int64_t bs = n.attr_int("block_size", 0);
  const int64_t blocks = (K + bs - 1) / bs, blob = bs * bits / 8;
  MRT_CHECK_IMPL(A.dtype() == DType::kFloat, "MatMulNBits: only float32 activations are supported, got ",
                 A.describe());
  MRT_CHECK_ARG(A.rank() >= 1 && A.dim(A.rank() - 1) == K, "MatMulNBits: A ", A.describe(), " must end in K=", K);
  MRT_CHECK_ARG(B.dtype() == DType::kUInt8 && B.numel() == N * blocks * blob, "MatMulNBits: B ", B.describe(),
                " must hold ", N, "x", blocks, "x", blob, " uint8");
  MRT_CHECK_ARG(S.numel() == N * blocks, "MatMulNBits: scales ", S.describe(), " must hold ", N * blocks, " values");
  const std::vector<double> scales = norm::to_doubles(S, "MatMulNBits scales");
  std::vector<float> zps(static_cast<size_t>(N * blocks), static_cast<float>(1 << (bits - 1)));
  if (Z) {
    if (Z->dtype() == DType::kUInt8) {
      const int64_t per_row = (blocks * bits + 7) / 8;
      MRT_CHECK_ARG(Z->numel() == N * per_row, "MatMulNBits: packed zero_points ", Z->describe(), " must hold ",
                    N * per_row, " bytes");
      const uint8_t* z = Z->data<uint8_t>();
      const int per_byte = static_cast<int>(8 / bits);
      for (int64_t c = 0; c < N; ++c)
        for (int64_t b = 0; b < blocks; ++b) {
          const uint8_t byte = z[c * per_row + b / per_byte];
          zps[static_cast<size_t>(c * blocks + b)] =
              static_cast<float>((byte >> ((b % per_byte) * bits)) & ((1 << bits) - 1));
        }
    } else {
      MRT_CHECK_ARG(Z->numel() == N * blocks, "MatMulNBits: zero_points ", Z->describe(), " must hold ", N * blocks,
                    " values");
      const std::vector<double> z = norm::to_doubles(*Z, "MatMulNBits zero_points");
      for (size_t i = 0; i < zps.size(); ++i) zps[i] = static_cast<float>(z[i]);
    }
  }
  std::vector<float> bv;
  if (bias) {
    MRT_CHECK_ARG(bias->numel() == N, "MatMulNBits: bias ", bias->describe(), " must hold ", N, " values");
    const std::vector<double> b = norm::to_doubles(*bias, "MatMulNBits bias");
    bv.assign(b.begin(), b.end());
  }
  Shape out = A.shape();
  out.back() = N;
  Tensor& Y = ctx.output(0, DType::kFloat, out);
  const int64_t M = A.numel() / K;
  const float* a = A.data<float>();
  float* y = Y.data<float>();
  const uint8_t* w = B.data<uint8_t>();
  const int64_t panel = 64;  // columns dequantized per SGEMM
  std::vector<float> wt(static_cast<size_t>(panel * K));
  const int mask = (1 << bits) - 1;
  for (int64_t c0 = 0; c0 < N; c0 += panel) {
    const int64_t nc = std::min(panel, N - c0);
    for (int64_t c = 0; c < nc; ++c) {
      const int64_t col = c0 + c;
      float* dst = &wt[static_cast<size_t>(c * K)];
      for (int64_t b = 0; b < blocks; ++b) {
        const float sc = static_cast<float>(scales[static_cast<size_t>(col * blocks + b)]);
        const float zp = zps[static_cast<size_t>(col * blocks + b)];
        const uint8_t* src = w + (col * blocks + b) * blob;
        const int64_t kend = std::min(bs, K - b * bs);
        for (int64_t k = 0; k < kend; ++k) {
          const int64_t bit = k * bits;
          const int q = (src[bit / 8] >> (bit % 8)) & mask;
          dst[b * bs + k] = (static_cast<float>(q) - zp) * sc;
        }
      }
    }
    // Y[:, c0:c0+nc] = A[M, K] * wt[nc, K]^T
    sgemm(false, true, M, nc, K, 1.f, a, K, wt.data(), K, 0.f, y + c0, N, &ctx.threads());
  }
  if (!bv.empty())
    for (int64_t i = 0; i < M; ++i)
      for (int64_t c = 0; c < N; ++c) y[i * N + c] += bv[static_cast<size_t>(c)];
}

}  // namespace

void register_contrib_matmul_nbits_kernels(KernelRegistry& r) {
  r.add_domain("com.microsoft", "MatMulNBits", 1, nbits_kernel, nbits_check);
}

}  // namespace mrt
