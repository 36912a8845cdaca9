// Kernel group: nn — pooling (MaxPool, AveragePool, LpPool and their Global forms),
// MaxUnpool and Col2Im.
//
// Windowed pools promote 1-D/2-D inputs to 3-D (unit leading dims) and run one loop
// nest. Per spatial axis a table holds, for every output index, the range of kernel taps
// that land inside the input and how many taps land inside input + explicit padding
// (the AveragePool count_include_pad divisor; ceil_mode windows that run past the
// padding do not count the overhang).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "nn_geometry.h"

namespace mrt {
namespace {

using nn::AutoPad;
using nn::Window;

enum class PoolKind { kMax, kAverage, kLp };

struct AxisTable {
  std::vector<int64_t> start, lo, hi, padded;  // per output index
};

struct PoolPlan {
  Window g;  // promoted to 3 spatial dims
  int64_t planes = 0;
  Shape out_shape;
  AxisTable axis[3];
  bool count_include_pad = false;
  int storage_order = 0;
  double p = 2.0;
};

PoolPlan plan_pool(const OpContext& ctx, const Tensor& X, const char* op, bool allow_ceil) {
  const Node& node = ctx.node();
  MRT_CHECK_ARG(X.rank() >= 3, op, ": input X must have rank >= 3 (N, C, spatial...), got ", X.describe());
  const size_t nsp = X.rank() - 2;
  MRT_CHECK_IMPL(nsp <= 3, op, ": ", nsp, " spatial dimensions are not supported (at most 3)");
  PoolPlan p;
  Window& g = p.g;
  nn::read_window_attrs(node, nsp, op, g);
  g.kernel = node.require_ints("kernel_shape");
  MRT_CHECK_ARG(g.kernel.size() == nsp, op, ": kernel_shape ", shape_str(g.kernel), " has ", g.kernel.size(),
                " values but the input ", X.describe(), " has ", nsp, " spatial dimensions");
  g.in.assign(X.shape().begin() + 2, X.shape().end());
  const bool ceil_mode = allow_ceil && node.attr_int("ceil_mode", 0) != 0;
  const AutoPad auto_pad = nn::parse_auto_pad(node);
  nn::resolve_forward(g, auto_pad, ceil_mode && auto_pad == AutoPad::kNotSet, op);
  p.planes = X.dim(0) * X.dim(1);
  p.out_shape = {X.dim(0), X.dim(1)};
  p.out_shape.insert(p.out_shape.end(), g.out.begin(), g.out.end());
  g.promote(3);
  for (size_t d = 0; d < 3; ++d) {
    AxisTable& t = p.axis[d];
    const int64_t n = g.out[d];
    t.start.resize(static_cast<size_t>(n));
    t.lo.resize(static_cast<size_t>(n));
    t.hi.resize(static_cast<size_t>(n));
    t.padded.resize(static_cast<size_t>(n));
    for (int64_t o = 0; o < n; ++o) {
      const int64_t start = o * g.stride[d] - g.pad_begin[d];
      int64_t lo, hi, plo, phi;
      nn::valid_range(g.kernel[d], g.dilation[d], start, g.in[d], lo, hi);
      nn::valid_range(g.kernel[d], g.dilation[d], start + g.pad_begin[d],
                      g.in[d] + g.pad_begin[d] + g.pad_end[d], plo, phi);
      t.start[o] = start;
      t.lo[o] = lo;
      t.hi[o] = hi;
      t.padded[o] = phi - plo;
    }
  }
  return p;
}

template <class T>
T lowest_value() {
  return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                              : std::numeric_limits<T>::lowest();
}

template <class T>
void max_pool_run(const PoolPlan& p, const T* x, T* y, int64_t* indices, ThreadPool& pool) {
  const Window& g = p.g;
  const int64_t D = g.in[0], H = g.in[1], W = g.in[2];
  const int64_t OD = g.out[0], OH = g.out[1], OW = g.out[2];
  const int64_t dd = g.dilation[0], dh = g.dilation[1], dw = g.dilation[2];
  const int64_t isz = D * H * W, osz = OD * OH * OW;
  const AxisTable &ad = p.axis[0], &ah = p.axis[1], &aw = p.axis[2];
  pool.parallel_for(p.planes, 1, [&](int64_t b, int64_t e) {
    for (int64_t plane = b; plane < e; ++plane) {
      const T* xp = x + plane * isz;
      T* yp = y + plane * osz;
      int64_t* ip = indices ? indices + plane * osz : nullptr;
      for (int64_t od = 0; od < OD; ++od)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) {
            T best = lowest_value<T>();
            int64_t arg = -1;
            for (int64_t kd = ad.lo[od]; kd < ad.hi[od]; ++kd) {
              const int64_t id = ad.start[od] + kd * dd;
              for (int64_t kh = ah.lo[oh]; kh < ah.hi[oh]; ++kh) {
                const int64_t ih = ah.start[oh] + kh * dh;
                const T* row = xp + (id * H + ih) * W;
                for (int64_t kw = aw.lo[ow]; kw < aw.hi[ow]; ++kw) {
                  const int64_t iw = aw.start[ow] + kw * dw;
                  const T v = row[iw];
                  if (arg < 0 || v > best) {
                    best = v;
                    arg = (id * H + ih) * W + iw;
                  }
                }
              }
            }
            const int64_t o = (od * OH + oh) * OW + ow;
            yp[o] = best;
            if (ip) {
              if (arg < 0) {
                ip[o] = -1;
              } else if (p.storage_order == 0) {
                ip[o] = plane * isz + arg;
              } else {  // column-major over the spatial dims
                const int64_t iw = arg % W, ih = (arg / W) % H, id = arg / (W * H);
                ip[o] = plane * isz + id + ih * D + iw * D * H;
              }
            }
          }
    }
  });
}

template <class T>
void avg_lp_pool_run(const PoolPlan& p, PoolKind kind, const T* x, T* y, ThreadPool& pool) {
  const Window& g = p.g;
  const int64_t D = g.in[0], H = g.in[1], W = g.in[2];
  const int64_t OD = g.out[0], OH = g.out[1], OW = g.out[2];
  const int64_t dd = g.dilation[0], dh = g.dilation[1], dw = g.dilation[2];
  const int64_t isz = D * H * W, osz = OD * OH * OW;
  const AxisTable &ad = p.axis[0], &ah = p.axis[1], &aw = p.axis[2];
  const double pw = p.p;
  const bool lp = kind == PoolKind::kLp;
  pool.parallel_for(p.planes, 1, [&](int64_t b, int64_t e) {
    for (int64_t plane = b; plane < e; ++plane) {
      const T* xp = x + plane * isz;
      T* yp = y + plane * osz;
      for (int64_t od = 0; od < OD; ++od)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) {
            T sum = T(0);
            for (int64_t kd = ad.lo[od]; kd < ad.hi[od]; ++kd) {
              const int64_t id = ad.start[od] + kd * dd;
              for (int64_t kh = ah.lo[oh]; kh < ah.hi[oh]; ++kh) {
                const T* row = xp + (id * H + ah.start[oh] + kh * dh) * W;
                if (!lp) {
                  for (int64_t kw = aw.lo[ow]; kw < aw.hi[ow]; ++kw) sum += row[aw.start[ow] + kw * dw];
                } else if (pw == 2.0) {
                  for (int64_t kw = aw.lo[ow]; kw < aw.hi[ow]; ++kw) {
                    const T v = row[aw.start[ow] + kw * dw];
                    sum += v * v;
                  }
                } else {
                  for (int64_t kw = aw.lo[ow]; kw < aw.hi[ow]; ++kw)
                    sum += static_cast<T>(std::pow(std::fabs(static_cast<double>(row[aw.start[ow] + kw * dw])), pw));
                }
              }
            }
            T r;
            if (lp) {
              r = pw == 2.0 ? static_cast<T>(std::sqrt(sum)) : static_cast<T>(std::pow(static_cast<double>(sum), 1.0 / pw));
            } else {
              const int64_t count = p.count_include_pad
                                        ? ad.padded[od] * ah.padded[oh] * aw.padded[ow]
                                        : (ad.hi[od] - ad.lo[od]) * (ah.hi[oh] - ah.lo[oh]) * (aw.hi[ow] - aw.lo[ow]);
              r = count > 0 ? sum / static_cast<T>(count) : T(0);
            }
            yp[(od * OH + oh) * OW + ow] = r;
          }
    }
  });
}

