// ConvInteger and QLinearConv: im2col of (x - x_zero_point) into int16 columns (padding
// contributes 0, i.e. the zero point), then per group W_g[M/g, C/g*k] x col[C/g*k, out]
// on the integer GEMM. Any number of spatial dimensions; weights of a constant W (and
// zero point) are widened once per session.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant_common.h"

namespace mrt {
namespace {

struct ConvGeom {
  int64_t N = 0, C = 0, M = 0, group = 1;
  Shape in, kernel, out;  // spatial dims
  std::vector<int64_t> stride, dil, pad_begin;
  int64_t in_size = 1, out_size = 1, kernel_size = 1;
};

ConvGeom conv_geometry(const Node& node, const Tensor& X, const Tensor& W, const char* op) {
  ConvGeom g;
  MRT_CHECK_ARG(X.rank() >= 3, op, ": input must have rank >= 3 (N x C x D1 ...), got ", X.describe());
  MRT_CHECK_ARG(W.rank() == X.rank(), op, ": weight ", W.describe(), " must have the rank of the input ", X.describe());
  const size_t nd = X.rank() - 2;
  g.N = X.dim(0);
  g.C = X.dim(1);
  g.M = W.dim(0);
  g.group = node.attr_int("group", 1);
  MRT_CHECK_ARG(g.group > 0 && g.C % g.group == 0 && g.M % g.group == 0, op, ": group ", g.group,
                " must divide the input channels ", g.C, " and output channels ", g.M);
  MRT_CHECK_ARG(W.dim(1) == g.C / g.group, op, ": weight ", W.describe(), " needs ", g.C / g.group,
                " input channels per group");
  g.in.assign(X.shape().begin() + 2, X.shape().end());
  g.kernel.assign(W.shape().begin() + 2, W.shape().end());
  const std::vector<int64_t> ks = node.attr_ints("kernel_shape");
  if (!ks.empty()) {
    MRT_CHECK_ARG(ks == g.kernel, op, ": kernel_shape ", shape_str(ks), " differs from the weight's ", shape_str(g.kernel));
  }
  g.stride = node.attr_ints("strides", std::vector<int64_t>(nd, 1));
  g.dil = node.attr_ints("dilations", std::vector<int64_t>(nd, 1));
  std::vector<int64_t> pads = node.attr_ints("pads", std::vector<int64_t>(2 * nd, 0));
  MRT_CHECK_ARG(g.stride.size() == nd && g.dil.size() == nd && pads.size() == 2 * nd, op,
                ": strides/dilations/pads do not match ", nd, " spatial dimensions");
  const std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  g.out.resize(nd);
  g.pad_begin.resize(nd);
  for (size_t d = 0; d < nd; ++d) {
    MRT_CHECK_ARG(g.stride[d] > 0 && g.dil[d] > 0 && g.kernel[d] > 0, op, ": strides, dilations and kernel must be positive");
    const int64_t ext = g.dil[d] * (g.kernel[d] - 1) + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t o = (g.in[d] + g.stride[d] - 1) / g.stride[d];
      const int64_t total = std::max<int64_t>(0, (o - 1) * g.stride[d] + ext - g.in[d]);
      g.pad_begin[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      g.out[d] = o;
    } else if (auto_pad == "VALID") {
      g.pad_begin[d] = 0;
      g.out[d] = g.in[d] >= ext ? (g.in[d] - ext) / g.stride[d] + 1 : 0;
    } else {
      MRT_CHECK_IMPL(auto_pad == "NOTSET" || auto_pad.empty(), op, ": auto_pad '", auto_pad, "' is not supported");
      MRT_CHECK_ARG(pads[d] >= 0 && pads[d + nd] >= 0, op, ": pads must be >= 0");
      g.pad_begin[d] = pads[d];
      const int64_t span = g.in[d] + pads[d] + pads[d + nd];
      g.out[d] = span >= ext ? (span - ext) / g.stride[d] + 1 : 0;
    }
  }
  g.in_size = norm::prod(g.in, 0, nd);
  g.out_size = norm::prod(g.out, 0, nd);
  g.kernel_size = norm::prod(g.kernel, 0, nd);
  return g;
}

// col[(c * kernel_size + kidx) * out_size + o] = x[c, in(o, kidx)] - sub, `pad` outside the input.
template <class S, class D>
void im2col(const S* x, int32_t sub, D pad, const ConvGeom& g, int64_t channels, D* col, ThreadPool& pool) {
  const size_t nd = g.in.size();
  const int64_t rows = channels * g.kernel_size;
  const int64_t last_out = g.out[nd - 1];
  pool.parallel_for(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, g.out_size)), [&](int64_t rb, int64_t re) {
    std::vector<int64_t> kc(nd), oc(nd);
    for (int64_t r = rb; r < re; ++r) {
      const int64_t c = r / g.kernel_size;
      int64_t kidx = r % g.kernel_size;
      for (size_t d = nd; d-- > 0;) { kc[d] = kidx % g.kernel[d]; kidx /= g.kernel[d]; }
      const S* xc = x + c * g.in_size;
      D* dst = col + r * g.out_size;
      std::fill(oc.begin(), oc.end(), 0);
      // Walk the output positions one innermost line at a time.
      for (int64_t o = 0; o < g.out_size; o += last_out) {
        int64_t base = 0;
        bool inside = true;
        for (size_t d = 0; d + 1 < nd; ++d) {
          const int64_t i = oc[d] * g.stride[d] - g.pad_begin[d] + kc[d] * g.dil[d];
          if (i < 0 || i >= g.in[d]) { inside = false; break; }
          base = base * g.in[d] + i;
        }
        D* line = dst + o;
        if (!inside) {
          std::fill(line, line + last_out, pad);
        } else {
          const size_t d = nd - 1;
          const int64_t in_last = g.in[d];
          const int64_t start = -g.pad_begin[d] + kc[d] * g.dil[d];
          const S* xl = xc + base * in_last;
          const int64_t st = g.stride[d];
          // Output positions j whose input i = start + j * st lies inside [0, in_last).
          int64_t j0 = start >= 0 ? 0 : (-start + st - 1) / st;
          int64_t j1 = start >= in_last ? 0 : (in_last - start + st - 1) / st;
          j0 = std::min(j0, last_out);
          j1 = std::max(j0, std::min(j1, last_out));
          for (int64_t j = 0; j < j0; ++j) line[j] = pad;
          const S* xs = xl + start + j0 * st;
          D* ls = line + j0;
          const int64_t cnt = j1 - j0;
          if (st == 1 && sub == 0 && sizeof(S) == sizeof(D)) {
            std::memcpy(ls, xs, static_cast<size_t>(cnt) * sizeof(D));
          } else if (st == 1) {
            for (int64_t j = 0; j < cnt; ++j) ls[j] = static_cast<D>(static_cast<int32_t>(xs[j]) - sub);
          } else {
            for (int64_t j = 0; j < cnt; ++j) ls[j] = static_cast<D>(static_cast<int32_t>(xs[j * st]) - sub);
          }
          for (int64_t j = j1; j < last_out; ++j) line[j] = pad;
        }
        for (size_t d = nd - 1; d-- > 0;) {
          if (++oc[d] < g.out[d]) break;
          oc[d] = 0;
        }
      }
    }
  });
}

