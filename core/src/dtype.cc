#include "dtype.h"

#include <cmath>

namespace mrt {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kFloat: case DType::kInt32: case DType::kUInt32: return 4;
    case DType::kDouble: case DType::kInt64: case DType::kUInt64: return 8;
    case DType::kInt16: case DType::kUInt16: case DType::kFloat16: case DType::kBFloat16: return 2;
    case DType::kInt8: case DType::kUInt8: case DType::kBool: return 1;
    case DType::kString: return sizeof(const std::string*);
    default: return dtype_is_narrow(t) ? 1 : 0;
  }
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kFloat: return "float32";
    case DType::kUInt8: return "uint8";
    case DType::kInt8: return "int8";
    case DType::kUInt16: return "uint16";
    case DType::kInt16: return "int16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kString: return "string";
    case DType::kBool: return "bool";
    case DType::kFloat16: return "float16";
    case DType::kDouble: return "float64";
    case DType::kUInt32: return "uint32";
    case DType::kUInt64: return "uint64";
    case DType::kComplex64: return "complex64";
    case DType::kComplex128: return "complex128";
    case DType::kBFloat16: return "bfloat16";
    case DType::kUndefined: return "undefined";
    case DType::kFloat8E4M3FN: return "float8e4m3fn";
    case DType::kFloat8E4M3FNUZ: return "float8e4m3fnuz";
    case DType::kFloat8E5M2: return "float8e5m2";
    case DType::kFloat8E5M2FNUZ: return "float8e5m2fnuz";
    case DType::kUInt4: return "uint4";
    case DType::kInt4: return "int4";
    case DType::kFloat4E2M1: return "float4e2m1";
    case DType::kFloat8E8M0: return "float8e8m0";
    case DType::kUInt2: return "uint2";
    case DType::kInt2: return "int2";
    case DType::kSequence: return "sequence";
    case DType::kNone: return "none";
    case DType::kMap: return "map";
  }
  return "unknown-type";
}

bool dtype_is_known(int32_t code) { return code >= 1 && code <= 26; }
bool dtype_is_storable(DType t) { return dtype_size(t) != 0; }

float half_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do { ++e; mant <<= 1; } while ((mant & 0x400u) == 0);
      bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u | ((absx >> 13) & 0x3ffu) : 0u));
  }
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (absx < 0x38800000u) {  // subnormal or zero in half
    if (absx < 0x33000000u) return static_cast<uint16_t>(sign);
    uint32_t exp = absx >> 23;
    uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - exp;  // half subnormals are res * 2^-24
    uint32_t res = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (res & 1u))) ++res;
    return static_cast<uint16_t>(sign | res);
  }
  uint32_t rounded = absx + 0xfffu + ((absx >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

uint16_t float_to_bfloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

}  // namespace mrt