double read_p(const Node& node) {
  const Attribute* a = node.attr("p");
  if (!a) return 2.0;
  const double p = a->type == AttrType::kFloat ? static_cast<double>(a->f) : static_cast<double>(a->i);
  MRT_CHECK_ARG(p > 0, "p must be positive, got ", p);
  return p;
}

void max_pool_kernel(OpContext& ctx) {
  const Tensor& X = ctx.input(0);
  PoolPlan p = plan_pool(ctx, X, "MaxPool", true);
  p.storage_order = static_cast<int>(ctx.node().attr_int("storage_order", 0));
  Tensor& Y = ctx.output(0, X.dtype(), p.out_shape);
  int64_t* indices = nullptr;
  if (ctx.has_output(1)) indices = ctx.output(1, DType::kInt64, p.out_shape).data<int64_t>();
  switch (X.dtype()) {
    MRT_DTYPE_CASE(kFloat, float, max_pool_run<T>(p, X.data<T>(), Y.data<T>(), indices, ctx.threads()))
    MRT_DTYPE_CASE(kDouble, double, max_pool_run<T>(p, X.data<T>(), Y.data<T>(), indices, ctx.threads()))
    MRT_DTYPE_CASE(kInt8, int8_t, max_pool_run<T>(p, X.data<T>(), Y.data<T>(), indices, ctx.threads()))
    MRT_DTYPE_CASE(kUInt8, uint8_t, max_pool_run<T>(p, X.data<T>(), Y.data<T>(), indices, ctx.threads()))
    MRT_DISPATCH_FAIL(X.dtype(), "MaxPool");
  }
}

