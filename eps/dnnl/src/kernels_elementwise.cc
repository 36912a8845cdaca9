// Unary activations (eltwise), broadcasting binary arithmetic and Softmax on oneDNN.
#include <algorithm>

#include "ep_common.h"

namespace mrt_dnnl {

using dnnl::memory;

// ---------------------------------------------------------------------------------- unary

namespace {

bool unary_activation(const NodeView& n, Activation* a, std::string* why) {
  const std::string op = n.op();
  std::vector<float> params;
  if (op == "LeakyRelu") {
    params = {n.attr_float("alpha", 0.01f)};
  } else if (op == "Clip") {
    float lo = -3.402823466e+38f, hi = 3.402823466e+38f;
    if (n.opset() < 11) {
      lo = n.attr_float("min", lo);
      hi = n.attr_float("max", hi);
    } else {
      if (n.has_input(1) && !scalar_constant(n.constant(1), &lo)) return *why = "Clip min is not a float32 constant scalar", false;
      if (n.has_input(2) && !scalar_constant(n.constant(2), &hi)) return *why = "Clip max is not a float32 constant scalar", false;
    }
    params = {lo, hi};
  }
  if (!parse_activation(op, params, a)) return *why = "unsupported activation", false;
  a->present = true;  // Identity is not claimed, so every parsed op is a real eltwise
  return true;
}

}  // namespace

bool claim_unary(const NodeView& n, std::string* why) {
  if (!n.input_is_float(0)) return *why = "input is not known to be float32", false;
  if (n.present_outputs() != 1) return *why = "expects one output", false;
  Activation a;
  return unary_activation(n, &a, why);
}

namespace {

class UnaryKernel : public Kernel {
 public:
  UnaryKernel(const NodeView& n, const dnnl::engine& eng) : eng_(eng) {
    std::string why;
    if (!unary_activation(n, &act_, &why)) throw Unsupported(why);
  }

  void compute(RunContext& ctx) override {
    MrtEpTensor X = ctx.require(0);
    Dims xd = tensor_dims(X);
    MrtEpTensor Y = ctx.output(0, xd);
    const int64_t count = numel(xd);
    if (count == 0) return;
    auto e = cache_.get({count}, [&] {
      auto ent = std::make_shared<Entry>();
      ent->md = plain_md({count});
      dnnl::eltwise_forward::primitive_desc pd(eng_, dnnl::prop_kind::forward_inference, act_.alg, ent->md, ent->md,
                                               act_.alpha, act_.beta);
      ent->prim = dnnl::eltwise_forward(pd);
      return std::shared_ptr<const Entry>(ent);
    });
    auto& s = ctx.stream();
    e->prim.execute(s, {{DNNL_ARG_SRC, wrap(e->md, eng_, X.data)}, {DNNL_ARG_DST, wrap(e->md, eng_, Y.data)}});
    s.wait();
  }

 private:
  struct Entry {
    dnnl::eltwise_forward prim;
    memory::desc md;
  };
  dnnl::engine eng_;
  Activation act_;
  ShapeCache<Entry> cache_;
};

}  // namespace

std::unique_ptr<Kernel> make_unary(const NodeView& n, const dnnl::engine& eng) {
  return std::make_unique<UnaryKernel>(n, eng);
}

// ---------------------------------------------------------------------------------- binary

bool claim_binary(const NodeView& n, std::string* why) {
  if (n.input_count() != 2 || !n.all_inputs_float() || !n.has_input(0) || !n.has_input(1))
    return *why = "inputs are not known to be float32", false;
  for (size_t i = 0; i < 2; ++i) {
    int64_t r = n.input(i).constant_value ? static_cast<int64_t>(n.input(i).constant_value->rank) : n.input(i).rank;
    if (r > 6) return *why = "rank above 6", false;
  }
  return n.present_outputs() == 1;
}

namespace {

class BinaryKernel : public Kernel {
 public:
  BinaryKernel(const NodeView& n, const dnnl::engine& eng) : eng_(eng) {
    const std::string op = n.op();
    op_ = op == "Add" ? '+' : op == "Sub" ? '-' : op == "Mul" ? '*' : '/';
    alg_ = op == "Add"   ? dnnl::algorithm::binary_add
           : op == "Sub" ? dnnl::algorithm::binary_sub
           : op == "Mul" ? dnnl::algorithm::binary_mul
                         : dnnl::algorithm::binary_div;
  }

