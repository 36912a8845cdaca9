// Signal processing: DFT (opsets 17 and 20), STFT (17), the window generators
// HannWindow, HammingWindow, BlackmanWindow (17) and MelWeightMatrix (17).
//
// DFT works along one axis of a real ([..., 1]) or complex ([..., 2]) signal: forward
// (optionally keeping the n/2 + 1 non-negative frequencies: onesided), inverse (scaled by
// 1/n), and inverse onesided (a Hermitian half spectrum back to a real signal, the
// imaginary parts of the DC and Nyquist bins ignored). dft_length pads with zeros or
// truncates. Transforms of a power-of-two length use a radix-2 FFT, others a direct sum
// with a twiddle table; both in double.
#include <cmath>
#include <complex>
#include <vector>

#include "norm_util.h"

namespace mrt {
namespace {

using cd = std::complex<double>;
constexpr double kPi = 3.14159265358979323846;

// out[k] = sum_j in[j] * exp(sign * 2 pi i j k / n), in and out of length n.
void dft(const std::vector<cd>& in, std::vector<cd>& out, int sign) {
  const size_t n = in.size();
  out.assign(n, cd(0, 0));
  if (n == 0) return;
  if ((n & (n - 1)) == 0) {  // radix-2 iterative FFT
    out = in;
    for (size_t i = 1, j = 0; i < n; ++i) {
      size_t bit = n >> 1;
      for (; j & bit; bit >>= 1) j ^= bit;
      j ^= bit;
      if (i < j) std::swap(out[i], out[j]);
    }
    for (size_t len = 2; len <= n; len <<= 1) {
      const double ang = sign * 2 * kPi / static_cast<double>(len);
      for (size_t i = 0; i < n; i += len)
        for (size_t k = 0; k < len / 2; ++k) {
          const cd w = std::polar(1.0, ang * static_cast<double>(k));
          const cd u = out[i + k], v = out[i + k + len / 2] * w;
          out[i + k] = u + v;
          out[i + k + len / 2] = u - v;
        }
    }
    return;
  }
  std::vector<cd> tw(n);
  for (size_t k = 0; k < n; ++k) tw[k] = std::polar(1.0, sign * 2 * kPi * static_cast<double>(k) / static_cast<double>(n));
  for (size_t k = 0; k < n; ++k) {
    cd s(0, 0);
    for (size_t j = 0; j < n; ++j) s += in[j] * tw[(j * k) % n];
    out[k] = s;
  }
}

void dft_check(const Node& n, int64_t opset) {
  const bool inv = n.attr_int("inverse", 0) != 0;
  (void)inv;
  for (const char* a : {"inverse", "onesided"}) {
    const int64_t v = n.attr_int(a, 0);
    MRT_ENFORCE(v == 0 || v == 1, MRT_INVALID_MODEL, n.label(), ": attribute ", a, " must be 0 or 1, got ", v);
  }
}

void dft_kernel(OpContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& X = ctx.input(0);
  const bool inverse = node.attr_int("inverse", 0) != 0;
  const bool onesided = node.attr_int("onesided", 0) != 0;
  const int64_t rank = static_cast<int64_t>(X.rank());
  MRT_CHECK_ARG(rank >= 2 && (X.dim(rank - 1) == 1 || X.dim(rank - 1) == 2), "DFT: input ", X.describe(),
                " must end in a dimension of 1 (real) or 2 (complex)");
  int64_t axis = ctx.opset() >= 20 ? -2 : node.attr_int("axis", 1);
  if (ctx.opset() >= 20) {
    if (const Tensor* a = ctx.optional_input(2); a && a->numel() > 0) axis = a->int_at(0);
  }
  axis = normalize_axis(axis, rank, "axis");
  MRT_CHECK_ARG(axis != rank - 1, "DFT: axis ", axis, " is the real/imaginary dimension of ", X.describe());
  const int64_t len = X.dim(static_cast<size_t>(axis));
  int64_t n = inverse && onesided ? 2 * (len - 1) : len;
  if (const Tensor* l = ctx.optional_input(1); l && l->numel() > 0) n = l->int_at(0);
  MRT_CHECK_ARG(n > 0, "DFT: dft_length must be positive, got ", n);
  const bool complex_in = X.dim(rank - 1) == 2;
  int64_t out_len = n;
  if (!inverse && onesided) out_len = n / 2 + 1;
  Shape out_shape = X.shape();
  out_shape[static_cast<size_t>(axis)] = out_len;
  out_shape.back() = inverse && onesided ? 1 : 2;
  const int64_t outer = norm::prod(X.shape(), 0, static_cast<size_t>(axis));
  const int64_t inner = norm::prod(X.shape(), static_cast<size_t>(axis) + 1, X.rank() - 1);
  Tensor& Y = ctx.output(0, X.dtype(), out_shape);  // first: the tensor limit bounds the scratch below
  const std::vector<double> x = norm::to_doubles(X, "DFT input");
  std::vector<double> y(static_cast<size_t>(outer * out_len * inner * out_shape.back()));
  const int64_t cin = X.dim(rank - 1), cout = out_shape.back();
  std::vector<cd> sig, spec;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t j) {
        const double* p = &x[static_cast<size_t>(((o * len + j) * inner + i) * cin)];
        return cd(p[0], complex_in ? p[1] : 0.0);
      };
      sig.assign(static_cast<size_t>(n), cd(0, 0));
      if (inverse && onesided) {  // Hermitian extension of the half spectrum
        const int64_t half = n / 2 + 1;
        for (int64_t k = 0; k < std::min(half, len); ++k) sig[static_cast<size_t>(k)] = at(k);
        sig[0] = cd(sig[0].real(), 0);
        if (n % 2 == 0) sig[static_cast<size_t>(n / 2)] = cd(sig[static_cast<size_t>(n / 2)].real(), 0);
        for (int64_t k = 1; k < half; ++k)
          if (n - k >= half) sig[static_cast<size_t>(n - k)] = std::conj(sig[static_cast<size_t>(k)]);
      } else {
        for (int64_t j = 0; j < std::min(n, len); ++j) sig[static_cast<size_t>(j)] = at(j);
      }
      dft(sig, spec, inverse ? 1 : -1);
      for (int64_t k = 0; k < out_len; ++k) {
        cd v = spec[static_cast<size_t>(k)];
        if (inverse) v /= static_cast<double>(n);
        double* q = &y[static_cast<size_t>(((o * out_len + k) * inner + i) * cout)];
        q[0] = v.real();
        if (cout == 2) q[1] = v.imag();
      }
    }
  norm::from_doubles(Y, y);
}

