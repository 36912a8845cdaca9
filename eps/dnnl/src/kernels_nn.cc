// Conv / com.microsoft FusedConv, pooling and BatchNormalization (inference) on oneDNN.
#include <algorithm>

#include "ep_common.h"

namespace mrt_dnnl {

using dnnl::memory;
using tag = dnnl::memory::format_tag;

namespace {

Dims spatial(const Dims& d) { return Dims(d.begin() + 2, d.end()); }
Dims zero_based(const Dims& dil) {
  Dims out(dil);
  for (auto& v : out) v -= 1;
  return out;
}
void add_act(dnnl::post_ops& po, const Activation& a) {
  if (a.present) po.append_eltwise(a.alg, a.alpha, a.beta);
}

}  // namespace

// ------------------------------------------------------------------------------------ Conv

bool claim_conv(const NodeView& n, std::string* why) {
  const bool fused = n.op() == "FusedConv";
  if (!n.input_is_float(0)) return *why = "input X is not known to be float32", false;
  const MrtEpTensor* W = n.constant(1);
  if (!W || W->elem_type != kFloat || W->rank < 3 || W->rank > 5) return *why = "weights are not a float32 constant of rank 3-5", false;
  if (n.has_input(2)) {
    const MrtEpTensor* B = n.constant(2);
    if (!B || B->elem_type != kFloat || B->rank != 1) return *why = "bias is not a float32 constant vector", false;
  }
  if (!fused && n.input_count() > 3) return *why = "too many inputs", false;
  if (fused && n.has_input(3) && !n.input_is_float(3)) return *why = "Z is not float32", false;
  if (n.present_outputs() != 1) return *why = "expects one output", false;
  if (!auto_pad_ok(n)) return *why = "unknown auto_pad", false;
  int64_t group = n.attr_int("group", 1);
  if (group < 1 || W->dims[0] % group != 0) return *why = "bad group", false;
  if (fused) {
    Activation a;
    if (!parse_activation(n.attr_string("activation", ""), n.attr_floats("activation_params"), &a))
      return *why = "activation " + n.attr_string("activation", "") + " not supported", false;
  }
  return true;
}

namespace {

class ConvKernel : public Kernel {
 public:
  ConvKernel(const NodeView& n, const dnnl::engine& eng) : eng_(eng) {
    win_ = WindowAttrs::read(n);
    group_ = n.attr_int("group", 1);
    W_ = copy_constant(*n.constant(1), "Conv weights");
    if (n.has_input(2)) {
      B_ = copy_constant(*n.constant(2), "Conv bias");
      has_bias_ = true;
      if (B_.numel() != W_.dims[0]) throw Unsupported("Conv bias length does not match the output channels");
    }
    kernel_ = n.attr_ints("kernel_shape");
    Dims wk(W_.dims.begin() + 2, W_.dims.end());
    if (!kernel_.empty() && kernel_ != wk) throw Unsupported("kernel_shape disagrees with the weights");
    kernel_ = wk;
    if (n.op() == "FusedConv") {
      parse_activation(n.attr_string("activation", ""), n.attr_floats("activation_params"), &act_);
      has_z_ = n.has_input(3);
    }
  }

