// AffineGrid (opset 20): the sampling grid of a batch of 2-D ([N, 2, 3]) or 3-D
// ([N, 3, 4]) affine matrices over an evenly spaced [-1, 1] grid of `size`
// ([N, C, H, W] or [N, C, D, H, W]); align_corners puts the end points on the corner
// pixel centres. Output [N, H, W, 2] or [N, D, H, W, 3], coordinates ordered x, y(, z).
#include "norm_util.h"

namespace mrt {
namespace {

void affine_grid_kernel(OpContext& ctx) {
  const Tensor& theta = ctx.input(0);
  const std::vector<int64_t> size = ctx.input(1).to_int64_vector();
  const bool align = ctx.node().attr_int("align_corners", 0) != 0;
  MRT_CHECK_ARG(size.size() == 4 || size.size() == 5, "AffineGrid: size must hold 4 or 5 values, got ", size.size());
  const size_t nd = size.size() - 2;
  const int64_t N = size[0];
  MRT_CHECK_ARG(theta.rank() == 3 && theta.dim(0) == N && theta.dim(1) == static_cast<int64_t>(nd) &&
                    theta.dim(2) == static_cast<int64_t>(nd) + 1,
                "AffineGrid: theta ", theta.describe(), " must be [", N, ",", nd, ",", nd + 1, "] for size ",
                shape_str(size));
  std::vector<int64_t> dims(size.begin() + 2, size.end());  // (D,) H, W
  auto base = [&](int64_t i, int64_t len) {
    if (len <= 1) return 0.0;
    return align ? -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(len - 1)
                 : (2.0 * static_cast<double>(i) + 1.0) / static_cast<double>(len) - 1.0;
  };
  const std::vector<double> t = norm::to_doubles(theta, "AffineGrid theta");
  // The output first: shape_size refuses negative or overflowing sizes, and allocating it applies
  // the tensor size limit before the scratch below is sized from it.
  Shape shape{N};
  shape.insert(shape.end(), dims.begin(), dims.end());
  shape.push_back(static_cast<int64_t>(nd));
  Tensor& Y = ctx.output(0, theta.dtype(), shape);
  const int64_t points = shape_size(dims);
  std::vector<double> out(static_cast<size_t>(Y.numel()));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t p = 0; p < points; ++p) {
      double coord[3];  // x, y, z
      int64_t rem = p;
      for (size_t d = nd; d-- > 0;) {
        const int64_t idx = rem % dims[d];
        rem /= dims[d];
        coord[nd - 1 - d] = base(idx, dims[d]);  // innermost (W) is x
      }
      const double* th = &t[static_cast<size_t>(n * static_cast<int64_t>(nd * (nd + 1)))];
      for (size_t r = 0; r < nd; ++r) {
        double v = th[r * (nd + 1) + nd];
        for (size_t c = 0; c < nd; ++c) v += th[r * (nd + 1) + c] * coord[c];
        out[static_cast<size_t>((n * points + p) * static_cast<int64_t>(nd)) + r] = v;
      }
    }
  norm::from_doubles(Y, out);
}

// SwiGLU (opset 28): Y = A * sigmoid(alpha * A) * B, A and B of one shape.
void swiglu_kernel(OpContext& ctx) {
  const Tensor& A = ctx.input(0);
  const Tensor& B = ctx.input(1);
  MRT_CHECK_ARG(A.shape() == B.shape() && A.dtype() == B.dtype(), "SwiGLU: A ", A.describe(), " and B ", B.describe(),
                " must have the same shape and element type");
  const double alpha = ctx.node().attr_float("alpha", 1.f);
  Tensor& Y = ctx.output(0, A.dtype(), A.shape());
  MRT_NORM_DISPATCH(A.dtype(), "SwiGLU", {
    using C = norm::Acc<T>;
    const T* a = A.data<T>();
    const T* b = B.data<T>();
    T* y = Y.data<T>();
    const C al = static_cast<C>(alpha);
    ctx.threads().parallel_for(A.numel(), 4096, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) {
        const C av = norm::load(a[i]);
        y[i] = norm::store<T>(av / (C(1) + std::exp(-al * av)) * norm::load(b[i]));
      }
    });
  });
}

// Det (opset 11): determinants of the trailing square matrices, by LU with partial pivoting.
void det_kernel(OpContext& ctx) {
  const Tensor& X = ctx.input(0);
  MRT_CHECK_ARG(X.rank() >= 2 && X.dim(X.rank() - 1) == X.dim(X.rank() - 2), "Det: input ", X.describe(),
                " must end in a square matrix");
  const int64_t n = X.dim(X.rank() - 1);
  const int64_t batch = n ? X.numel() / (n * n) : norm::prod(X.shape(), 0, X.rank() - 2);
  const std::vector<double> x = norm::to_doubles(X, "Det input");
  std::vector<double> out(static_cast<size_t>(batch));
  std::vector<double> m(static_cast<size_t>(n * n));
  for (int64_t b = 0; b < batch; ++b) {
    std::copy(x.begin() + b * n * n, x.begin() + (b + 1) * n * n, m.begin());
    double det = 1;
    for (int64_t c = 0; c < n && det != 0; ++c) {
      int64_t piv = c;
      for (int64_t r = c + 1; r < n; ++r)
        if (std::fabs(m[r * n + c]) > std::fabs(m[piv * n + c])) piv = r;
      if (m[piv * n + c] == 0) { det = 0; break; }
      if (piv != c) {
        for (int64_t k = 0; k < n; ++k) std::swap(m[c * n + k], m[piv * n + k]);
        det = -det;
      }
      det *= m[c * n + c];
      for (int64_t r = c + 1; r < n; ++r) {
        const double f = m[r * n + c] / m[c * n + c];
        for (int64_t k = c; k < n; ++k) m[r * n + k] -= f * m[c * n + k];
      }
    }
    out[static_cast<size_t>(b)] = det;
  }
  Tensor& Y = ctx.output(0, X.dtype(), Shape(X.shape().begin(), X.shape().end() - 2));
  norm::from_doubles(Y, out);
}

}  // namespace

void register_affine_grid_kernels(KernelRegistry& r) {
  r.add("AffineGrid", 20, affine_grid_kernel);
  r.add("SwiGLU", 28, swiglu_kernel);
  r.add("Det", 11, det_kernel);
}

}  // namespace mrt