void stft_kernel(OpContext& ctx) {
  const Tensor& X = ctx.input(0);
  const bool onesided = ctx.node().attr_int("onesided", 1) != 0;
  MRT_CHECK_ARG(X.rank() == 3 && (X.dim(2) == 1 || X.dim(2) == 2), "STFT: signal must be [batch, length, 1 or 2], got ",
                X.describe());
  const int64_t B = X.dim(0), L = X.dim(1), cin = X.dim(2);
  const int64_t step = ctx.input(1).int_at(0);
  MRT_CHECK_ARG(step > 0, "STFT: frame_step must be positive, got ", step);
  const Tensor* W = ctx.optional_input(2);
  const Tensor* FL = ctx.optional_input(3);
  MRT_CHECK_ARG(!W || W->rank() == 1, "STFT: window must be 1-D, got ", W ? W->describe() : std::string());
  int64_t frame = FL && FL->numel() > 0 ? FL->int_at(0) : (W ? W->dim(0) : L);
  MRT_CHECK_ARG(frame > 0 && frame <= L, "STFT: frame_length ", frame, " must be in [1, ", L, "]");
  std::vector<double> window(static_cast<size_t>(frame), 1.0);
  if (W) {
    MRT_CHECK_ARG(W->rank() == 1 && W->dim(0) == frame, "STFT: window ", W->describe(), " must have frame_length ",
                  frame, " values");
    window = norm::to_doubles(*W, "STFT window");
  }
  MRT_CHECK_ARG(!(onesided && cin == 2), "STFT: onesided output needs a real signal");
  const int64_t frames = 1 + (L - frame) / step;
  const int64_t bins = onesided ? frame / 2 + 1 : frame;
  Tensor& Y = ctx.output(0, X.dtype(), Shape{B, frames, bins, 2});  // first: the tensor limit bounds the scratch
  const std::vector<double> x = norm::to_doubles(X, "STFT signal");
  std::vector<double> y(static_cast<size_t>(B * frames * bins * 2));
  std::vector<cd> sig(static_cast<size_t>(frame)), spec;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t f = 0; f < frames; ++f) {
      for (int64_t j = 0; j < frame; ++j) {
        const double* p = &x[static_cast<size_t>((b * L + f * step + j) * cin)];
        sig[static_cast<size_t>(j)] = cd(p[0], cin == 2 ? p[1] : 0.0) * window[static_cast<size_t>(j)];
      }
      dft(sig, spec, -1);
      for (int64_t k = 0; k < bins; ++k) {
        double* q = &y[static_cast<size_t>(((b * frames + f) * bins + k) * 2)];
        q[0] = spec[static_cast<size_t>(k)].real();
        q[1] = spec[static_cast<size_t>(k)].imag();
      }
    }
  norm::from_doubles(Y, y);
}

