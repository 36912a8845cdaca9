// Launchers of the CUDA EP's device kernels (implemented in the .cu files). Plain C++
// declarations so host-side op code compiles with the host compiler. All launches are
// asynchronous on `stream`; element counts of 0 launch nothing.
#ifndef MOSAICRT_EP_CUDA_DEVICE_KERNELS_H_
#define MOSAICRT_EP_CUDA_DEVICE_KERNELS_H_

#include <cuda_runtime.h>

#include <cstdint>

namespace mrt_cuda {

constexpr int kMaxRank = 8;

// Maps a linear index of an output of shape `dims` to offsets in up to two inputs
// (stride 0 on broadcast dimensions). Dimensions are merged/trimmed by the host before launch.
struct IndexMap {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t stride_a[kMaxRank] = {};
  int64_t stride_b[kMaxRank] = {};
};

enum class BinaryOp : int { Add, Sub, Mul, Div, Pow, Max, Min };
enum class UnaryOp : int { Relu, Sigmoid, Tanh, Erf, Gelu, GeluTanh, Exp, Log, Sqrt, Neg, Abs, LeakyRelu, Identity };
enum class ReduceOp : int { Sum, Mean, Max, Min };

// y[i] = a[map.a(i)] op b[map.b(i)]; `map` null means a, b, y share one shape.
void launch_binary(BinaryOp op, const float* a, const float* b, float* y, int64_t n, const IndexMap* map,
                   cudaStream_t stream);
void launch_unary(UnaryOp op, float alpha, const float* x, float* y, int64_t n, cudaStream_t stream);
// y[i] = x[map.a(i)]: broadcast (Expand/Gemm C) and transpose (permuted strides).
void launch_gather_copy(const float* x, float* y, int64_t n, const IndexMap& map, cudaStream_t stream);

// Softmax / LogSoftmax over `len` elements spaced `inner` apart, for outer*inner rows.
void launch_softmax(const float* x, float* y, int64_t outer, int64_t len, int64_t inner, bool log,
                    cudaStream_t stream);
// LayerNormalization over the last `cols` of `rows` rows; bias, mean and inv_std may be null.
void launch_layer_norm(const float* x, const float* scale, const float* bias, float* y, float* mean, float* inv_std,
                       int64_t rows, int64_t cols, float epsilon, cudaStream_t stream);
// y[r] = reduce(x[r * cols .. r * cols + cols)).
void launch_reduce_rows(ReduceOp op, const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream);

// im2col of one image x[C][H][W] into col[C*kh*kw][out_h*out_w].
void launch_im2col(const float* x, float* col, int64_t channels, int64_t height, int64_t width, int64_t kh,
                   int64_t kw, int64_t pad_t, int64_t pad_l, int64_t stride_h, int64_t stride_w, int64_t dil_h,
                   int64_t dil_w, int64_t out_h, int64_t out_w, cudaStream_t stream);
// y[n][c][i] += bias[c] for y of shape [batch][channels][inner].
void launch_add_channel_bias(float* y, const float* bias, int64_t batch, int64_t channels, int64_t inner,
                             cudaStream_t stream);

}  // namespace mrt_cuda

#endif  // MOSAICRT_EP_CUDA_DEVICE_KERNELS_H_
