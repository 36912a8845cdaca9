// im2col for the CUDA EP's convolution (implicit GEMM through cuBLAS).
#include "device_kernels.h"

namespace mrt_cuda {
namespace {

__global__ void im2col_kernel(const float* __restrict__ x, float* __restrict__ col, int64_t n, int64_t height,
                              int64_t width, int64_t kh, int64_t kw, int64_t pad_t, int64_t pad_l, int64_t stride_h,
                              int64_t stride_w, int64_t dil_h, int64_t dil_w, int64_t out_h, int64_t out_w) {
  // One thread per col element: row = (c, i, j) kernel tap, column = output pixel.
  const int64_t out_hw = out_h * out_w;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t p = idx % out_hw;
    const int64_t row = idx / out_hw;
    const int64_t j = row % kw;
    const int64_t i = (row / kw) % kh;
    const int64_t c = row / (kw * kh);
    const int64_t oy = p / out_w, ox = p % out_w;
    const int64_t iy = oy * stride_h - pad_t + i * dil_h;
    const int64_t ix = ox * stride_w - pad_l + j * dil_w;
    col[idx] = (iy >= 0 && iy < height && ix >= 0 && ix < width) ? x[(c * height + iy) * width + ix] : 0.f;
  }
}

}  // namespace

void launch_im2col(const float* x, float* col, int64_t channels, int64_t height, int64_t width, int64_t kh,
                   int64_t kw, int64_t pad_t, int64_t pad_l, int64_t stride_h, int64_t stride_w, int64_t dil_h,
                   int64_t dil_w, int64_t out_h, int64_t out_w, cudaStream_t stream) {
  const int64_t n = channels * kh * kw * out_h * out_w;
  if (n <= 0) return;
  int64_t blocks = (n + 255) / 256;
  if (blocks > 65536) blocks = 65536;
  im2col_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(x, col, n, height, width, kh, kw, pad_t, pad_l,
                                                                    stride_h, stride_w, dil_h, dil_w, out_h, out_w);
}

}  // namespace mrt_cuda