enum class Window { kHann, kHamming, kBlackman };

template <Window kind>
void window_kernel(OpContext& ctx) {
  const Node& node = ctx.node();
  const int64_t size = ctx.input(0).int_at(0);
  MRT_CHECK_ARG(size >= 0, node.op_type, ": size must be >= 0, got ", size);
  const bool periodic = node.attr_int("periodic", 1) != 0;
  const DType out = static_cast<DType>(node.attr_int("output_datatype", 1));
  const double den = static_cast<double>(periodic ? size : size - 1);
  // The output first: its allocation checks the size against the tensor limit before the scratch below.
  Tensor& Y = ctx.output(0, out, Shape{size});
  std::vector<double> w(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; ++i) {
    const double a = 2 * kPi * static_cast<double>(i) / den;
    switch (kind) {
      case Window::kHann: w[static_cast<size_t>(i)] = 0.5 - 0.5 * std::cos(a); break;
      case Window::kHamming: w[static_cast<size_t>(i)] = 25.0 / 46.0 - (1 - 25.0 / 46.0) * std::cos(a); break;
      case Window::kBlackman: w[static_cast<size_t>(i)] = 0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2 * a); break;
    }
  }
  if (dtype_is_float(out)) {
    norm::from_doubles(Y, w);
  } else {
    MRT_DISPATCH_INTEGER(out, node.op_type.c_str(), {
      T* p = Y.data<T>();
      for (size_t i = 0; i < w.size(); ++i) p[i] = static_cast<T>(w[i]);
    });
  }
}

void window_check(const Node& n, int64_t) {
  const int64_t dt = n.attr_int("output_datatype", 1);
  MRT_ENFORCE(dtype_is_known(static_cast<int32_t>(dt)) && dtype_is_plain(static_cast<DType>(dt)) &&
                  !dtype_is_narrow(static_cast<DType>(dt)) && dt != 9,
              MRT_INVALID_MODEL, n.label(), ": attribute output_datatype ", dt, " is not a numeric element type");
}

void stft_check(const Node& n, int64_t) {
  const int64_t v = n.attr_int("onesided", 1);
  MRT_ENFORCE(v == 0 || v == 1, MRT_INVALID_MODEL, n.label(), ": attribute onesided must be 0 or 1, got ", v);
}

