// Einsum: parse the equation (explicit or implicit output, "..." broadcast dimensions,
// repeated labels for diagonals), then evaluate it as a direct loop over the output
// labels and the summed labels. Two-operand float32 contractions without repeated
// labels are rewritten as a batched matrix product (transpose + SGEMM).
#include <algorithm>
#include <cctype>
#include <map>
#include <string>
#include <vector>

#include "../gemm/sgemm.h"
#include "../kernel.h"
#include "linalg_util.h"
#include "shape_common.h"

namespace mrt {

namespace {

constexpr int kEllipsisLabel = 1000;  // label ids: letters are their char code; "..." dims 1000+i

struct TermText {
  std::string before, after;
  bool ellipsis = false;
};

TermText parse_term_text(const std::string& t, const std::string& eq) {
  TermText r;
  size_t dots = t.find("...");
  if (dots != std::string::npos) {
    r.ellipsis = true;
    r.before = t.substr(0, dots);
    r.after = t.substr(dots + 3);
  } else {
    r.before = t;
  }
  for (const std::string* s : {&r.before, &r.after})
    for (char ch : *s)
      MRT_CHECK_ARG(std::isalpha(static_cast<unsigned char>(ch)), "Einsum: invalid character '", ch,
                    "' in equation '", eq, "'");
  return r;
}

struct EinsumPlan {
  std::vector<std::vector<int>> in_labels;  // per input, one label per dimension
  std::vector<int> out_labels;
  std::map<int, int64_t> size;  // label -> extent
};

EinsumPlan plan_einsum(const std::string& equation, const std::vector<const Tensor*>& inputs) {
  std::string eq;
  for (char ch : equation)
    if (!std::isspace(static_cast<unsigned char>(ch))) eq += ch;
  std::string lhs = eq, rhs;
  const size_t arrow = eq.find("->");
  const bool explicit_out = arrow != std::string::npos;
  if (explicit_out) {
    lhs = eq.substr(0, arrow);
    rhs = eq.substr(arrow + 2);
    MRT_CHECK_ARG(rhs.find("->") == std::string::npos, "Einsum: more than one '->' in equation '", equation, "'");
  }
  std::vector<std::string> terms;
  size_t start = 0;
  for (;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  MRT_CHECK_ARG(terms.size() == inputs.size(), "Einsum: equation '", equation, "' has ", terms.size(),
                " operand terms but the node has ", inputs.size(), " inputs");

  EinsumPlan p;
  std::vector<TermText> texts;
  std::vector<int64_t> ell(inputs.size(), 0);
  int64_t E = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    texts.push_back(parse_term_text(terms[i], equation));
    const int64_t letters = static_cast<int64_t>(texts[i].before.size() + texts[i].after.size());
    const int64_t rank = static_cast<int64_t>(inputs[i]->rank());
    if (texts[i].ellipsis) {
      MRT_CHECK_ARG(rank >= letters, "Einsum: operand ", i, " has rank ", rank, " but term '", terms[i], "' needs at least ",
                    letters);
      ell[i] = rank - letters;
    } else {
      MRT_CHECK_ARG(rank == letters, "Einsum: operand ", i, " has rank ", rank, " but term '", terms[i], "' has ",
                    letters, " labels");
    }
    E = std::max(E, ell[i]);
  }
  std::map<int, int> count;
  for (size_t i = 0; i < terms.size(); ++i) {
    std::vector<int> labels;
    for (char ch : texts[i].before) labels.push_back(static_cast<unsigned char>(ch));
    for (int64_t t = 0; t < ell[i]; ++t) labels.push_back(kEllipsisLabel + static_cast<int>(E - ell[i] + t));
    for (char ch : texts[i].after) labels.push_back(static_cast<unsigned char>(ch));
    const Shape& shape = inputs[i]->shape();
    for (size_t d = 0; d < labels.size(); ++d) {
      const int l = labels[d];
      if (l < kEllipsisLabel) ++count[l];
      auto it = p.size.find(l);
      if (it == p.size.end()) {
        p.size[l] = shape[d];
      } else if (it->second == 1) {
        it->second = shape[d];
      } else {
        MRT_CHECK_ARG(shape[d] == 1 || shape[d] == it->second, "Einsum: dimension ", d, " of operand ", i, " (",
                      shape[d], ") does not match the other extent (", it->second, ") of its label in '", equation,
                      "'");
      }
    }
    p.in_labels.push_back(std::move(labels));
  }
  if (explicit_out) {
    TermText out = parse_term_text(rhs, equation);
    for (char ch : out.before) p.out_labels.push_back(static_cast<unsigned char>(ch));
    if (out.ellipsis)
      for (int64_t t = 0; t < E; ++t) p.out_labels.push_back(kEllipsisLabel + static_cast<int>(t));
    for (char ch : out.after) p.out_labels.push_back(static_cast<unsigned char>(ch));
  } else {
    for (int64_t t = 0; t < E; ++t) p.out_labels.push_back(kEllipsisLabel + static_cast<int>(t));
    for (const auto& kv : count)  // std::map: ascending char code, as numpy orders implicit output
      if (kv.second == 1) p.out_labels.push_back(kv.first);
  }
  std::vector<int> seen;
  for (int l : p.out_labels) {
    MRT_CHECK_ARG(p.size.count(l) != 0, "Einsum: output label '", static_cast<char>(l),
                  "' does not appear in any operand of '", equation, "'");
    MRT_CHECK_ARG(std::find(seen.begin(), seen.end(), l) == seen.end(), "Einsum: output label '",
                  static_cast<char>(l), "' repeated in '", equation, "'");
    seen.push_back(l);
  }
  return p;
}

// Per-input element strides of each label (repeated labels add up: a diagonal; broadcast
// size-1 dims contribute 0).
std::vector<int64_t> label_strides(const EinsumPlan& p, size_t input, const Shape& shape,
                                   const std::vector<int>& labels) {
  std::vector<int64_t> st(labels.size(), 0);
  const std::vector<int64_t> strides = shape_strides(shape);
  const std::vector<int>& in = p.in_labels[input];
  for (size_t d = 0; d < in.size(); ++d) {
    if (shape[d] == 1 && p.size.at(in[d]) != 1) continue;
    for (size_t j = 0; j < labels.size(); ++j)
      if (labels[j] == in[d]) st[j] += strides[d];
  }
  return st;
}

template <class T>
void einsum_loop(OpContext& ctx, const EinsumPlan& p, const std::vector<const T*>& in,
                 const std::vector<const Tensor*>& inputs, T* out) {
  using Acc = linalg_acc_t<T>;
  std::vector<int> red;
  for (const auto& kv : p.size)
    if (std::find(p.out_labels.begin(), p.out_labels.end(), kv.first) == p.out_labels.end()) red.push_back(kv.first);
  const size_t n_in = in.size(), n_out = p.out_labels.size(), n_red = red.size();
  std::vector<int64_t> out_size(n_out), red_size(n_red);
  int64_t O = 1, R = 1;
  for (size_t j = 0; j < n_out; ++j) O *= (out_size[j] = p.size.at(p.out_labels[j]));
  for (size_t j = 0; j < n_red; ++j) R *= (red_size[j] = p.size.at(red[j]));
  if (O == 0) return;
  std::vector<std::vector<int64_t>> ost(n_in), rst(n_in);
  for (size_t t = 0; t < n_in; ++t) {
    ost[t] = label_strides(p, t, inputs[t]->shape(), p.out_labels);
    rst[t] = label_strides(p, t, inputs[t]->shape(), red);
  }
  auto run = [&](int64_t o0, int64_t o1) {
    std::vector<int64_t> oidx(n_out, 0), ridx(n_red, 0), base(n_in, 0), off(n_in, 0);
    int64_t rem = o0;
    for (size_t j = n_out; j-- > 0;) {
      oidx[j] = rem % out_size[j];
      rem /= out_size[j];
      for (size_t t = 0; t < n_in; ++t) base[t] += oidx[j] * ost[t][j];
    }
    for (int64_t o = o0; o < o1; ++o) {
      Acc acc = Acc(0);
      off = base;
      std::fill(ridx.begin(), ridx.end(), 0);
      for (int64_t r = 0; r < R; ++r) {
        Acc prod = linalg_to_acc<T>(in[0][off[0]]);
        for (size_t t = 1; t < n_in; ++t) prod *= linalg_to_acc<T>(in[t][off[t]]);
        acc += prod;
        for (size_t j = n_red; j-- > 0;) {
          if (++ridx[j] < red_size[j]) {
            for (size_t t = 0; t < n_in; ++t) off[t] += rst[t][j];
            break;
          }
          for (size_t t = 0; t < n_in; ++t) off[t] -= rst[t][j] * (red_size[j] - 1);
          ridx[j] = 0;
        }
      }
      out[o] = linalg_from_acc<T>(acc);
      for (size_t j = n_out; j-- > 0;) {
        if (++oidx[j] < out_size[j]) {
          for (size_t t = 0; t < n_in; ++t) base[t] += ost[t][j];
          break;
        }
        for (size_t t = 0; t < n_in; ++t) base[t] -= ost[t][j] * (out_size[j] - 1);
        oidx[j] = 0;
      }
    }
  };
  const double work = static_cast<double>(O) * static_cast<double>(std::max<int64_t>(R, 1)) * n_in;
  if (work > 1e5 && O > 1) {
    ctx.threads().parallel_for(O, std::max<int64_t>(1, static_cast<int64_t>(3e4 / std::max<int64_t>(R, 1))), run);
  } else {
    run(0, O);
  }
}

// Copy `src` (shape `shape`) permuted by `perm` into `dst` (dst dim d = src dim perm[d]).
void permute_copy(const OpContext& ctx, const float* src, const Shape& shape, const std::vector<int64_t>& perm,
                  float* dst) {
  shape_kernels::transpose_copy(ctx, sizeof(float), shape, perm, src, dst);
}

// Two float32 operands, no label repeated within an operand, no size-1 broadcasting, every
// label in an operand either shared (batch or contracted) or kept in the output: evaluate as
// out[b, m, n] = sum_k A[b, m, k] * B[b, k, n]. Operands already laid out as [b, m, k] /
// [b, k, m] (resp. [b, k, n] / [b, n, k]) are used in place; others are permuted first; the
// product is permuted into the output order unless it already is in it.
bool einsum_as_matmul(OpContext& ctx, const EinsumPlan& p, const Tensor& a, const Tensor& b, Tensor& y) {
  const std::vector<int>& la = p.in_labels[0];
  const std::vector<int>& lb = p.in_labels[1];
  auto has = [](const std::vector<int>& v, int l) { return std::find(v.begin(), v.end(), l) != v.end(); };
  for (const std::vector<int>* v : {&la, &lb})
    for (size_t i = 0; i < v->size(); ++i)
      for (size_t j = i + 1; j < v->size(); ++j)
        if ((*v)[i] == (*v)[j]) return false;
  for (size_t d = 0; d < la.size(); ++d)
    if (a.dim(d) != p.size.at(la[d])) return false;
  for (size_t d = 0; d < lb.size(); ++d)
    if (b.dim(d) != p.size.at(lb[d])) return false;
  // Group orders: batch, m and k as they appear in A, n as in B.
  std::vector<int> batch, mlab, nlab, klab;
  for (int l : la) {
    const bool in_b = has(lb, l), in_o = has(p.out_labels, l);
    if (in_b && in_o) batch.push_back(l);
    else if (in_b) klab.push_back(l);
    else if (in_o) mlab.push_back(l);
    else return false;  // summed over A alone: leave to the loop
  }
  for (int l : lb)
    if (!has(la, l)) {
      if (has(p.out_labels, l)) nlab.push_back(l);
      else return false;
    }
  int64_t Bt = 1, M = 1, N = 1, K = 1;
  for (int l : batch) Bt *= p.size.at(l);
  for (int l : mlab) M *= p.size.at(l);
  for (int l : nlab) N *= p.size.at(l);
  for (int l : klab) K *= p.size.at(l);
  auto cat = [](std::initializer_list<const std::vector<int>*> groups) {
    std::vector<int> v;
    for (const std::vector<int>* g : groups) v.insert(v.end(), g->begin(), g->end());
    return v;
  };
  auto perm_of = [](const std::vector<int>& src, const std::vector<int>& order) {
    std::vector<int64_t> perm;
    for (int l : order) perm.push_back(std::find(src.begin(), src.end(), l) - src.begin());
    return perm;
  };
  // A as [batch, m, k] (or [batch, k, m] read transposed).
  bool ta = false;
  const float* Ap = a.data<float>();
  std::vector<float> a_copy;
  if (la != cat({&batch, &mlab, &klab})) {
    if (la == cat({&batch, &klab, &mlab})) {
      ta = true;
    } else {
      a_copy.resize(static_cast<size_t>(a.numel()));
      permute_copy(ctx, Ap, a.shape(), perm_of(la, cat({&batch, &mlab, &klab})), a_copy.data());
      Ap = a_copy.data();
    }
  }
  // B as [batch, k, n] (or [batch, n, k] read transposed); k in A's order.
  bool tb = false;
  const float* Bp = b.data<float>();
  std::vector<float> b_copy;
  if (lb != cat({&batch, &klab, &nlab})) {
    if (lb == cat({&batch, &nlab, &klab})) {
      tb = true;
    } else {
      b_copy.resize(static_cast<size_t>(b.numel()));
      permute_copy(ctx, Bp, b.shape(), perm_of(lb, cat({&batch, &klab, &nlab})), b_copy.data());
      Bp = b_copy.data();
    }
  }
  const std::vector<int> prod_labels = cat({&batch, &mlab, &nlab});
  const bool direct_out = prod_labels == p.out_labels;
  std::vector<float> prod;
  float* Yp = y.data<float>();
  if (!direct_out) {
    prod.resize(static_cast<size_t>(Bt * M * N));
    Yp = prod.data();
  }
  const int64_t lda = ta ? M : K, ldb = tb ? K : N;
  linalg_for_each_matrix(ctx, Bt, 2.0 * M * N * K, true, [&](int64_t b0, int64_t b1, ThreadPool* pool) {
    for (int64_t i = b0; i < b1; ++i)
      sgemm(ta, tb, M, N, K, 1.f, Ap + i * M * K, lda, Bp + i * K * N, ldb, 0.f, Yp + i * M * N, N, pool);
  });
  if (!direct_out) {
    Shape pshape;
    for (int l : prod_labels) pshape.push_back(p.size.at(l));
    permute_copy(ctx, prod.data(), pshape, perm_of(prod_labels, p.out_labels), y.data<float>());
  }
  return true;
}

void einsum_kernel(OpContext& ctx) {
  const std::string equation = ctx.node().attr_string("equation", "");
  std::vector<const Tensor*> inputs;
  for (size_t i = 0; i < ctx.input_count(); ++i) inputs.push_back(&ctx.input(i));
  MRT_CHECK_ARG(!inputs.empty(), "Einsum: needs at least one input");
  const DType dt = inputs[0]->dtype();
  for (const Tensor* t : inputs)
    MRT_CHECK_ARG(t->dtype() == dt, "Einsum: input types differ (", dtype_name(dt), " vs ", dtype_name(t->dtype()),
                  ")");
  const EinsumPlan p = plan_einsum(equation, inputs);
  Shape out_shape;
  for (int l : p.out_labels) out_shape.push_back(p.size.at(l));
  Tensor& y = ctx.output(0, dt, out_shape);
  if (y.numel() == 0) return;
  if (dt == DType::kFloat && inputs.size() == 2 && einsum_as_matmul(ctx, p, *inputs[0], *inputs[1], y)) return;
  if (dt == DType::kFloat16 || dt == DType::kBFloat16) {
    std::vector<std::vector<float>> conv;
    std::vector<const float*> ptrs;
    for (const Tensor* t : inputs) conv.push_back(linalg_to_float(*t));
    for (const auto& v : conv) ptrs.push_back(v.data());
    std::vector<float> out(static_cast<size_t>(y.numel()));
    einsum_loop<float>(ctx, p, ptrs, inputs, out.data());
    linalg_from_float(out, y);
    return;
  }
  MRT_DISPATCH_NUMERIC(dt, "Einsum", {
    std::vector<const T*> ptrs;
    for (const Tensor* t : inputs) ptrs.push_back(t->data<T>());
    einsum_loop<T>(ctx, p, ptrs, inputs, y.data<T>());
  });
}

void einsum_check(const Node& node, int64_t) {
  MRT_ENFORCE(node.has_attr("equation"), MRT_INVALID_MODEL, "Einsum: attribute 'equation' is required");
}

}  // namespace

void register_einsum_kernel(KernelRegistry& r) { r.add("Einsum", 12, einsum_kernel, einsum_check); }

}  // namespace mrt
