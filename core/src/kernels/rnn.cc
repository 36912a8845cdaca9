// The recurrent layers RNN, GRU and LSTM (opsets 7-22; layout from opset 14).
//
// All directions (forward, reverse, bidirectional), per-direction activation lists with
// activation_alpha/beta (consumed in order by the activations that take them), clip,
// sequence_lens (steps at or past a sequence's length leave its state alone and write
// zeros to Y), initial_h / initial_c, LSTM peepholes and input_forget, GRU
// linear_before_reset, and layout 1 (batch-major X, Y, Y_h, Y_c).
//
// Per direction the input projection X * W^T (+ the biases) runs as one GEMM over every
// step; each step then adds H * R^T (a [batch, gates*hidden] GEMM) and applies the gate
// equations. float16 runs in float32 on widened copies; double in double.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>

#include "../gemm/sgemm.h"
#include "elementwise_math.h"
#include "norm_util.h"

namespace mrt {
namespace {

enum class Cell { kRnn, kGru, kLstm };

struct Activation {
  enum Kind { kRelu, kTanh, kSigmoid, kAffine, kLeakyRelu, kThresholdedRelu, kScaledTanh, kHardSigmoid, kElu,
              kSoftsign, kSoftplus } kind = kTanh;
  double alpha = 0, beta = 0;