// MelWeightMatrix (opset 17): [dft_length / 2 + 1, num_mel_bins] triangular filters
// between lower_edge_hertz and upper_edge_hertz on the mel scale. The mel edges are
// computed in the edges' own precision (float32 for float inputs), as the reference does.
void mel_kernel(OpContext& ctx) {
  const int64_t bins = ctx.input(0).int_at(0), dft = ctx.input(1).int_at(0), rate = ctx.input(2).int_at(0);
  const Tensor& lo_t = ctx.input(3);
  const Tensor& hi_t = ctx.input(4);
  MRT_CHECK_ARG(bins > 0 && dft > 0 && rate > 0, "MelWeightMatrix: num_mel_bins, dft_length and sample_rate must be "
                "positive, got ", bins, ", ", dft, ", ", rate);
  const bool f32 = lo_t.dtype() != DType::kDouble;
  const double lo = lo_t.scalar_as_double(0), hi = hi_t.scalar_as_double(0);
  double lo_mel, step;
  if (f32) {
    const float lm = 2595.f * std::log1p(static_cast<float>(lo) / 700.f) / std::log(10.f);
    const float hm = 2595.f * std::log1p(static_cast<float>(hi) / 700.f) / std::log(10.f);
    lo_mel = lm;
    step = static_cast<float>((hm - lm) / static_cast<float>(bins + 2));
  } else {
    lo_mel = 2595 * std::log1p(lo / 700) / std::log(10.0);
    const double hm = 2595 * std::log1p(hi / 700) / std::log(10.0);
    step = (hm - lo_mel) / static_cast<double>(bins + 2);
  }
  const DType out = static_cast<DType>(ctx.node().attr_int("output_datatype", 1));
  Tensor& Y = ctx.output(0, out, Shape{dft / 2 + 1, bins});  // first: the tensor limit bounds the scratch below
  std::vector<int64_t> fb(static_cast<size_t>(bins + 2));
  for (int64_t i = 0; i < bins + 2; ++i) {
    const double mel = static_cast<double>(i) * step + lo_mel;
    const double hz = 700 * std::expm1(mel / 2595 * std::log(10.0));
    // Kept within [-1, spec + 1] (and NaN at -1) before the conversion: an edge outside the spectrum still
    // makes set() below refuse the first bin it reaches, and the triangle loops stay bounded.
    double edge = std::floor(static_cast<double>(dft + 1) * hz / static_cast<double>(rate));
    const double top = static_cast<double>(dft / 2 + 2);
    edge = !(edge >= -1.0) ? -1.0 : (edge > top ? top : edge);
    fb[static_cast<size_t>(i)] = static_cast<int64_t>(edge);
  }
  const int64_t spec = dft / 2 + 1;
  std::vector<double> w(static_cast<size_t>(spec * bins), 0.0);
  auto set = [&](int64_t j, int64_t i, double v) {
    MRT_CHECK_ARG(j >= 0 && j < spec, "MelWeightMatrix: frequency bin ", j, " falls outside the ", spec,
                  " spectrogram bins (edges beyond the Nyquist frequency?)");
    w[static_cast<size_t>(j * bins + i)] = v;
  };
  for (int64_t i = 0; i < bins; ++i) {
    const int64_t l = fb[static_cast<size_t>(i)], c = fb[static_cast<size_t>(i + 1)], h = fb[static_cast<size_t>(i + 2)];
    if (c - l == 0) set(c, i, 1.0);
    else
      for (int64_t j = l; j <= c; ++j) set(j, i, static_cast<double>(j - l) / static_cast<double>(c - l));
    if (h - c > 0)
      for (int64_t j = c; j < h; ++j) set(j, i, static_cast<double>(h - j) / static_cast<double>(h - c));
  }
  if (dtype_is_float(out)) {
    norm::from_doubles(Y, w);
  } else {
    MRT_DISPATCH_INTEGER(out, "MelWeightMatrix", {
      T* p = Y.data<T>();
      for (size_t i = 0; i < w.size(); ++i) p[i] = static_cast<T>(w[i]);
    });
  }
}

}  // namespace

void register_spectral_kernels(KernelRegistry& r) {
  r.add("MelWeightMatrix", 17, mel_kernel, window_check);
  r.add("DFT", 17, dft_kernel, dft_check);
  r.add("STFT", 17, stft_kernel, stft_check);
  r.add("HannWindow", 17, window_kernel<Window::kHann>, window_check);
  r.add("HammingWindow", 17, window_kernel<Window::kHamming>, window_check);
  r.add("BlackmanWindow", 17, window_kernel<Window::kBlackman>, window_check);
}

}  // namespace mrt
