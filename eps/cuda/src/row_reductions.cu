// Row-wise device kernels of the CUDA EP: Softmax/LogSoftmax, LayerNormalization and the
// Reduce* ops (after the host moved the reduced axes last). One thread block per row.
#include <cfloat>

#include "device_kernels.h"

namespace mrt_cuda {
namespace {

struct SumF {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct MaxF {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct MinF {
  __device__ float operator()(float a, float b) const { return fminf(a, b); }
};

// Reduces v over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
template <class F>
__device__ float block_reduce(float v, F f, float identity) {
  __shared__ float partial[32];
  for (int o = 16; o > 0; o >>= 1) v = f(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  v = lane < warps ? partial[lane] : identity;
  for (int o = 16; o > 0; o >>= 1) v = f(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();  // partial[] is reused by the next call
  return v;
}

inline int block_for(int64_t cols) {
  int b = 32;
  while (b < 256 && b < cols) b <<= 1;
  return b;
}
inline unsigned grid_rows(int64_t rows) { return static_cast<unsigned>(rows < (1 << 20) ? rows : (1 << 20)); }

__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t len,
                             bool log_out) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * len;
    float* yr = y + r * len;
    float m = -FLT_MAX;
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) m = fmaxf(m, xr[i]);
    m = block_reduce(m, MaxF{}, -FLT_MAX);
    float s = 0.f;
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) s += expf(xr[i] - m);
    s = block_reduce(s, SumF{}, 0.f);
    if (log_out) {
      const float ls = logf(s);
      for (int64_t i = threadIdx.x; i < len; i += blockDim.x) yr[i] = xr[i] - m - ls;
    } else {
      const float inv = 1.f / s;
      for (int64_t i = threadIdx.x; i < len; i += blockDim.x) yr[i] = expf(xr[i] - m) * inv;
    }
  }
}

// Softmax along a middle axis: one thread per (outer, inner) column.
__global__ void softmax_strided(const float* __restrict__ x, float* __restrict__ y, int64_t outer, int64_t len,
                                int64_t inner, bool log_out) {
  const int64_t n = outer * inner;
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < n;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = c / inner, in = c % inner;
    const float* xc = x + o * len * inner + in;
    float* yc = y + o * len * inner + in;
    float m = -FLT_MAX;
    for (int64_t i = 0; i < len; ++i) m = fmaxf(m, xc[i * inner]);
    float s = 0.f;
    for (int64_t i = 0; i < len; ++i) s += expf(xc[i * inner] - m);
    if (log_out) {
      const float ls = logf(s);
      for (int64_t i = 0; i < len; ++i) yc[i * inner] = xc[i * inner] - m - ls;
    } else {
      const float inv = 1.f / s;
      for (int64_t i = 0; i < len; ++i) yc[i * inner] = expf(xc[i * inner] - m) * inv;
    }
  }
}

__global__ void layer_norm_rows(const float* __restrict__ x, const float* __restrict__ scale,
                                const float* __restrict__ bias, float* __restrict__ y, float* __restrict__ mean_out,
                                float* __restrict__ inv_std_out, int64_t rows, int64_t cols, float epsilon) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float s = 0.f;
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) s += xr[i];
    const float mean = block_reduce(s, SumF{}, 0.f) / static_cast<float>(cols);
    float v = 0.f;
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
      const float d = xr[i] - mean;
      v += d * d;
    }
    const float var = block_reduce(v, SumF{}, 0.f) / static_cast<float>(cols);
    const float inv_std = rsqrtf(var + epsilon);
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
      float o = (xr[i] - mean) * inv_std * scale[i];
      if (bias) o += bias[i];
      yr[i] = o;
    }
    if (threadIdx.x == 0) {
      if (mean_out) mean_out[r] = mean;
      if (inv_std_out) inv_std_out[r] = inv_std;
    }
  }
}

template <ReduceOp Op>
__global__ void reduce_rows(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t cols) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * cols;
    float acc;
    if constexpr (Op == ReduceOp::Max) {
      acc = -INFINITY;
      for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) acc = fmaxf(acc, xr[i]);
      acc = block_reduce(acc, MaxF{}, -INFINITY);
    } else if constexpr (Op == ReduceOp::Min) {
      acc = INFINITY;
      for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) acc = fminf(acc, xr[i]);
      acc = block_reduce(acc, MinF{}, INFINITY);
    } else {
      acc = 0.f;
      for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) acc += xr[i];
      acc = block_reduce(acc, SumF{}, 0.f);
      if constexpr (Op == ReduceOp::Mean) acc /= static_cast<float>(cols);
    }
    if (threadIdx.x == 0) y[r] = acc;
  }
}

}  // namespace

void launch_softmax(const float* x, float* y, int64_t outer, int64_t len, int64_t inner, bool log,
                    cudaStream_t stream) {
  if (outer <= 0 || len <= 0 || inner <= 0) return;
  if (inner == 1) {
    softmax_rows<<<grid_rows(outer), block_for(len), 0, stream>>>(x, y, outer, len, log);
  } else {
    const int64_t n = outer * inner;
    int64_t blocks = (n + 255) / 256;
    if (blocks > 65536) blocks = 65536;
    softmax_strided<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(x, y, outer, len, inner, log);
  }
}

void launch_layer_norm(const float* x, const float* scale, const float* bias, float* y, float* mean, float* inv_std,
                       int64_t rows, int64_t cols, float epsilon, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  layer_norm_rows<<<grid_rows(rows), block_for(cols), 0, stream>>>(x, scale, bias, y, mean, inv_std, rows, cols,
                                                                   epsilon);
}

void launch_reduce_rows(ReduceOp op, const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows <= 0) return;
  const unsigned g = grid_rows(rows);
  const int b = block_for(cols);
  switch (op) {
    case ReduceOp::Sum: reduce_rows<ReduceOp::Sum><<<g, b, 0, stream>>>(x, y, rows, cols); return;
    case ReduceOp::Mean: reduce_rows<ReduceOp::Mean><<<g, b, 0, stream>>>(x, y, rows, cols); return;
    case ReduceOp::Max: reduce_rows<ReduceOp::Max><<<g, b, 0, stream>>>(x, y, rows, cols); return;
    case ReduceOp::Min: reduce_rows<ReduceOp::Min><<<g, b, 0, stream>>>(x, y, rows, cols); return;
  }
}

}  // namespace mrt_cuda