  // Out of line: inlining the switch into every gate loop of every cell type and element
  // type tripled this file's code size for no measurable speed.
  template <class C>
#if defined(__GNUC__)
  __attribute__((noinline))
#endif
  C operator()(C x) const {
    const C a = static_cast<C>(alpha), b = static_cast<C>(beta);
    switch (kind) {
      case kRelu: return x > 0 ? x : C(0);
      case kTanh: return std::tanh(x);
      case kSigmoid: return C(1) / (C(1) + std::exp(-x));
      case kAffine: return a * x + b;
      case kLeakyRelu: return x >= 0 ? x : a * x;
      case kThresholdedRelu: return x > a ? x : C(0);
      case kScaledTanh: return a * std::tanh(b * x);
      case kHardSigmoid: return std::max(C(0), std::min(C(1), a * x + b));
      case kElu: return x >= 0 ? x : a * (std::exp(x) - C(1));
      case kSoftsign: return x / (C(1) + std::fabs(x));
      case kSoftplus: return std::log1p(std::exp(-std::fabs(x))) + std::max(x, C(0));
    }
    return x;
  }
};

// f over v[0, n) in place: float Sigmoid and Tanh through the vectorized approximations (elementwise_math.h, a
// few ulp; the AVX-512 or AVX2 build of them where the CPU has it), everything else element by element.
template <class C>
void activate(const Activation& f, C* v, int64_t n) {
  if constexpr (std::is_same<C, float>::value) {
    if (f.kind == Activation::kSigmoid) return sigmoid_array(v, v, n);
    if (f.kind == Activation::kTanh) return tanh_array(v, v, n);
  }
  for (int64_t j = 0; j < n; ++j) v[j] = f(v[j]);
}

struct RnnAttrs {
  Cell cell = Cell::kRnn;
  int gates = 1;            // gate blocks in W/R: 1, 3 (z r h) or 4 (i o f c)
  int acts_per_dir = 1;     // 1, 2 (f g) or 3 (f g h)
  int dirs = 1;
  bool reverse = false;     // direction "reverse" (one direction)
  int64_t hidden = 0;
  double clip = 0;          // 0: no clipping
  bool linear_before_reset = false;
  bool input_forget = false;
  int layout = 0;
  std::vector<Activation> acts;  // acts_per_dir per direction
};

const char* cell_name(Cell c) { return c == Cell::kRnn ? "RNN" : c == Cell::kGru ? "GRU" : "LSTM"; }

Activation parse_activation(const Node& n, const std::string& name, const std::vector<float>& alphas,
                            const std::vector<float>& betas, size_t& ai, size_t& bi) {
  std::string low;
  for (char ch : name) low += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  struct Known { const char* name; Activation::Kind kind; bool alpha; double da; bool beta; double db; };
  static const Known known[] = {
      {"relu", Activation::kRelu, false, 0, false, 0},
      {"tanh", Activation::kTanh, false, 0, false, 0},
      {"sigmoid", Activation::kSigmoid, false, 0, false, 0},
      {"affine", Activation::kAffine, true, 1.0, true, 0.0},
      {"leakyrelu", Activation::kLeakyRelu, true, 0.01, false, 0},
      {"thresholdedrelu", Activation::kThresholdedRelu, true, 1.0, false, 0},
      {"scaledtanh", Activation::kScaledTanh, true, 1.0, true, 1.0},
      {"hardsigmoid", Activation::kHardSigmoid, true, 0.2, true, 0.5},
      {"elu", Activation::kElu, true, 1.0, false, 0},
      {"softsign", Activation::kSoftsign, false, 0, false, 0},
      {"softplus", Activation::kSoftplus, false, 0, false, 0},
  };
  for (const Known& k : known) {
    if (low != k.name) continue;
    Activation a;
    a.kind = k.kind;
    a.alpha = k.da;
    a.beta = k.db;
    if (k.alpha && ai < alphas.size()) a.alpha = alphas[ai++];
    if (k.beta && bi < betas.size()) a.beta = betas[bi++];
    return a;
  }
  fail(MRT_INVALID_MODEL, n.label(), ": activation '", name, "' is not one of Relu, Tanh, Sigmoid, Affine, LeakyRelu, "
       "ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus");
}

RnnAttrs read_rnn_attrs(const Node& n, int64_t opset) {
  RnnAttrs a;
  a.cell = n.op_type == "RNN" ? Cell::kRnn : n.op_type == "GRU" ? Cell::kGru : Cell::kLstm;
  a.gates = a.cell == Cell::kRnn ? 1 : a.cell == Cell::kGru ? 3 : 4;
  a.acts_per_dir = a.cell == Cell::kRnn ? 1 : a.cell == Cell::kGru ? 2 : 3;
  const std::string dir = n.attr_string("direction", "forward");
  if (dir == "forward") a.dirs = 1;
  else if (dir == "reverse") { a.dirs = 1; a.reverse = true; }
  else if (dir == "bidirectional") a.dirs = 2;
  else fail(MRT_INVALID_MODEL, n.label(), ": attribute direction is '", dir, "'; expected forward, reverse or bidirectional");
  a.hidden = n.attr_int("hidden_size", 0);
  MRT_ENFORCE(n.has_attr("hidden_size") && a.hidden > 0, MRT_INVALID_MODEL, n.label(),
              ": attribute hidden_size must be a positive integer, got ", a.hidden);
  a.clip = n.attr_float("clip", 0.f);
  MRT_ENFORCE(!n.has_attr("clip") || a.clip > 0, MRT_INVALID_MODEL, n.label(), ": attribute clip must be positive, got ",
              a.clip);
  a.linear_before_reset = a.cell == Cell::kGru && n.attr_int("linear_before_reset", 0) != 0;
  a.input_forget = a.cell == Cell::kLstm && n.attr_int("input_forget", 0) != 0;
  a.layout = opset >= 14 ? static_cast<int>(n.attr_int("layout", 0)) : 0;
  MRT_ENFORCE(a.layout == 0 || a.layout == 1, MRT_INVALID_MODEL, n.label(), ": attribute layout must be 0 or 1, got ",
              a.layout);
  std::vector<std::string> names;
  if (const Attribute* at = n.attr("activations")) names = at->strings;
  const size_t want = static_cast<size_t>(a.acts_per_dir * a.dirs);
  if (names.empty()) {
    static const char* const defaults[3][3] = {{"Tanh", "", ""}, {"Sigmoid", "Tanh", ""}, {"Sigmoid", "Tanh", "Tanh"}};
    const int row = a.acts_per_dir - 1;
    for (int d = 0; d < a.dirs; ++d)
      for (int i = 0; i < a.acts_per_dir; ++i) names.emplace_back(defaults[row][i]);
  } else if (names.size() == static_cast<size_t>(a.acts_per_dir) && a.dirs == 2) {
    const std::vector<std::string> one = names;  // one list given for both directions
    names.insert(names.end(), one.begin(), one.end());
  }
  MRT_ENFORCE(names.size() == want, MRT_INVALID_MODEL, n.label(), ": attribute activations has ", names.size(),
              " entries; ", cell_name(a.cell), " with ", a.dirs, " direction(s) needs ", want);
  const std::vector<float> alphas = n.attr_floats("activation_alpha");
  const std::vector<float> betas = n.attr_floats("activation_beta");
  size_t ai = 0, bi = 0;
  for (const std::string& s : names) a.acts.push_back(parse_activation(n, s, alphas, betas, ai, bi));
  return a;
}

void rnn_check(const Node& n, int64_t opset) { (void)read_rnn_attrs(n, opset); }

// C[M,N] = A[M,K] * B[N,K]^T (+ C when accumulate).
void gemm_nt(int64_t M, int64_t N, int64_t K, const float* A, const float* B, float* C, bool accumulate,
             ThreadPool* pool) {
  sgemm(false, true, M, N, K, 1.f, A, K, B, K, accumulate ? 1.f : 0.f, C, N, pool);
}
void gemm_nt(int64_t M, int64_t N, int64_t K, const double* A, const double* B, double* C, bool accumulate,
             ThreadPool*) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t j = 0; j < N; ++j) {
      double s = accumulate ? C[m * N + j] : 0.0;
      for (int64_t k = 0; k < K; ++k) s += A[m * K + k] * B[j * K + k];
      C[m * N + j] = s;
    }
}

