// MatMul (numpy batch broadcasting) and Gemm (transA/transB/alpha/beta, broadcast C) on the
// oneDNN matmul primitive. Constant right-hand sides are reordered once per cached primitive.
#include <algorithm>

#include "ep_common.h"

namespace mrt_dnnl {

using dnnl::memory;
using tag = dnnl::memory::format_tag;

namespace {

constexpr size_t kMaxRank = 6;

// Copies a constant B into a freshly reordered weights memory for `pd`.
memory reorder_weights(const dnnl::engine& eng, const memory::desc& src_md, const float* data,
                       const memory::desc& want) {
  dnnl::stream s(eng);
  memory src = wrap(src_md, eng, data);
  memory dst(want, eng);
  dnnl::reorder(src, dst).execute(s, src, dst);
  s.wait();
  return dst;
}

}  // namespace

// ---------------------------------------------------------------------------------- MatMul

bool claim_matmul(const NodeView& n, std::string* why) {
  if (!n.input_is_float(0) || !n.input_is_float(1)) return *why = "inputs are not known to be float32", false;
  for (size_t i = 0; i < 2; ++i) {
    int64_t r = n.input(i).constant_value ? static_cast<int64_t>(n.input(i).constant_value->rank) : n.input(i).rank;
    if (r > static_cast<int64_t>(kMaxRank)) return *why = "rank above 6", false;
  }
  return n.present_outputs() == 1;
}

namespace {

class MatMulKernel : public Kernel {
 public:
  MatMulKernel(const NodeView& n, const dnnl::engine& eng) : eng_(eng) {
    if (const MrtEpTensor* b = n.constant(1)) {
      B_ = copy_constant(*b, "MatMul B");
      const_b_ = true;
    }
  }

  void compute(RunContext& ctx) override {
    MrtEpTensor A = ctx.require(0);
    MrtEpTensor Bt{};
    Dims ad = tensor_dims(A), bd;
    const void* bdata;
    if (const_b_) {
      bd = B_.dims;
      bdata = B_.data.data();
    } else {
      Bt = ctx.require(1);
      bd = tensor_dims(Bt);
      bdata = Bt.data;
    }
    Dims key = ad;
    key.push_back(-1);
    key.insert(key.end(), bd.begin(), bd.end());
    auto e = cache_.get(key, [&] { return build(ad, bd); });
    MrtEpTensor Y = ctx.output(0, e->out_dims);
    if (numel(e->out_dims) == 0) return;
    if (e->k == 0) {
      std::fill_n(static_cast<float*>(Y.data), numel(e->out_dims), 0.f);
      return;
    }
    auto& s = ctx.stream();
    memory w = const_b_ ? e->weights : wrap(e->b_md, eng_, bdata);
    e->prim.execute(s, {{DNNL_ARG_SRC, wrap(e->a_md, eng_, A.data)},
                        {DNNL_ARG_WEIGHTS, w},
                        {DNNL_ARG_DST, wrap(e->y_md, eng_, Y.data)}});
    s.wait();
  }

 private:
  struct Entry {
    dnnl::matmul prim;
    memory::desc a_md, b_md, y_md;
    memory weights;
    Dims out_dims;
    int64_t k = 0;
  };

