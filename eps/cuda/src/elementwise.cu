// Elementwise device kernels of the CUDA EP: binary ops with broadcasting, unary activations,
// strided gather copies (broadcast / transpose), per-channel bias.
#include "device_kernels.h"

namespace mrt_cuda {
namespace {

constexpr int kBlock = 256;

inline unsigned grid_for(int64_t n) {
  int64_t blocks = (n + kBlock - 1) / kBlock;
  return static_cast<unsigned>(blocks < 65536 ? blocks : 65536);  // grid-stride loops cover the rest
}

struct Offsets {
  int64_t a, b;
};

__device__ __forceinline__ Offsets map_index(const IndexMap& m, int64_t i) {
  Offsets o{0, 0};
  for (int d = m.rank - 1; d >= 0; --d) {
    const int64_t dim = m.dims[d];
    const int64_t q = i / dim;
    const int64_t r = i - q * dim;
    o.a += r * m.stride_a[d];
    o.b += r * m.stride_b[d];
    i = q;
  }
  return o;
}

template <BinaryOp Op>
__device__ __forceinline__ float apply_binary(float a, float b) {
  if constexpr (Op == BinaryOp::Add) return a + b;
  if constexpr (Op == BinaryOp::Sub) return a - b;
  if constexpr (Op == BinaryOp::Mul) return a * b;
  if constexpr (Op == BinaryOp::Div) return a / b;
  if constexpr (Op == BinaryOp::Pow) return powf(a, b);
  if constexpr (Op == BinaryOp::Max) return fmaxf(a, b);
  if constexpr (Op == BinaryOp::Min) return fminf(a, b);
  return 0.f;
}

template <BinaryOp Op>
__global__ void binary_same(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ y,
                            int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = apply_binary<Op>(a[i], b[i]);
}

template <BinaryOp Op>
__global__ void binary_mapped(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ y,
                              int64_t n, IndexMap m) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const Offsets o = map_index(m, i);
    y[i] = apply_binary<Op>(a[o.a], b[o.b]);
  }
}

template <BinaryOp Op>
void binary_launch(const float* a, const float* b, float* y, int64_t n, const IndexMap* m, cudaStream_t s) {
  if (m == nullptr)
    binary_same<Op><<<grid_for(n), kBlock, 0, s>>>(a, b, y, n);
  else
    binary_mapped<Op><<<grid_for(n), kBlock, 0, s>>>(a, b, y, n, *m);
}

__device__ __forceinline__ float gelu_tanh(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2/pi)
  return 0.5f * x * (1.f + tanhf(k * (x + 0.044715f * x * x * x)));
}

template <UnaryOp Op>
__device__ __forceinline__ float apply_unary(float x, float alpha) {
  if constexpr (Op == UnaryOp::Relu) return x > 0.f ? x : 0.f;
  if constexpr (Op == UnaryOp::Sigmoid) return 1.f / (1.f + expf(-x));
  if constexpr (Op == UnaryOp::Tanh) return tanhf(x);
  if constexpr (Op == UnaryOp::Erf) return erff(x);
  if constexpr (Op == UnaryOp::Gelu) return 0.5f * x * (1.f + erff(x * 0.7071067811865476f));
  if constexpr (Op == UnaryOp::GeluTanh) return gelu_tanh(x);
  if constexpr (Op == UnaryOp::Exp) return expf(x);
  if constexpr (Op == UnaryOp::Log) return logf(x);
  if constexpr (Op == UnaryOp::Sqrt) return sqrtf(x);
  if constexpr (Op == UnaryOp::Neg) return -x;
  if constexpr (Op == UnaryOp::Abs) return fabsf(x);
  if constexpr (Op == UnaryOp::LeakyRelu) return x >= 0.f ? x : alpha * x;
  return x;
}

template <UnaryOp Op>
__global__ void unary_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n, float alpha) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = apply_unary<Op>(x[i], alpha);
}

__global__ void gather_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n, IndexMap m) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = x[map_index(m, i).a];
}

__global__ void channel_bias_kernel(float* __restrict__ y, const float* __restrict__ bias, int64_t n,
                                    int64_t channels, int64_t inner) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] += bias[(i / inner) % channels];
}

}  // namespace

void launch_binary(BinaryOp op, const float* a, const float* b, float* y, int64_t n, const IndexMap* map,
                   cudaStream_t stream) {
  if (n <= 0) return;
  switch (op) {
    case BinaryOp::Add: return binary_launch<BinaryOp::Add>(a, b, y, n, map, stream);
    case BinaryOp::Sub: return binary_launch<BinaryOp::Sub>(a, b, y, n, map, stream);
    case BinaryOp::Mul: return binary_launch<BinaryOp::Mul>(a, b, y, n, map, stream);
    case BinaryOp::Div: return binary_launch<BinaryOp::Div>(a, b, y, n, map, stream);
    case BinaryOp::Pow: return binary_launch<BinaryOp::Pow>(a, b, y, n, map, stream);
    case BinaryOp::Max: return binary_launch<BinaryOp::Max>(a, b, y, n, map, stream);
    case BinaryOp::Min: return binary_launch<BinaryOp::Min>(a, b, y, n, map, stream);
  }
}

void launch_unary(UnaryOp op, float alpha, const float* x, float* y, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  const unsigned g = grid_for(n);
  switch (op) {
#define MRT_UNARY_CASE(OP) \
  case UnaryOp::OP: unary_kernel<UnaryOp::OP><<<g, kBlock, 0, s>>>(x, y, n, alpha); return;
    MRT_UNARY_CASE(Relu)
    MRT_UNARY_CASE(Sigmoid)
    MRT_UNARY_CASE(Tanh)
    MRT_UNARY_CASE(Erf)
    MRT_UNARY_CASE(Gelu)
    MRT_UNARY_CASE(GeluTanh)
    MRT_UNARY_CASE(Exp)
    MRT_UNARY_CASE(Log)
    MRT_UNARY_CASE(Sqrt)
    MRT_UNARY_CASE(Neg)
    MRT_UNARY_CASE(Abs)
    MRT_UNARY_CASE(LeakyRelu)
    MRT_UNARY_CASE(Identity)
#undef MRT_UNARY_CASE
  }
}

void launch_gather_copy(const float* x, float* y, int64_t n, const IndexMap& map, cudaStream_t stream) {
  if (n <= 0) return;
  gather_kernel<<<grid_for(n), kBlock, 0, stream>>>(x, y, n, map);
}

void launch_add_channel_bias(float* y, const float* bias, int64_t batch, int64_t channels, int64_t inner,
                             cudaStream_t stream) {
  const int64_t n = batch * channels * inner;
  if (n <= 0) return;
  channel_bias_kernel<<<grid_for(n), kBlock, 0, stream>>>(y, bias, n, channels, inner);
}

}  // namespace mrt_cuda