struct PackedWeights {
  int64_t Kp = 0;
  std::vector<std::vector<int16_t>> groups;  // per group: M/g rows of Kp
};

// int32 y[N, M, out...] = conv(x - x_zp, w - w_zp). x_in.. indices of the inputs.
void integer_conv(OpContext& ctx, const ConvGeom& g, size_t x_in, size_t xz_in, size_t w_in, size_t wz_in,
                  int32_t* y, const char* op) {
  const Tensor& X = ctx.input(x_in);
  const Tensor& W = ctx.input(w_in);
  MRT_CHECK_IMPL(X.dtype() == DType::kUInt8 || X.dtype() == DType::kInt8, op, ": input element type ",
                 dtype_name(X.dtype()), " is not supported (uint8/int8)");
  MRT_CHECK_IMPL(W.dtype() == DType::kUInt8 || W.dtype() == DType::kInt8, op, ": weight element type ",
                 dtype_name(W.dtype()), " is not supported (uint8/int8)");
  int32_t xzp = 0;
  if (const Tensor* z = ctx.optional_input(xz_in)) {
    MRT_CHECK_ARG(z->numel() == 1, op, ": x zero point must be a scalar, got ", z->describe());
    MRT_CHECK_ARG(z->dtype() == X.dtype(), op, ": x zero point type differs from the input's");
    xzp = quant::to_int32s(*z)[0];
  }
  const Tensor* wz = ctx.optional_input(wz_in);
  if (wz) {
    MRT_CHECK_ARG(wz->numel() == 1 || wz->numel() == g.M, op, ": w zero point ", wz->describe(),
                  " must be a scalar or hold one value per output channel (", g.M, ")");
    MRT_CHECK_ARG(wz->dtype() == W.dtype(), op, ": w zero point type differs from the weight's");
  }
  const int64_t Mg = g.M / g.group, Cg = g.C / g.group, Kc = Cg * g.kernel_size;
  if (g.out_size == 0 || g.N == 0 || g.M == 0) return;
  if (const quant::Igemm8Kernel* k8 = quant::igemm8_active()) {
    // 8-bit GEMM on the raw bytes: columns padded with the x zero point's byte.
    std::vector<int32_t> wzp = wz ? quant::to_int32s(*wz) : std::vector<int32_t>();
    const bool per_row = wzp.size() > 1;
    const bool x_u8 = X.dtype() == DType::kUInt8;
    static thread_local std::vector<uint8_t> col_buf;
    static thread_local quant::PackedB8 packed;
    quant::Scratch<uint8_t> col(col_buf, static_cast<size_t>(Kc * g.out_size));
    struct Release {  // keep the packed buffer only while it is small
      ~Release() {
        if (packed.data.capacity() > quant::kScratchKeep) packed = quant::PackedB8();
      }
    } release;
    const uint8_t* w = static_cast<const uint8_t*>(W.raw());
    // Constant weights are put in the kernel's domain once per node (per group), not on every run.
    std::shared_ptr<std::vector<quant::PreparedA8>> prepared;
    if (ctx.input_is_constant(w_in) && (!wz || ctx.input_is_constant(wz_in)))
      prepared = ctx.node_cache<std::vector<quant::PreparedA8>>([&] {
        auto groups = std::make_shared<std::vector<quant::PreparedA8>>();
        for (int64_t gi = 0; gi < g.group; ++gi)
          groups->push_back(quant::prepare_a8(*k8, Mg, w + gi * Mg * Kc, W.dtype() == DType::kInt8, Kc, Kc,
                                              wzp.empty() ? nullptr : wzp.data() + (per_row ? gi * Mg : 0), per_row));
        return groups;
      });
    for (int64_t n = 0; n < g.N; ++n) {
      for (int64_t gi = 0; gi < g.group; ++gi) {
        const int64_t xoff = (n * g.C + gi * Cg) * g.in_size;
        const uint8_t pad = static_cast<uint8_t>(xzp);
        if (x_u8) im2col(X.data<uint8_t>() + xoff, 0, pad, g, Cg, col.data(), ctx.threads());
        else im2col(X.data<int8_t>() + xoff, 0, pad, g, Cg, col.data(), ctx.threads());
        quant::pack_b8(*k8, packed, col.data(), x_u8, g.out_size, Kc, g.out_size, &xzp, false);
        const int32_t* z = wzp.empty() ? nullptr : wzp.data() + (per_row ? gi * Mg : 0);
        int32_t* yg = y + (n * g.M + gi * Mg) * g.out_size;
        if (prepared)
          quant::igemm8((*prepared)[static_cast<size_t>(gi)], packed, yg, g.out_size, &ctx.threads());
        else
          quant::igemm8(Mg, w + gi * Mg * Kc, W.dtype() == DType::kInt8, Kc, Kc, z, per_row, packed, yg, g.out_size,
                        &ctx.threads());
      }
    }
    return;
  }
  const int64_t Kp = (Kc + 1) & ~int64_t(1);
  auto make = [&] {
    auto pw = std::make_shared<PackedWeights>();
    pw->Kp = Kp;
    std::vector<int32_t> zp = wz ? quant::to_int32s(*wz) : std::vector<int32_t>();
    const bool per_row = zp.size() > 1;
    for (int64_t gi = 0; gi < g.group; ++gi) {
      const int32_t* z = zp.empty() ? nullptr : zp.data() + (per_row ? gi * Mg : 0);
      pw->groups.push_back(quant::pack_a(W, gi * Mg * Kc, Mg, Kc, z, per_row, Kp));
    }
    return pw;
  };
  const bool w_const = ctx.input_is_constant(w_in) && (!wz || ctx.input_is_constant(wz_in));
  const std::shared_ptr<PackedWeights> pw = w_const ? ctx.node_cache<PackedWeights>(make) : make();

  std::vector<int16_t> col(static_cast<size_t>(Kc * g.out_size));
  quant::PackedB packed;
  for (int64_t n = 0; n < g.N; ++n) {
    for (int64_t gi = 0; gi < g.group; ++gi) {
      const int64_t xoff = (n * g.C + gi * Cg) * g.in_size;
      if (X.dtype() == DType::kUInt8) im2col(X.data<uint8_t>() + xoff, xzp, int16_t(0), g, Cg, col.data(), ctx.threads());
      else im2col(X.data<int8_t>() + xoff, xzp, int16_t(0), g, Cg, col.data(), ctx.threads());
      quant::pack_b_s16(packed, col.data(), g.out_size, Kc, g.out_size);
      int32_t* yg = y + (n * g.M + gi * Mg) * g.out_size;
      quant::igemm(Mg, pw->groups[static_cast<size_t>(gi)].data(), packed, yg, g.out_size, &ctx.threads());
    }
  }
}