  std::shared_ptr<const Entry> build(Dims ad, Dims bd) const {
    if (ad.empty() || bd.empty()) throw std::runtime_error("MatMul inputs must have rank >= 1");
    const bool a_vec = ad.size() == 1, b_vec = bd.size() == 1;
    if (a_vec) ad.insert(ad.begin(), 1);
    if (b_vec) bd.push_back(1);
    const size_t r = std::max(ad.size(), bd.size());
    ad.insert(ad.begin(), r - ad.size(), 1);
    bd.insert(bd.begin(), r - bd.size(), 1);
    if (ad[r - 1] != bd[r - 2])
      throw std::runtime_error(cat("MatMul: inner dimensions differ (", ad[r - 1], " vs ", bd[r - 2], ")"));
    Dims yd(r);
    for (size_t i = 0; i + 2 < r; ++i) {
      if (ad[i] != bd[i] && ad[i] != 1 && bd[i] != 1)
        throw std::runtime_error(cat("MatMul: batch dims ", dims_str(ad), " and ", dims_str(bd), " do not broadcast"));
      yd[i] = std::max(ad[i], bd[i]);
      if (ad[i] == 0 || bd[i] == 0) yd[i] = 0;
    }
    yd[r - 2] = ad[r - 2];
    yd[r - 1] = bd[r - 1];
    auto e = std::make_shared<Entry>();
    e->k = ad[r - 1];
    e->out_dims = yd;
    if (a_vec) e->out_dims.erase(e->out_dims.end() - 2);
    if (b_vec) e->out_dims.erase(e->out_dims.end() - 1);
    if (numel(yd) == 0 || e->k == 0) return e;
    e->a_md = plain_md(ad);
    e->b_md = plain_md(bd);
    e->y_md = plain_md(yd);
    memory::desc w_md = const_b_ ? memory::desc(bd, memory::data_type::f32, tag::any) : e->b_md;
    dnnl::matmul::primitive_desc pd(eng_, e->a_md, w_md, e->y_md);
    e->prim = dnnl::matmul(pd);
    if (const_b_) e->weights = reorder_weights(eng_, e->b_md, B_.data.data(), pd.weights_desc());
    return e;
  }

  dnnl::engine eng_;
  ConstTensor B_;
  bool const_b_ = false;
  ShapeCache<Entry> cache_;
};

}  // namespace

std::unique_ptr<Kernel> make_matmul(const NodeView& n, const dnnl::engine& eng) {
  return std::make_unique<MatMulKernel>(n, eng);
}

// ------------------------------------------------------------------------------------ Gemm

bool claim_gemm(const NodeView& n, std::string* why) {
  if (!n.input_is_float(0) || !n.input_is_float(1)) return *why = "A/B are not known to be float32", false;
  if (n.has_input(2)) {
    if (!n.input_is_float(2)) return *why = "C is not float32", false;
    const MrtEpValue& c = n.input(2);
    int64_t rank = c.constant_value ? static_cast<int64_t>(c.constant_value->rank) : c.rank;
    if (rank < 0 || rank > 2) return *why = "C must have a known rank <= 2", false;
    if (!c.constant_value && n.attr_float("beta", 1.f) != 1.f) return *why = "beta != 1 with a non-constant C", false;
  }
  return n.present_outputs() == 1;
}

namespace {

class GemmKernel : public Kernel {
 public:
  GemmKernel(const NodeView& n, const dnnl::engine& eng) : eng_(eng) {
    trans_a_ = n.attr_int("transA", 0) != 0;
    trans_b_ = n.attr_int("transB", 0) != 0;
    alpha_ = n.attr_float("alpha", 1.f);
    beta_ = n.attr_float("beta", 1.f);
    if (const MrtEpTensor* b = n.constant(1)) {
      B_ = copy_constant(*b, "Gemm B");
      const_b_ = true;
    }
    has_c_ = n.has_input(2) && beta_ != 0.f;
    if (has_c_ && n.constant(2)) {
      C_ = copy_constant(*n.constant(2), "Gemm C");
      for (float& v : C_.data) v *= beta_;  // the binary post-op adds beta*C
      const_c_ = true;
    }
  }

