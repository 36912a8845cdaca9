#include "narrow_dtype.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace mrt {
namespace narrow {
namespace {

// Layout of a small binary floating-point format.
struct Minifloat {
  int exp_bits;
  int mant_bits;
  int bias;
  enum class Special { kIeee, kFn, kFnuz, kNone } special;  // how inf/NaN are encoded
  double max;                                              // largest finite value
};

Minifloat format_of(DType t) {
  switch (t) {
    case DType::kFloat8E4M3FN: return {4, 3, 7, Minifloat::Special::kFn, 448.0};
    case DType::kFloat8E4M3FNUZ: return {4, 3, 8, Minifloat::Special::kFnuz, 240.0};
    case DType::kFloat8E5M2: return {5, 2, 15, Minifloat::Special::kIeee, 57344.0};
    case DType::kFloat8E5M2FNUZ: return {5, 2, 16, Minifloat::Special::kFnuz, 57344.0};
    case DType::kFloat4E2M1: return {2, 1, 1, Minifloat::Special::kNone, 6.0};
    default: fail(MRT_INTERNAL, dtype_name(t), " is not a narrow floating type");
  }
}

double decode_minifloat(const Minifloat& f, uint8_t v) {
  const int width = 1 + f.exp_bits + f.mant_bits;
  if (width < 8 && (v >> width) != 0) return 0.0;
  const uint8_t sign_bit = static_cast<uint8_t>(1u << (width - 1));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const bool neg = (v & sign_bit) != 0;
  const int e = (v >> f.mant_bits) & ((1 << f.exp_bits) - 1);
  const int m = v & ((1 << f.mant_bits) - 1);
  const int emax_field = (1 << f.exp_bits) - 1;
  switch (f.special) {
    case Minifloat::Special::kFnuz:
      if (v == sign_bit) return nan;
      break;
    case Minifloat::Special::kFn:
      if (e == emax_field && m == (1 << f.mant_bits) - 1) return neg ? -nan : nan;
      break;
    case Minifloat::Special::kIeee:
      if (e == emax_field) {
        if (m != 0) return neg ? -nan : nan;
        return neg ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
      }
      break;
    case Minifloat::Special::kNone: break;
  }
  double mag = e == 0 ? std::ldexp(static_cast<double>(m), 1 - f.bias - f.mant_bits)
                      : std::ldexp(static_cast<double>((1 << f.mant_bits) + m), e - f.bias - f.mant_bits);
  return neg ? -mag : mag;
}

struct Tables {
  double t[10][256];
  Tables() {
    for (int code = 17; code <= 26; ++code) {
      const DType dt = static_cast<DType>(code);
      double* row = t[code - 17];
      for (int v = 0; v < 256; ++v) {
        const uint8_t b = static_cast<uint8_t>(v);
        switch (dt) {
          case DType::kUInt4: row[v] = v < 16 ? v : 0; break;
          case DType::kUInt2: row[v] = v < 4 ? v : 0; break;
          case DType::kInt4: row[v] = v < 16 ? (v < 8 ? v : v - 16) : 0; break;
          case DType::kInt2: row[v] = v < 4 ? (v < 2 ? v : v - 4) : 0; break;
          case DType::kFloat8E8M0:
            row[v] = v == 0xff ? std::numeric_limits<double>::quiet_NaN() : std::ldexp(1.0, v - 127);
            break;
          default: row[v] = decode_minifloat(format_of(dt), b);
        }
      }
    }
  }
};

}  // namespace

void int_range(DType t, int64_t& lo, int64_t& hi) {
  switch (t) {
    case DType::kInt4: lo = -8; hi = 7; return;
    case DType::kUInt4: lo = 0; hi = 15; return;
    case DType::kInt2: lo = -2; hi = 1; return;
    case DType::kUInt2: lo = 0; hi = 3; return;
    default: fail(MRT_INTERNAL, dtype_name(t), " is not a narrow integer type");
  }
}

const double* decode_table(DType t) {
  static const Tables tables;
  MRT_ENFORCE(dtype_is_narrow(t), MRT_INTERNAL, dtype_name(t), " is not a narrow type");
  return tables.t[static_cast<int>(t) - 17];
}

uint8_t encode_float(DType t, double x, bool saturate) {
  const Minifloat f = format_of(t);
  const int width = 1 + f.exp_bits + f.mant_bits;
  const uint8_t sign_bit = static_cast<uint8_t>(1u << (width - 1));
  const bool neg = std::signbit(x);
  const uint8_t sign = neg ? sign_bit : 0;
  const uint8_t max_code = [&] {
    switch (f.special) {
      case Minifloat::Special::kFn: return static_cast<uint8_t>(sign_bit - 2);      // S.1111.110
      case Minifloat::Special::kIeee: return static_cast<uint8_t>(((1 << f.exp_bits) - 2) << f.mant_bits |
                                                                  ((1 << f.mant_bits) - 1));
      default: return static_cast<uint8_t>(sign_bit - 1);  // all ones but the sign
    }
  }();
  // The code for an overflow when not saturating.
  auto overflow = [&]() -> uint8_t {
    switch (f.special) {
      case Minifloat::Special::kIeee: return static_cast<uint8_t>(sign | (((1 << f.exp_bits) - 1) << f.mant_bits));
      case Minifloat::Special::kFn: return static_cast<uint8_t>(sign | (sign_bit - 1));
      case Minifloat::Special::kFnuz: return sign_bit;
      case Minifloat::Special::kNone: break;
    }
    return static_cast<uint8_t>(sign | max_code);
  };
  if (std::isnan(x)) {
    switch (f.special) {
      case Minifloat::Special::kIeee: return static_cast<uint8_t>(sign | (((1 << f.exp_bits) - 1) << f.mant_bits) |
                                                                  (1 << (f.mant_bits - 1)));
      case Minifloat::Special::kFn: return static_cast<uint8_t>(sign | (sign_bit - 1));
      case Minifloat::Special::kFnuz: return sign_bit;
      case Minifloat::Special::kNone: return sign_bit;  // no NaN: -0, as the onnx reference (ml_dtypes)
    }
  }
  const bool has_negative_zero = f.special != Minifloat::Special::kFnuz;
  const uint8_t zero = has_negative_zero ? sign : 0;
  const double a = std::fabs(x);
  if (std::isinf(a)) return saturate || f.special == Minifloat::Special::kNone ? static_cast<uint8_t>(sign | max_code)
                                                                                 : overflow();
  if (a == 0.0) return zero;
  const int emin = 1 - f.bias;
  int e2 = 0;
  std::frexp(a, &e2);
  int exp = std::max(e2 - 1, emin);
  // a / quantum is exact in double; round half to even.
  const double q = std::nearbyint(std::ldexp(a, f.mant_bits - exp));
  const double val = std::ldexp(q, exp - f.mant_bits);
  if (val > f.max) {
    if (saturate || f.special == Minifloat::Special::kNone) return static_cast<uint8_t>(sign | max_code);
    return overflow();
  }
  if (q == 0.0) return zero;
  std::frexp(val, &e2);
  exp = e2 - 1;
  uint32_t code;
  if (exp < emin) {
    code = static_cast<uint32_t>(std::ldexp(val, f.mant_bits - emin));  // subnormal mantissa
  } else {
    const uint32_t mant = static_cast<uint32_t>(std::ldexp(val, f.mant_bits - exp)) - (1u << f.mant_bits);
    code = static_cast<uint32_t>(exp + f.bias) << f.mant_bits | mant;
  }
  return static_cast<uint8_t>(sign | code);
}

uint8_t encode_e8m0(float x, bool saturate, E8M0Round mode) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  uint32_t exponent = (bits >> 23) & 0xffu;
  if (exponent == 0xffu) return saturate && (bits & 0x7fffffu) == 0 ? 0xfe : 0xff;
  bool up = false;
  switch (mode) {
    case E8M0Round::kUp: up = (bits & 0x7fffffu) != 0; break;
    case E8M0Round::kDown: break;
    case E8M0Round::kNearest: {
      const bool g = (bits & 0x400000u) != 0, r = (bits & 0x200000u) != 0, s = (bits & 0x1fffffu) != 0;
      up = g && (r || s || exponent > 0);
      break;
    }
  }
  if (up && saturate && exponent == 0xfeu) up = false;
  return static_cast<uint8_t>(exponent + (up ? 1u : 0u));
}