Shape out_shape(const ConvGeom& g) {
  Shape s{g.N, g.M};
  s.insert(s.end(), g.out.begin(), g.out.end());
  return s;
}

void conv_integer_kernel(OpContext& ctx) {
  const ConvGeom g = conv_geometry(ctx.node(), ctx.input(0), ctx.input(1), "ConvInteger");
  Tensor& Y = ctx.output(0, DType::kInt32, out_shape(g));
  integer_conv(ctx, g, 0, 2, 1, 3, Y.data<int32_t>(), "ConvInteger");
}

void qlinear_conv_kernel(OpContext& ctx) {
  const char* op = "QLinearConv";
  const Tensor& X = ctx.input(0);
  const ConvGeom g = conv_geometry(ctx.node(), X, ctx.input(3), op);
  const std::vector<double> xs = norm::to_doubles(ctx.input(1), "x_scale");
  const std::vector<double> ws = norm::to_doubles(ctx.input(4), "w_scale");
  const std::vector<double> ys = norm::to_doubles(ctx.input(6), "y_scale");
  MRT_CHECK_ARG(xs.size() == 1 && ys.size() == 1, op, ": x_scale and y_scale must be scalars");
  MRT_CHECK_ARG(ws.size() == 1 || static_cast<int64_t>(ws.size()) == g.M, op, ": w_scale ", ctx.input(4).describe(),
                " must be a scalar or hold one value per output channel (", g.M, ")");
  const Tensor* zy = ctx.optional_input(7);
  const DType out = zy ? zy->dtype() : X.dtype();
  MRT_CHECK_IMPL(out == DType::kUInt8 || out == DType::kInt8, op, ": output element type ", dtype_name(out),
                 " is not supported (uint8/int8)");
  MRT_CHECK_ARG(!zy || zy->numel() == 1, op, ": y_zero_point must be a scalar");
  const int32_t yzp = zy ? quant::to_int32s(*zy)[0] : 0;
  std::vector<int32_t> bias;
  if (const Tensor* B = ctx.optional_input(8)) {
    MRT_CHECK_ARG(B->dtype() == DType::kInt32 && B->numel() == g.M, op, ": bias must be int32 with ", g.M,
                  " elements, got ", B->describe());
    bias = quant::to_int32s(*B);
  }
  const Shape os = out_shape(g);
  static thread_local std::vector<int32_t> acc_buf;
  quant::Scratch<int32_t> acc(acc_buf, static_cast<size_t>(shape_size(os)));
  integer_conv(ctx, g, 0, 2, 3, 5, acc.data(), op);

  const DType st = ctx.input(1).dtype();
  auto in_prec = [&](double v) {
    return st == DType::kDouble ? v : static_cast<double>(static_cast<float>(v));
  };
  std::vector<double> mult(static_cast<size_t>(g.M));
  for (int64_t m = 0; m < g.M; ++m) mult[m] = in_prec(in_prec(xs[0] * ws[ws.size() == 1 ? 0 : m]) / ys[0]);
  double lo, hi;
  quant::qrange(out, lo, hi);
  Tensor& Y = ctx.output(0, out, os);
  const int64_t planes = g.N * g.M, S = g.out_size;
  auto write = [&](auto* y) {
    using TOut = std::remove_pointer_t<decltype(y)>;
    ctx.threads().parallel_for(planes, std::max<int64_t>(1, 8192 / std::max<int64_t>(1, S)), [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        const int64_t m = p % g.M;
        const int32_t bm = bias.empty() ? 0 : bias[m];
        quant::requantize_row<TOut>(acc.data() + p * S, bm, mult[m], yzp, lo, hi, y + p * S, S);
      }
    });
  };
  if (acc.v.empty()) return;
  if (out == DType::kUInt8) write(Y.data<uint8_t>());
  else write(Y.data<int8_t>());
}

void conv_check(const Node& node, int64_t) {
  const std::string ap = node.attr_string("auto_pad", "NOTSET");
  MRT_CHECK_IMPL(ap == "NOTSET" || ap.empty() || ap == "SAME_UPPER" || ap == "SAME_LOWER" || ap == "VALID",
                 node.label(), ": auto_pad '", ap, "' is not supported");
}

}  // namespace

void register_quant_conv_kernels(KernelRegistry& r) {
  r.add("ConvInteger", 10, conv_integer_kernel, conv_check);
  r.add("QLinearConv", 10, qlinear_conv_kernel, conv_check);
}

}  // namespace mrt