// Constant float weights packed once per direction for the GEMMs with B^T operands: W (the input projection over
// all the steps), and for batches of more than one row R (its first `rows` gate rows) and GRU's Rh; without them
// every run packed W and every step R.
struct RnnPackedWeights {
  std::vector<PackedB> w, r, rh;
};

// C[M,N] = A[M,K] * op-packed B (as gemm_nt with B pre-packed).
void gemm_packed(int64_t M, const float* A, const PackedB& B, float* C, ThreadPool* pool) {
  sgemm_packed_b(false, M, 1.f, A, B.K, B, 0.f, C, B.N, pool);
}

template <class C>
std::vector<C> widen(const Tensor& t) {
  std::vector<C> v(static_cast<size_t>(t.numel()));
  MRT_NORM_DISPATCH(t.dtype(), "RNN", {
    const T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<C>(norm::load(p[i]));
  });
  return v;
}

// The values of t as C: the tensor's own data when it already holds C (the weights are not copied on every run),
// else a widened copy.
template <class C>
struct ValuesAs {
  std::vector<C> copy;
  const C* p = nullptr;
  explicit ValuesAs(const Tensor& t) {
    if (t.dtype() == DTypeOf<C>::value) {
      p = t.data<C>();
    } else {
      copy = widen<C>(t);
      p = copy.data();
    }
  }
};

template <class C>
void store_all(const std::vector<C>& v, Tensor& t) {
  MRT_NORM_DISPATCH(t.dtype(), "RNN", {
    T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) p[i] = norm::store<T>(static_cast<double>(v[i]));
  });
}