  void compute(RunContext& ctx) override {
    MrtEpTensor X = ctx.require(0);
    Dims xd = tensor_dims(X);
    MrtEpTensor Z{};
    bool z = has_z_ && ctx.input(3, &Z);
    Dims key = xd;
    key.push_back(z ? 1 : 0);
    auto e = cache_.get(key, [&] { return build(xd, z); });
    if (z && tensor_dims(Z) != e->out_dims)
      throw std::runtime_error(cat("Z has shape ", dims_str(tensor_dims(Z)), ", the output is ", dims_str(e->out_dims)));
    MrtEpTensor Y = ctx.output(0, e->out_dims);
    auto& s = ctx.stream();
    memory x_plain = wrap(e->plain_src, eng_, X.data);
    memory y_plain = wrap(e->plain_dst, eng_, Y.data);
    memory x = x_plain, y = y_plain;
    if (e->reorder_src) {
      x = memory(e->pd.src_desc(), eng_);
      dnnl::reorder(x_plain, x).execute(s, x_plain, x);
    }
    if (e->reorder_dst) y = memory(e->pd.dst_desc(), eng_);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, e->weights}, {DNNL_ARG_DST, y}};
    if (has_bias_) args[DNNL_ARG_BIAS] = e->bias;
    if (z) args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1] = wrap(e->plain_dst, eng_, Z.data);
    e->prim.execute(s, args);
    if (e->reorder_dst) dnnl::reorder(y, y_plain).execute(s, y, y_plain);
    s.wait();
  }

 private:
  struct Entry {
    dnnl::convolution_forward::primitive_desc pd;
    dnnl::convolution_forward prim;
    memory::desc plain_src, plain_dst;
    memory weights, bias;
    bool reorder_src = false, reorder_dst = false;
    Dims out_dims;
  };

  std::shared_ptr<const Entry> build(const Dims& xd, bool z) const {
    if (xd.size() != W_.dims.size())
      throw std::runtime_error(cat("X ", dims_str(xd), " and weights ", dims_str(W_.dims), " differ in rank"));
    const int64_t N = xd[0], C = xd[1], M = W_.dims[0];
    if (C != W_.dims[1] * group_)
      throw std::runtime_error(cat("X has ", C, " channels; weights expect ", W_.dims[1] * group_));
    Window w = resolve_window(win_, spatial(xd), kernel_, "Conv");
    auto e = std::make_shared<Entry>();
    e->out_dims = {N, M};
    e->out_dims.insert(e->out_dims.end(), w.out.begin(), w.out.end());
    Dims wdims = W_.dims;
    if (group_ > 1) {
      wdims = {group_, M / group_};
      wdims.insert(wdims.end(), W_.dims.begin() + 1, W_.dims.end());
    }
    e->plain_src = plain_md(xd);
    e->plain_dst = plain_md(e->out_dims);
    memory::desc any_src(xd, memory::data_type::f32, tag::any);
    memory::desc any_dst(e->out_dims, memory::data_type::f32, tag::any);
    memory::desc any_w(wdims, memory::data_type::f32, tag::any);
    memory::desc bias_md = plain_md({M});
    dnnl::post_ops po;
    if (z) po.append_binary(dnnl::algorithm::binary_add, e->plain_dst);
    add_act(po, act_);
    dnnl::primitive_attr attr;
    attr.set_post_ops(po);
    // Blocked activations pay a reorder in and out per node; for a single image the plain
    // layout with blocked weights usually wins, for channels that oneDNN blocks well it does not.
    const bool blocked = C >= 16 && M >= 16 && group_ == 1;
    e->pd = dnnl::convolution_forward::primitive_desc(
        eng_, dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
        blocked ? any_src : e->plain_src, any_w, has_bias_ ? bias_md : memory::desc(),
        blocked ? any_dst : e->plain_dst, w.strides, zero_based(w.dilations), w.pad_l, w.pad_r, attr);
    e->prim = dnnl::convolution_forward(e->pd);
    e->reorder_src = e->pd.src_desc() != e->plain_src;
    e->reorder_dst = e->pd.dst_desc() != e->plain_dst;
    dnnl::stream s(eng_);
    memory w_plain = wrap(plain_md(wdims), eng_, W_.data.data());
    e->weights = memory(e->pd.weights_desc(), eng_);
    dnnl::reorder(w_plain, e->weights).execute(s, w_plain, e->weights);
    if (has_bias_) {
      e->bias = memory(bias_md, eng_);
      std::memcpy(e->bias.get_data_handle(), B_.data.data(), B_.data.size() * sizeof(float));
    }
    s.wait();
    return e;
  }

  dnnl::engine eng_;
  WindowAttrs win_;
  int64_t group_ = 1;
  Dims kernel_;
  ConstTensor W_, B_;
  bool has_bias_ = false, has_z_ = false;
  Activation act_;
  ShapeCache<Entry> cache_;
};

}  // namespace