  void compute(RunContext& ctx) override {
    MrtEpTensor A = ctx.require(0), B = ctx.require(1);
    Dims ad = tensor_dims(A), bd = tensor_dims(B);
    Dims key = ad;
    key.push_back(-1);
    key.insert(key.end(), bd.begin(), bd.end());
    auto e = cache_.get(key, [&] { return build(ad, bd); });
    MrtEpTensor Y = ctx.output(0, e->out_dims);
    if (numel(e->out_dims) == 0) return;
    if (!e->use_dnnl) {
      loop(*e, static_cast<const float*>(A.data), static_cast<const float*>(B.data), static_cast<float*>(Y.data));
      return;
    }
    const void* s0 = e->swapped ? B.data : A.data;
    const void* s1 = e->swapped ? A.data : B.data;
    auto& s = ctx.stream();
    e->prim.execute(s, {{DNNL_ARG_SRC_0, wrap(e->md0, eng_, s0)},
                        {DNNL_ARG_SRC_1, wrap(e->md1, eng_, s1)},
                        {DNNL_ARG_DST, wrap(e->mdy, eng_, Y.data)}});
    s.wait();
  }

 private:
  struct Entry {
    dnnl::binary prim;
    memory::desc md0, md1, mdy;
    Dims out_dims, a, b;  // a, b: input dims padded to the output rank
    bool use_dnnl = false, swapped = false;
  };

  std::shared_ptr<const Entry> build(Dims ad, Dims bd) const {
    auto e = std::make_shared<Entry>();
    const size_t r = std::max<size_t>({ad.size(), bd.size(), 1});
    ad.insert(ad.begin(), r - ad.size(), 1);
    bd.insert(bd.begin(), r - bd.size(), 1);
    Dims yd(r);
    for (size_t i = 0; i < r; ++i) {
      if (ad[i] != bd[i] && ad[i] != 1 && bd[i] != 1)
        throw std::runtime_error(cat("shapes ", dims_str(ad), " and ", dims_str(bd), " do not broadcast"));
      yd[i] = ad[i] == 1 ? bd[i] : ad[i];
    }
    e->out_dims = yd;
    // The graph's output rank is the larger input rank (rank 0 stays rank 0).
    e->out_dims.erase(e->out_dims.begin(), e->out_dims.begin() + (r - std::max(ad.size(), bd.size())));
    e->a = ad;
    e->b = bd;
    if (numel(yd) == 0) return e;
    // oneDNN broadcasts its second source only; Add/Mul can swap their operands.
    const bool commutative = op_ == '+' || op_ == '*';
    if (ad == yd || (commutative && bd == yd)) {
      e->swapped = ad != yd;
      e->md0 = plain_md(e->swapped ? bd : ad);
      e->md1 = plain_md(e->swapped ? ad : bd);
      e->mdy = plain_md(yd);
      dnnl::binary::primitive_desc pd(eng_, alg_, e->md0, e->md1, e->mdy);
      e->prim = dnnl::binary(pd);
      e->use_dnnl = true;
    }
    return e;
  }