template <class C>
void run_rnn(OpContext& ctx, const RnnAttrs& a) {
  const Tensor& Xt = ctx.input(0);
  const Tensor& Wt = ctx.input(1);
  const Tensor& Rt = ctx.input(2);
  const char* op = cell_name(a.cell);
  MRT_CHECK_ARG(Xt.rank() == 3, op, ": X must have rank 3, got ", Xt.describe());
  const int64_t S = a.layout ? Xt.dim(1) : Xt.dim(0);
  const int64_t B = a.layout ? Xt.dim(0) : Xt.dim(1);
  const int64_t I = Xt.dim(2);
  const int64_t H = a.hidden, G = a.gates, D = a.dirs, GH = G * H;
  MRT_CHECK_ARG(Wt.rank() == 3 && Wt.dim(0) == D && Wt.dim(1) == GH && Wt.dim(2) == I, op, ": W must be [", D, ",",
                GH, ",", I, "], got ", Wt.describe());
  MRT_CHECK_ARG(Rt.rank() == 3 && Rt.dim(0) == D && Rt.dim(1) == GH && Rt.dim(2) == H, op, ": R must be [", D, ",",
                GH, ",", H, "], got ", Rt.describe());
  const Tensor* Bt = ctx.optional_input(3);
  const Tensor* Lt = ctx.optional_input(4);
  const Tensor* H0t = ctx.optional_input(5);
  const Tensor* C0t = a.cell == Cell::kLstm ? ctx.optional_input(6) : nullptr;
  const Tensor* Pt = a.cell == Cell::kLstm ? ctx.optional_input(7) : nullptr;
  if (Bt) MRT_CHECK_ARG(Bt->rank() == 2 && Bt->dim(0) == D && Bt->dim(1) == 2 * GH, op, ": B must be [", D, ",", 2 * GH,
                        "], got ", Bt->describe());
  const Shape state_shape = a.layout ? Shape{B, D, H} : Shape{D, B, H};
  if (H0t) MRT_CHECK_ARG(H0t->shape() == state_shape, op, ": initial_h must be ", shape_str(state_shape), ", got ",
                         H0t->describe());
  if (C0t) MRT_CHECK_ARG(C0t->shape() == state_shape, op, ": initial_c must be ", shape_str(state_shape), ", got ",
                         C0t->describe());
  if (Pt) MRT_CHECK_ARG(Pt->rank() == 2 && Pt->dim(0) == D && Pt->dim(1) == 3 * H, op, ": P must be [", D, ",", 3 * H,
                        "], got ", Pt->describe());
  std::vector<int64_t> lens(static_cast<size_t>(B), S);
  if (Lt) {
    MRT_CHECK_ARG(Lt->rank() == 1 && Lt->dim(0) == B, op, ": sequence_lens must be [", B, "], got ", Lt->describe());
    lens = Lt->to_int64_vector();
    for (int64_t l : lens) MRT_CHECK_ARG(l >= 0 && l <= S, op, ": sequence_lens value ", l, " is outside [0, ", S, "]");
  }

  // X as [S, B, I]; states as [D, B, H].
  std::vector<C> x = widen<C>(Xt);
  if (a.layout) {
    std::vector<C> t(x.size());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < S; ++s) std::memcpy(&t[(s * B + b) * I], &x[(b * S + s) * I], sizeof(C) * I);
    x.swap(t);
  }
  auto state_in = [&](const Tensor* t) {
    std::vector<C> v(static_cast<size_t>(D * B * H), C(0));
    if (!t) return v;
    std::vector<C> w = widen<C>(*t);
    if (!a.layout) return w;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t d = 0; d < D; ++d) std::memcpy(&v[(d * B + b) * H], &w[(b * D + d) * H], sizeof(C) * H);
    return v;
  };
  const ValuesAs<C> w_values(Wt), r_values(Rt);
  const C* w = w_values.p;
  const C* r = r_values.p;
  const std::vector<C> bias = Bt ? widen<C>(*Bt) : std::vector<C>(static_cast<size_t>(D * 2 * GH), C(0));
  const std::vector<C> peep = Pt ? widen<C>(*Pt) : std::vector<C>(static_cast<size_t>(D * 3 * H), C(0));
  std::vector<C> h_all = state_in(H0t), c_all = state_in(C0t);
  std::vector<C> y(static_cast<size_t>(S * D * B * H), C(0));  // [S, D, B, H]

  std::shared_ptr<RnnPackedWeights> packed;
  const int64_t r_rows = (a.cell == Cell::kGru && !a.linear_before_reset) ? 2 * H : GH;
  if constexpr (std::is_same<C, float>::value) {
    if (ctx.input_is_constant(1) && ctx.input_is_constant(2) && Wt.dtype() == DType::kFloat &&
        Rt.dtype() == DType::kFloat && S * B > 1) {
      packed = ctx.node_cache<RnnPackedWeights>([&] {
        auto pw = std::make_shared<RnnPackedWeights>();
        for (int64_t d = 0; d < D; ++d) {
          pw->w.push_back(sgemm_pack_b(true, I, GH, w + d * GH * I, I));
          pw->r.push_back(sgemm_pack_b(true, H, r_rows, r + d * GH * H, H));
          if (r_rows != GH) pw->rh.push_back(sgemm_pack_b(true, H, H, r + d * GH * H + 2 * H * H, H));
        }
        return pw;
      });
    }
  }
  const C clip = static_cast<C>(a.clip);
  auto clipped = [&](C v) { return a.clip > 0 ? std::max(-clip, std::min(clip, v)) : v; };
  std::vector<C> xw(static_cast<size_t>(S * B * GH)), hr(static_cast<size_t>(B * GH)), rh(static_cast<size_t>(B * H));
  std::vector<C> h_new(static_cast<size_t>(B * H)), c_new(static_cast<size_t>(B * H)), gates(static_cast<size_t>(4 * H));
  for (int64_t d = 0; d < D; ++d) {
    const bool backward = a.reverse || d == 1;
    const C* wd = w + d * GH * I;
    const C* rd = r + d * GH * H;
    const C* wb = &bias[d * 2 * GH];
    const C* rb = wb + GH;
    const C* pd = &peep[d * 3 * H];
    const Activation* act = &a.acts[static_cast<size_t>(d * a.acts_per_dir)];
    C* h = &h_all[d * B * H];
    C* c = &c_all[d * B * H];
    if constexpr (std::is_same<C, float>::value) {
      if (packed) gemm_packed(S * B, x.data(), packed->w[static_cast<size_t>(d)], xw.data(), &ctx.threads());
    }
    if (S * B > 0 && !packed) gemm_nt(S * B, GH, I, x.data(), wd, xw.data(), false, &ctx.threads());
    for (int64_t step = 0; step < S; ++step) {
      const int64_t t = backward ? S - 1 - step : step;
      // Recurrent term; GRU without linear_before_reset needs r first, so its h block waits.
      const int64_t rows = r_rows;
      // (one row: a matrix-vector product over R as it is)
      bool done = false;
      if constexpr (std::is_same<C, float>::value) {
        if (packed && B > 1) {
          gemm_packed(B, h, packed->r[static_cast<size_t>(d)], hr.data(), &ctx.threads());
          done = true;
        }
      }
      if (!done) gemm_nt(B, rows, H, h, rd, hr.data(), false, &ctx.threads());
      if (rows != GH) {  // keep hr laid out [B, GH]: the gemm above wrote [B, 2H] densely
        for (int64_t b = B - 1; b >= 0; --b)
          std::memmove(&hr[b * GH], &hr[b * rows], sizeof(C) * rows);
      }
      for (int64_t b = 0; b < B; ++b) {
        const bool active = t < lens[static_cast<size_t>(b)];
        const C* xg = &xw[(t * B + b) * GH];
        const C* hg = &hr[b * GH];
        const C* cp = c + b * H;
        C* hn = &h_new[b * H];
        C* cn = &c_new[b * H];
        if (!active) continue;
        // each gate's pre-activations over the row, then its activation over the row at once
        switch (a.cell) {
          case Cell::kRnn:
            for (int64_t j = 0; j < H; ++j) hn[j] = clipped(xg[j] + hg[j] + wb[j] + rb[j]);
            activate(act[0], hn, H);
            break;
          case Cell::kGru: {
            // gates z (0), r (1), h (2): z kept in c_new for the update below, r in rh
            C* rr = &rh[b * H];
            for (int64_t j = 0; j < H; ++j) {
              cn[j] = clipped(xg[j] + hg[j] + wb[j] + rb[j]);
              rr[j] = clipped(xg[H + j] + hg[H + j] + wb[H + j] + rb[H + j]);
            }
            activate(act[0], cn, H);
            activate(act[0], rr, H);
            break;
          }
          case Cell::kLstm: {
            // gates i (0), o (1), f (2), c (3); peepholes i, o, f
            C* gi = gates.data();
            C* gf = gi + H;
            C* gg = gf + H;
            C* go = gg + H;
            for (int64_t j = 0; j < H; ++j) {
              gi[j] = clipped(xg[j] + hg[j] + wb[j] + rb[j] + pd[j] * cp[j]);
              gg[j] = clipped(xg[3 * H + j] + hg[3 * H + j] + wb[3 * H + j] + rb[3 * H + j]);
            }
            activate(act[0], gi, H);
            activate(act[1], gg, H);
            if (a.input_forget) {
              for (int64_t j = 0; j < H; ++j) gf[j] = C(1) - gi[j];
            } else {
              for (int64_t j = 0; j < H; ++j)
                gf[j] = clipped(xg[2 * H + j] + hg[2 * H + j] + wb[2 * H + j] + rb[2 * H + j] + pd[2 * H + j] * cp[j]);
              activate(act[0], gf, H);
            }
            for (int64_t j = 0; j < H; ++j) {
              const C ct = gf[j] * cp[j] + gi[j] * gg[j];
              cn[j] = ct;
              go[j] = clipped(xg[H + j] + hg[H + j] + wb[H + j] + rb[H + j] + pd[H + j] * ct);
              hn[j] = ct;
            }
            activate(act[0], go, H);
            activate(act[2], hn, H);
            for (int64_t j = 0; j < H; ++j) hn[j] *= go[j];
            break;
          }
        }
      }
      if (a.cell == Cell::kGru) {
        const C* rh_w = rd + 2 * H * H;  // Rh: [H, H]
        if (a.linear_before_reset) {
          // hr already holds h * Rh^T in its h block
          for (int64_t b = 0; b < B; ++b) {
            if (t >= lens[static_cast<size_t>(b)]) continue;
            const C* xg = &xw[(t * B + b) * GH];
            const C* hg = &hr[b * GH];
            C* ht = gates.data();
            for (int64_t j = 0; j < H; ++j)
              ht[j] = clipped(xg[2 * H + j] + wb[2 * H + j] + rh[b * H + j] * (hg[2 * H + j] + rb[2 * H + j]));
            activate(act[1], ht, H);
            for (int64_t j = 0; j < H; ++j) {
              const C z = c_new[b * H + j];
              h_new[b * H + j] = (C(1) - z) * ht[j] + z * h[b * H + j];
            }
          }
        } else {
          // (r . h) * Rh^T
          std::vector<C> rhp(static_cast<size_t>(B * H));
          for (int64_t i = 0; i < B * H; ++i) rhp[i] = rh[i] * h[i];
          std::vector<C> prod(static_cast<size_t>(B * H));
          bool done_h = false;
          if constexpr (std::is_same<C, float>::value) {
            if (packed && B > 1) {
              gemm_packed(B, rhp.data(), packed->rh[static_cast<size_t>(d)], prod.data(), &ctx.threads());
              done_h = true;
            }
          }
          if (!done_h) gemm_nt(B, H, H, rhp.data(), rh_w, prod.data(), false, &ctx.threads());
          for (int64_t b = 0; b < B; ++b) {
            if (t >= lens[static_cast<size_t>(b)]) continue;
            const C* xg = &xw[(t * B + b) * GH];
            C* ht = gates.data();
            for (int64_t j = 0; j < H; ++j) ht[j] = clipped(xg[2 * H + j] + prod[b * H + j] + rb[2 * H + j] + wb[2 * H + j]);
            activate(act[1], ht, H);
            for (int64_t j = 0; j < H; ++j) {
              const C z = c_new[b * H + j];
              h_new[b * H + j] = (C(1) - z) * ht[j] + z * h[b * H + j];
            }
          }
        }
      }
      for (int64_t b = 0; b < B; ++b) {
        if (t >= lens[static_cast<size_t>(b)]) continue;  // state kept, Y stays zero
        std::memcpy(h + b * H, &h_new[b * H], sizeof(C) * H);
        if (a.cell == Cell::kLstm) std::memcpy(c + b * H, &c_new[b * H], sizeof(C) * H);
        std::memcpy(&y[((t * D + d) * B + b) * H], &h_new[b * H], sizeof(C) * H);
      }
    }
  }

  const DType dt = Xt.dtype();
  if (ctx.has_output(0)) {
    Shape ys = a.layout ? Shape{B, S, D, H} : Shape{S, D, B, H};
    Tensor& Y = ctx.output(0, dt, ys);
    if (a.layout) {
      std::vector<C> t(y.size());
      for (int64_t s = 0; s < S; ++s)
        for (int64_t d = 0; d < D; ++d)
          for (int64_t b = 0; b < B; ++b)
            std::memcpy(&t[((b * S + s) * D + d) * H], &y[((s * D + d) * B + b) * H], sizeof(C) * H);
      y.swap(t);
    }
    store_all(y, Y);
  }
  auto state_out = [&](size_t idx, std::vector<C>& v) {
    if (!ctx.has_output(idx)) return;
    Tensor& T_ = ctx.output(idx, dt, state_shape);
    if (a.layout) {
      std::vector<C> t(v.size());
      for (int64_t d = 0; d < D; ++d)
        for (int64_t b = 0; b < B; ++b) std::memcpy(&t[(b * D + d) * H], &v[(d * B + b) * H], sizeof(C) * H);
      v.swap(t);
    }
    store_all(v, T_);
  };
  state_out(1, h_all);
  if (a.cell == Cell::kLstm) state_out(2, c_all);
}