uint8_t encode_int_wrap(DType t, int64_t v) {
  const int bits = (t == DType::kInt4 || t == DType::kUInt4) ? 4 : 2;
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  return static_cast<uint8_t>(static_cast<uint64_t>(v) & mask);
}

uint8_t encode_int_clamp(DType t, int64_t v) {
  int64_t lo, hi;
  int_range(t, lo, hi);
  v = v < lo ? lo : v > hi ? hi : v;
  return encode_int_wrap(t, v);
}

int elements_per_byte(DType t) {
  switch (t) {
    case DType::kInt4: case DType::kUInt4: case DType::kFloat4E2M1: return 2;
    case DType::kInt2: case DType::kUInt2: return 4;
    default: return 1;
  }
}

size_t packed_bytes(DType t, int64_t n) {
  const int k = elements_per_byte(t);
  return static_cast<size_t>((n + k - 1) / k);
}

void unpack(DType t, const uint8_t* packed, int64_t n, uint8_t* out) {
  const int k = elements_per_byte(t);
  if (k == 1) {
    if (n) std::memcpy(out, packed, static_cast<size_t>(n));
    return;
  }
  const int bits = 8 / k;
  const uint8_t mask = static_cast<uint8_t>((1u << bits) - 1);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>((packed[i / k] >> (bits * (i % k))) & mask);
}

}  // namespace narrow
}  // namespace mrt