void average_pool_kernel(OpContext& ctx) {
  const Tensor& X = ctx.input(0);
  PoolPlan p = plan_pool(ctx, X, "AveragePool", true);
  p.count_include_pad = ctx.node().attr_int("count_include_pad", 0) != 0;
  Tensor& Y = ctx.output(0, X.dtype(), p.out_shape);
  MRT_DISPATCH_FLOATING(X.dtype(), "AveragePool",
                        { avg_lp_pool_run<T>(p, PoolKind::kAverage, X.data<T>(), Y.data<T>(), ctx.threads()); });
}

void lp_pool_kernel(OpContext& ctx) {
  const Tensor& X = ctx.input(0);
  PoolPlan p = plan_pool(ctx, X, "LpPool", true);
  p.p = read_p(ctx.node());
  Tensor& Y = ctx.output(0, X.dtype(), p.out_shape);
  MRT_DISPATCH_FLOATING(X.dtype(), "LpPool",
                        { avg_lp_pool_run<T>(p, PoolKind::kLp, X.data<T>(), Y.data<T>(), ctx.threads()); });
}

void pool_check(const Node& node, int64_t) {
  (void)nn::parse_auto_pad(node);
  (void)node.require_ints("kernel_shape");
  const int64_t so = node.attr_int("storage_order", 0);
  MRT_ENFORCE(so == 0 || so == 1, MRT_INVALID_MODEL, "storage_order must be 0 or 1, got ", so);
}

// ---------------------------------------------------------------------------------------
// Global pools: one reduction per (n, c) plane.

template <class T>
void global_pool_run(PoolKind kind, double pw, int64_t planes, int64_t size, const T* x, T* y, ThreadPool& pool) {
  pool.parallel_for(planes, 4, [&](int64_t b, int64_t e) {
    for (int64_t plane = b; plane < e; ++plane) {
      const T* xp = x + plane * size;
      T r;
      if (kind == PoolKind::kMax) {
        r = size > 0 ? xp[0] : lowest_value<T>();
        for (int64_t i = 1; i < size; ++i) r = xp[i] > r ? xp[i] : r;
      } else if (kind == PoolKind::kAverage) {
        T s = T(0);
        for (int64_t i = 0; i < size; ++i) s += xp[i];
        r = size > 0 ? s / static_cast<T>(size) : T(0);
      } else {
        T s = T(0);
        if (pw == 2.0) {
          for (int64_t i = 0; i < size; ++i) s += xp[i] * xp[i];
          r = static_cast<T>(std::sqrt(s));
        } else {
          for (int64_t i = 0; i < size; ++i) s += static_cast<T>(std::pow(std::fabs(static_cast<double>(xp[i])), pw));
          r = static_cast<T>(std::pow(static_cast<double>(s), 1.0 / pw));
        }
      }
      y[plane] = r;
    }
  });
}