void rnn_kernel(OpContext& ctx) {
  const RnnAttrs a = read_rnn_attrs(ctx.node(), ctx.opset());
  const DType dt = ctx.input(0).dtype();
  for (size_t i : {size_t{1}, size_t{2}, size_t{3}, size_t{5}, size_t{6}, size_t{7}})
    if (ctx.has_input(i) && !(a.cell != Cell::kLstm && i > 5))
      MRT_CHECK_ARG(ctx.input(i).dtype() == dt, cell_name(a.cell), ": input ", i, " has element type ",
                    dtype_name(ctx.input(i).dtype()), ", X has ", dtype_name(dt));
  switch (dt) {
    case DType::kFloat: case DType::kFloat16: case DType::kBFloat16: run_rnn<float>(ctx, a); break;
    case DType::kDouble: run_rnn<double>(ctx, a); break;
    default: fail(MRT_NOT_IMPLEMENTED, cell_name(a.cell), ": element type ", dtype_name(dt), " is not supported");
  }
}

}  // namespace

void register_rnn_kernels(KernelRegistry& r) {
  r.add("RNN", 7, rnn_kernel, rnn_check);
  r.add("GRU", 7, rnn_kernel, rnn_check);
  r.add("LSTM", 7, rnn_kernel, rnn_check);
}

}  // namespace mrt