std::unique_ptr<Kernel> make_conv(const NodeView& n, const dnnl::engine& eng) {
  return std::make_unique<ConvKernel>(n, eng);
}

// ---------------------------------------------------------------------------------- pooling

bool claim_pool(const NodeView& n, std::string* why) {
  const std::string op = n.op();
  if (!n.input_is_float(0)) return *why = "input is not known to be float32", false;
  if (n.present_outputs() != 1 || !n.has_output(0)) return *why = "MaxPool Indices output is not supported", false;
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool") return true;
  if (!auto_pad_ok(n)) return *why = "unknown auto_pad", false;
  if (n.attr_int("ceil_mode", 0) != 0) return *why = "ceil_mode=1 is not supported", false;
  if (n.attr_ints("kernel_shape").empty()) return *why = "kernel_shape missing", false;
  if (op == "AveragePool" && !n.attr_ints("dilations").empty()) {
    for (int64_t d : n.attr_ints("dilations"))
      if (d != 1) return *why = "dilated AveragePool is not supported", false;
  }
  return true;
}

namespace {

class PoolKernel : public Kernel {
 public:
  PoolKernel(const NodeView& n, const dnnl::engine& eng) : eng_(eng) {
    const std::string op = n.op();
    global_ = op.rfind("Global", 0) == 0;
    if (op == "MaxPool" || op == "GlobalMaxPool") {
      alg_ = dnnl::algorithm::pooling_max;
    } else {
      alg_ = n.attr_int("count_include_pad", 0) ? dnnl::algorithm::pooling_avg_include_padding
                                                : dnnl::algorithm::pooling_avg_exclude_padding;
    }
    if (!global_) {
      win_ = WindowAttrs::read(n);
      kernel_ = n.attr_ints("kernel_shape");
    }
  }

  void compute(RunContext& ctx) override {
    MrtEpTensor X = ctx.require(0);
    Dims xd = tensor_dims(X);
    auto e = cache_.get(xd, [&] { return build(xd); });
    MrtEpTensor Y = ctx.output(0, e->out_dims);
    auto& s = ctx.stream();
    e->prim.execute(s, {{DNNL_ARG_SRC, wrap(e->src, eng_, X.data)}, {DNNL_ARG_DST, wrap(e->dst, eng_, Y.data)}});
    s.wait();
  }

 private:
  struct Entry {
    dnnl::pooling_forward prim;
    memory::desc src, dst;
    Dims out_dims;
  };

  std::shared_ptr<const Entry> build(const Dims& xd) const {
    if (xd.size() < 3 || xd.size() > 5) throw std::runtime_error(cat("pooling input ", dims_str(xd), " must have rank 3-5"));
    Window w;
    if (global_) {
      WindowAttrs none;
      w = resolve_window(none, spatial(xd), spatial(xd), "GlobalPool");
    } else {
      w = resolve_window(win_, spatial(xd), kernel_, "Pool");
    }
    auto e = std::make_shared<Entry>();
    e->out_dims = {xd[0], xd[1]};
    e->out_dims.insert(e->out_dims.end(), w.out.begin(), w.out.end());
    e->src = plain_md(xd);
    e->dst = plain_md(e->out_dims);
    dnnl::pooling_forward::primitive_desc pd(eng_, dnnl::prop_kind::forward_inference, alg_, e->src, e->dst, w.strides,
                                             w.kernel, zero_based(w.dilations), w.pad_l, w.pad_r);
    e->prim = dnnl::pooling_forward(pd);
    return e;
  }

  dnnl::engine eng_;
  bool global_ = false;
  dnnl::algorithm alg_;
  WindowAttrs win_;
  Dims kernel_;
  ShapeCache<Entry> cache_;
};

}  // namespace