template <PoolKind kKind>
void global_pool_kernel(OpContext& ctx) {
  const Tensor& X = ctx.input(0);
  const char* op = kKind == PoolKind::kMax ? "GlobalMaxPool" : kKind == PoolKind::kAverage ? "GlobalAveragePool"
                                                                                          : "GlobalLpPool";
  MRT_CHECK_ARG(X.rank() >= 3, op, ": input X must have rank >= 3 (N, C, spatial...), got ", X.describe());
  Shape out(X.rank(), 1);
  out[0] = X.dim(0);
  out[1] = X.dim(1);
  const int64_t planes = X.dim(0) * X.dim(1);
  const int64_t size = planes > 0 ? X.numel() / planes : 0;
  const double pw = kKind == PoolKind::kLp ? read_p(ctx.node()) : 2.0;
  Tensor& Y = ctx.output(0, X.dtype(), out);
  if (kKind == PoolKind::kMax) {
    switch (X.dtype()) {
      MRT_DTYPE_CASE(kFloat, float, global_pool_run<T>(kKind, pw, planes, size, X.data<T>(), Y.data<T>(), ctx.threads()))
      MRT_DTYPE_CASE(kDouble, double, global_pool_run<T>(kKind, pw, planes, size, X.data<T>(), Y.data<T>(), ctx.threads()))
      MRT_DTYPE_CASE(kInt8, int8_t, global_pool_run<T>(kKind, pw, planes, size, X.data<T>(), Y.data<T>(), ctx.threads()))
      MRT_DTYPE_CASE(kUInt8, uint8_t, global_pool_run<T>(kKind, pw, planes, size, X.data<T>(), Y.data<T>(), ctx.threads()))
      MRT_DISPATCH_FAIL(X.dtype(), op);
    }
  } else {
    MRT_DISPATCH_FLOATING(X.dtype(), op,
                          { global_pool_run<T>(kKind, pw, planes, size, X.data<T>(), Y.data<T>(), ctx.threads()); });
  }
}

// ---------------------------------------------------------------------------------------
// MaxUnpool: scatter X into zeros at the flat positions given by the MaxPool indices.
// Indices address the default (inferred) output shape; an explicit output_shape may be
// larger, and the inferred block then sits at its origin.

void max_unpool_kernel(OpContext& ctx) {
  const char* op = "MaxUnpool";
  const Tensor& X = ctx.input(0);
  const Tensor& I = ctx.input(1);
  MRT_CHECK_ARG(X.rank() >= 3, op, ": input X must have rank >= 3 (N, C, spatial...), got ", X.describe());
  MRT_CHECK_ARG(I.shape() == X.shape(), op, ": indices I ", I.describe(), " must have the shape of X ",
                X.describe());
  MRT_CHECK_ARG(I.dtype() == DType::kInt64, op, ": indices I must be int64, got ", dtype_name(I.dtype()));
  const size_t nsp = X.rank() - 2;
  Window g;
  nn::read_window_attrs(ctx.node(), nsp, op, g);
  std::vector<int64_t> kernel = ctx.node().require_ints("kernel_shape");
  MRT_CHECK_ARG(kernel.size() == nsp, op, ": kernel_shape ", shape_str(kernel), " must have ", nsp, " values");
  Shape inferred = {X.dim(0), X.dim(1)};
  for (size_t d = 0; d < nsp; ++d) {
    const int64_t v = (X.dim(d + 2) - 1) * g.stride[d] + kernel[d] - g.pad_begin[d] - g.pad_end[d];
    MRT_CHECK_ARG(v >= 0, op, ": inferred output size ", v, " along spatial axis ", d, " is negative");
    inferred.push_back(v);
  }
  Shape out = inferred;
  if (const Tensor* os = ctx.optional_input(2)) {
    out = os->to_int64_vector();
    MRT_CHECK_ARG(out.size() == X.rank(), op, ": output_shape ", shape_str(out), " must have ", X.rank(),
                  " values");
    for (size_t d = 0; d < out.size(); ++d)
      MRT_CHECK_ARG(d < 2 ? out[d] == inferred[d] : out[d] >= inferred[d], op, ": output_shape ", shape_str(out),
                    " is incompatible with the inferred shape ", shape_str(inferred));
  }
  Tensor& Y = ctx.output(0, X.dtype(), out);
  std::memset(Y.raw(), 0, Y.nbytes());
  const int64_t inferred_size = shape_size(inferred);
  const std::vector<int64_t> istr = shape_strides(inferred), ostr = shape_strides(out);
  const int64_t* idx = I.data<int64_t>();
  const size_t elem = dtype_size(X.dtype());
  const char* xs = static_cast<const char*>(X.raw());
  char* ys = static_cast<char*>(Y.raw());
  const bool same = out == inferred;
  for (int64_t i = 0; i < X.numel(); ++i) {
    int64_t k = idx[i];
    MRT_CHECK_ARG(k >= 0 && k < inferred_size, op, ": index ", k, " at position ", i, " is outside [0, ",
                  inferred_size, ")");
    int64_t dst = k;
    if (!same) {
      dst = 0;
      for (size_t d = 0; d < istr.size(); ++d) {
        dst += (k / istr[d]) * ostr[d];
        k %= istr[d];
      }
    }
    std::memcpy(ys + dst * static_cast<int64_t>(elem), xs + i * static_cast<int64_t>(elem), elem);
  }
}