  void compute(RunContext& ctx) override {
    MrtEpTensor A = ctx.require(0);
    MrtEpTensor Bt{}, Ct{};
    Dims ad = tensor_dims(A), bd = const_b_ ? B_.dims : Dims{}, cd;
    const void* bdata = B_.data.data();
    if (!const_b_) {
      Bt = ctx.require(1);
      bd = tensor_dims(Bt);
      bdata = Bt.data;
    }
    const void* cdata = nullptr;
    if (has_c_) {
      if (const_c_) {
        cd = C_.dims;
        cdata = C_.data.data();
      } else {
        Ct = ctx.require(2);
        cd = tensor_dims(Ct);
        cdata = Ct.data;
      }
    }
    Dims key = ad;
    key.push_back(-1);
    key.insert(key.end(), bd.begin(), bd.end());
    key.push_back(-1);
    key.insert(key.end(), cd.begin(), cd.end());
    auto e = cache_.get(key, [&] { return build(ad, bd, cd); });
    MrtEpTensor Y = ctx.output(0, e->out_dims);
    if (numel(e->out_dims) == 0) return;
    auto& s = ctx.stream();
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, wrap(e->a_md, eng_, A.data)},
                                         {DNNL_ARG_WEIGHTS, const_b_ ? e->weights : wrap(e->b_md, eng_, bdata)},
                                         {DNNL_ARG_DST, wrap(e->y_md, eng_, Y.data)}};
    if (has_c_) args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(e->c_post_op) | DNNL_ARG_SRC_1] = wrap(e->c_md, eng_, cdata);
    if (e->k == 0) {
      // alpha*A*B is zero: Y = beta*C broadcast.
      std::fill_n(static_cast<float*>(Y.data), numel(e->out_dims), 0.f);
      if (!has_c_) return;
      const float* c = static_cast<const float*>(cdata);
      float* y = static_cast<float*>(Y.data);
      const int64_t M = e->out_dims[0], N = e->out_dims[1], cm = e->c_md.get_dims()[0], cn = e->c_md.get_dims()[1];
      const float scale = const_c_ ? 1.f : beta_;
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) y[i * N + j] = scale * c[(cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j)];
      return;
    }
    e->prim.execute(s, args);
    s.wait();
  }

 private:
  struct Entry {
    dnnl::matmul prim;
    memory::desc a_md, b_md, y_md, c_md;
    memory weights;
    Dims out_dims;
    int c_post_op = 0;
    int64_t k = 0;
  };

  std::shared_ptr<const Entry> build(const Dims& ad, const Dims& bd, const Dims& cd) const {
    if (ad.size() != 2 || bd.size() != 2) throw std::runtime_error("Gemm: A and B must be matrices");
    const int64_t M = trans_a_ ? ad[1] : ad[0], K = trans_a_ ? ad[0] : ad[1];
    const int64_t Kb = trans_b_ ? bd[1] : bd[0], N = trans_b_ ? bd[0] : bd[1];
    if (K != Kb) throw std::runtime_error(cat("Gemm: inner dimensions differ (", K, " vs ", Kb, ")"));
    auto e = std::make_shared<Entry>();
    e->out_dims = {M, N};
    e->k = K;
    Dims c2 = cd;
    if (has_c_) {
      while (c2.size() < 2) c2.insert(c2.begin(), 1);
      if ((c2[0] != 1 && c2[0] != M) || (c2[1] != 1 && c2[1] != N))
        throw std::runtime_error(cat("Gemm: C ", dims_str(cd), " does not broadcast to [", M, ",", N, "]"));
      e->c_md = plain_md(c2);
    }
    if (M == 0 || N == 0 || K == 0) return e;
    // A transposed is a [M,K] view with strides {1, M}; likewise B.
    e->a_md = trans_a_ ? memory::desc({M, K}, memory::data_type::f32, Dims{1, M}) : plain_md({M, K});
    e->b_md = trans_b_ ? memory::desc({K, N}, memory::data_type::f32, Dims{1, K}) : plain_md({K, N});
    e->y_md = plain_md({M, N});
    dnnl::post_ops po;
    int idx = 0;
    if (alpha_ != 1.f) {
      po.append_eltwise(dnnl::algorithm::eltwise_linear, alpha_, 0.f);
      ++idx;
    }
    if (has_c_) {
      po.append_binary(dnnl::algorithm::binary_add, e->c_md);
      e->c_post_op = idx;
    }
    dnnl::primitive_attr attr;
    attr.set_post_ops(po);
    memory::desc w_md = const_b_ ? memory::desc({K, N}, memory::data_type::f32, tag::any) : e->b_md;
    dnnl::matmul::primitive_desc pd(eng_, e->a_md, w_md, e->y_md, attr);
    e->prim = dnnl::matmul(pd);
    if (const_b_) e->weights = reorder_weights(eng_, e->b_md, B_.data.data(), pd.weights_desc());
    return e;
  }

  dnnl::engine eng_;
  bool trans_a_ = false, trans_b_ = false, const_b_ = false, has_c_ = false, const_c_ = false;
  float alpha_ = 1.f, beta_ = 1.f;
  ConstTensor B_, C_;
  ShapeCache<Entry> cache_;
};

}  // namespace

std::unique_ptr<Kernel> make_gemm(const NodeView& n, const dnnl::engine& eng) {
  return std::make_unique<GemmKernel>(n, eng);
}

}  // namespace mrt_dnnl
