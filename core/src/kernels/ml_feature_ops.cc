// ai.onnx.ml feature operators: Binarizer (x > threshold -> 1 else 0, in x's type) and
// ArrayFeatureExtractor (gathers indices along the last axis; a 1-D input gives a
// [1, count] output, as onnxruntime does).
#include <cstring>

#include "norm_util.h"

namespace mrt {
namespace {

void binarizer_kernel(OpContext& ctx) {
  const Tensor& X = ctx.input(0);
  const double th = ctx.node().attr_float("threshold", 0.f);
  Tensor& Y = ctx.output(0, X.dtype(), X.shape());
  MRT_DISPATCH_NUMERIC(X.dtype(), "Binarizer", {
    const T* x = X.data<T>();
    T* y = Y.data<T>();
    for (int64_t i = 0; i < X.numel(); ++i) y[i] = static_cast<double>(x[i]) > th ? T(1) : T(0);
  });
}

void array_feature_extractor_kernel(OpContext& ctx) {
  const Tensor& X = ctx.input(0);
  const Tensor& I = ctx.input(1);
  MRT_CHECK_ARG(X.rank() >= 1, "ArrayFeatureExtractor: input must have rank >= 1, got ", X.describe());
  const int64_t last = X.dim(X.rank() - 1);
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < I.numel(); ++i) {
    const int64_t v = I.int_at(i);
    MRT_CHECK_ARG(v >= 0 && v < last, "ArrayFeatureExtractor: index ", v, " is outside [0, ", last, ")");
    idx.push_back(v);
  }
  Shape out = X.rank() == 1 ? Shape{1, static_cast<int64_t>(idx.size())} : X.shape();
  out.back() = static_cast<int64_t>(idx.size());
  Tensor& Y = ctx.output(0, X.dtype(), out);
  const int64_t rows = X.numel() / std::max<int64_t>(last, 1);
  const size_t esz = dtype_size(X.dtype());
  MRT_CHECK_IMPL(esz > 0, "ArrayFeatureExtractor: element type ", dtype_name(X.dtype()), " is not supported");
  for (int64_t r = 0; r < rows; ++r)
    for (size_t j = 0; j < idx.size(); ++j)
      std::memcpy(static_cast<char*>(Y.raw()) + (static_cast<size_t>(r) * idx.size() + j) * esz,
                  static_cast<const char*>(X.raw()) + static_cast<size_t>(r * last + idx[j]) * esz, esz);
}

}  // namespace

void register_ml_feature_kernels(KernelRegistry& r) {
  r.add_domain("ai.onnx.ml", "Binarizer", 1, binarizer_kernel);
  r.add_domain("ai.onnx.ml", "ArrayFeatureExtractor", 1, array_feature_extractor_kernel);
}

}  // namespace mrt