std::unique_ptr<Kernel> make_pool(const NodeView& n, const dnnl::engine& eng) {
  return std::make_unique<PoolKernel>(n, eng);
}

// ------------------------------------------------------------------------ BatchNormalization

bool claim_batchnorm(const NodeView& n, std::string* why) {
  if (!n.input_is_float(0)) return *why = "input is not known to be float32", false;
  if (n.input_count() != 5) return *why = "expects 5 inputs", false;
  for (size_t i = 1; i < 5; ++i) {
    const MrtEpTensor* t = n.constant(i);
    if (!t || t->elem_type != kFloat || t->rank != 1) return *why = "scale/B/mean/var must be float32 constant vectors", false;
  }
  if (n.attr_int("training_mode", 0) != 0 || n.present_outputs() != 1 || !n.has_output(0))
    return *why = "training mode is not supported", false;
  if (n.attr_int("spatial", 1) != 1) return *why = "spatial=0 is not supported", false;
  if (n.opset() < 7) return *why = "opset < 7", false;
  return true;
}

namespace {

class BatchNormKernel : public Kernel {
 public:
  BatchNormKernel(const NodeView& n, const dnnl::engine& eng) : eng_(eng) {
    eps_ = n.attr_float("epsilon", 1e-5f);
    const char* names[] = {"scale", "B", "mean", "var"};
    for (size_t i = 0; i < 4; ++i) params_[i] = copy_constant(*n.constant(i + 1), names[i]);
    for (const auto& p : params_)
      if (p.numel() != params_[0].numel()) throw Unsupported("BatchNormalization parameter lengths differ");
  }

  void compute(RunContext& ctx) override {
    MrtEpTensor X = ctx.require(0);
    Dims xd = tensor_dims(X);
    auto e = cache_.get(xd, [&] { return build(xd); });
    MrtEpTensor Y = ctx.output(0, xd);
    auto& s = ctx.stream();
    e->prim.execute(s, {{DNNL_ARG_SRC, wrap(e->md, eng_, X.data)},
                        {DNNL_ARG_DST, wrap(e->md, eng_, Y.data)},
                        {DNNL_ARG_SCALE, e->p[0]},
                        {DNNL_ARG_SHIFT, e->p[1]},
                        {DNNL_ARG_MEAN, e->p[2]},
                        {DNNL_ARG_VARIANCE, e->p[3]}});
    s.wait();
  }

 private:
  struct Entry {
    dnnl::batch_normalization_forward prim;
    memory::desc md;
    memory p[4];
  };

  std::shared_ptr<const Entry> build(const Dims& xd) const {
    if (xd.size() < 2 || xd[1] != params_[0].numel())
      throw std::runtime_error(cat("X ", dims_str(xd), " does not have ", params_[0].numel(), " channels"));
    auto e = std::make_shared<Entry>();
    Dims d = xd;
    if (d.size() == 2) d.push_back(1);  // oneDNN wants at least one spatial dim
    e->md = plain_md(d);
    using nf = dnnl::normalization_flags;
    dnnl::batch_normalization_forward::primitive_desc pd(eng_, dnnl::prop_kind::forward_inference, e->md, e->md, eps_,
                                                         nf::use_global_stats | nf::use_scale | nf::use_shift);
    e->prim = dnnl::batch_normalization_forward(pd);
    for (size_t i = 0; i < 4; ++i) {
      e->p[i] = memory(plain_md({params_[i].numel()}), eng_);
      std::memcpy(e->p[i].get_data_handle(), params_[i].data.data(), params_[i].data.size() * sizeof(float));
    }
    return e;
  }

  dnnl::engine eng_;
  float eps_ = 1e-5f;
  ConstTensor params_[4];
  ShapeCache<Entry> cache_;
};

}  // namespace

std::unique_ptr<Kernel> make_batchnorm(const NodeView& n, const dnnl::engine& eng) {
  return std::make_unique<BatchNormKernel>(n, eng);
}

}  // namespace mrt_dnnl