// ---------------------------------------------------------------------------------------
// Col2Im: input [N, C * prod(block), L] -> output [N, C, image...].

void col2im_kernel(OpContext& ctx) {
  const char* op = "Col2Im";
  const Tensor& X = ctx.input(0);
  const std::vector<int64_t> image = ctx.input(1).to_int64_vector();
  const std::vector<int64_t> block = ctx.input(2).to_int64_vector();
  MRT_CHECK_ARG(X.rank() == 3, op, ": input must have rank 3 [N, C*prod(block_shape), L], got ", X.describe());
  const size_t nsp = image.size();
  MRT_CHECK_ARG(nsp >= 1 && block.size() == nsp, op, ": image_shape ", shape_str(image), " and block_shape ",
                shape_str(block), " must have the same, non-zero length");
  Window g;
  nn::read_window_attrs(ctx.node(), nsp, op, g);
  g.in = image;
  g.kernel = block;
  for (size_t d = 0; d < nsp; ++d) {
    MRT_CHECK_ARG(image[d] >= 1 && block[d] >= 1, op, ": image_shape and block_shape values must be >= 1");
  }
  nn::resolve_forward(g, AutoPad::kNotSet, false, op);
  int64_t ksize = 1, blocks = 1;
  for (size_t d = 0; d < nsp; ++d) {
    ksize *= block[d];
    blocks *= g.out[d];
  }
  MRT_CHECK_ARG(X.dim(1) % ksize == 0, op, ": input dim 1 (", X.dim(1), ") is not divisible by prod(block_shape) ",
                ksize);
  MRT_CHECK_ARG(X.dim(2) == blocks, op, ": input dim 2 (", X.dim(2), ") must equal the number of sliding blocks ",
                blocks, " (", shape_str(g.out), ")");
  const int64_t N = X.dim(0), C = X.dim(1) / ksize, isz = shape_size(image);
  Shape out = {N, C};
  out.insert(out.end(), image.begin(), image.end());
  Tensor& Y = ctx.output(0, X.dtype(), out);
  std::memset(Y.raw(), 0, Y.nbytes());
  const int64_t csz = X.dim(1) * X.dim(2);
  for (int64_t n = 0; n < N; ++n) {
    if (X.dtype() == DType::kFloat) {
      nn::col2im_float(X.data<float>() + n * csz, C, g, Y.data<float>() + n * C * isz);
    } else if (X.dtype() == DType::kDouble) {
      nn::col2im_double(X.data<double>() + n * csz, C, g, Y.data<double>() + n * C * isz);
    } else {
      fail(MRT_NOT_IMPLEMENTED, op, ": element type ", dtype_name(X.dtype()), " is not supported");
    }
  }
}

}  // namespace

void register_nn_pool_kernels(KernelRegistry& r) {
  r.add("MaxPool", 1, max_pool_kernel, pool_check);
  r.add("AveragePool", 1, average_pool_kernel, pool_check);
  r.add("LpPool", 1, lp_pool_kernel, pool_check);
  r.add("GlobalMaxPool", 1, global_pool_kernel<PoolKind::kMax>);
  r.add("GlobalAveragePool", 1, global_pool_kernel<PoolKind::kAverage>);
  r.add("GlobalLpPool", 1, global_pool_kernel<PoolKind::kLp>);
  r.add("MaxUnpool", 9, max_unpool_kernel, pool_check);
  r.add("Col2Im", 18, col2im_kernel);
}

}  // namespace mrt