  // Plain broadcasting loop for the shapes oneDNN's binary does not take (both sides broadcast).
  void loop(const Entry& e, const float* a, const float* b, float* y) const {
    const size_t r = e.a.size();
    Dims sa(r), sb(r);
    int64_t ta = 1, tb = 1;
    for (size_t i = r; i-- > 0;) {
      sa[i] = e.a[i] == 1 ? 0 : ta;
      sb[i] = e.b[i] == 1 ? 0 : tb;
      ta *= e.a[i];
      tb *= e.b[i];
    }
    Dims yd(e.a.size());
    for (size_t i = 0; i < r; ++i) yd[i] = e.a[i] == 1 ? e.b[i] : e.a[i];
    const int64_t total = numel(yd);
    Dims idx(r, 0);
    int64_t ia = 0, ib = 0;
    for (int64_t k = 0; k < total; ++k) {
      const float x = a[ia], z = b[ib];
      y[k] = op_ == '+' ? x + z : op_ == '-' ? x - z : op_ == '*' ? x * z : x / z;
      for (size_t d = r; d-- > 0;) {
        ia += sa[d];
        ib += sb[d];
        if (++idx[d] < yd[d]) break;
        ia -= sa[d] * yd[d];
        ib -= sb[d] * yd[d];
        idx[d] = 0;
      }
    }
  }

  dnnl::engine eng_;
  char op_ = '+';
  dnnl::algorithm alg_;
  ShapeCache<Entry> cache_;
};

}  // namespace

std::unique_ptr<Kernel> make_binary(const NodeView& n, const dnnl::engine& eng) {
  return std::make_unique<BinaryKernel>(n, eng);
}

// --------------------------------------------------------------------------------- Softmax

bool claim_softmax(const NodeView& n, std::string* why) {
  if (!n.input_is_float(0)) return *why = "input is not known to be float32", false;
  if (n.present_outputs() != 1) return *why = "expects one output", false;
  return true;
}

namespace {

class SoftmaxKernel : public Kernel {
 public:
  SoftmaxKernel(const NodeView& n, const dnnl::engine& eng) : eng_(eng) {
    legacy_ = n.opset() < 13;
    axis_ = n.attr_int("axis", legacy_ ? 1 : -1);
  }

  void compute(RunContext& ctx) override {
    MrtEpTensor X = ctx.require(0);
    Dims xd = tensor_dims(X);
    MrtEpTensor Y = ctx.output(0, xd);
    if (numel(xd) == 0) return;
    auto e = cache_.get(xd, [&] { return build(xd); });
    auto& s = ctx.stream();
    e->prim.execute(s, {{DNNL_ARG_SRC, wrap(e->md, eng_, X.data)}, {DNNL_ARG_DST, wrap(e->md, eng_, Y.data)}});
    s.wait();
  }

 private:
  struct Entry {
    dnnl::softmax_forward prim;
    memory::desc md;
  };

  std::shared_ptr<const Entry> build(const Dims& xd) const {
    const int64_t r = static_cast<int64_t>(xd.size());
    int64_t axis = axis_ < 0 ? axis_ + r : axis_;
    if (r == 0 || axis < 0 || axis >= r) throw std::runtime_error(cat("Softmax axis ", axis_, " is out of range for rank ", r));
    Dims d = xd;
    if (legacy_) {
      // Opset < 13: softmax over the flattened [d0*..*d(axis-1), d(axis)*..] matrix.
      int64_t outer = 1, inner = 1;
      for (int64_t i = 0; i < r; ++i) (i < axis ? outer : inner) *= xd[static_cast<size_t>(i)];
      d = {outer, inner};
      axis = 1;
    }
    auto e = std::make_shared<Entry>();
    e->md = plain_md(d);
    dnnl::softmax_forward::primitive_desc pd(eng_, dnnl::prop_kind::forward_inference, dnnl::algorithm::softmax_accurate,
                                             e->md, e->md, static_cast<int>(axis));
    e->prim = dnnl::softmax_forward(pd);
    return e;
  }

  dnnl::engine eng_;
  bool legacy_ = false;
  int64_t axis_ = -1;
  ShapeCache<Entry> cache_;
};

}  // namespace

std::unique_ptr<Kernel> make_softmax(const NodeView& n, const dnnl::engine& eng) {
  return std::make_unique<SoftmaxKernel>(n, eng);
}

}  // namespace mrt_dnnl
