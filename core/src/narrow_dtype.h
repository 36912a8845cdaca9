// Conversions for the narrow element types (float8 e4m3fn/e4m3fnuz/e5m2/e5m2fnuz/e8m0,
// float4 e2m1, int4/uint4, int2/uint2). In memory each element is one byte (see
// dtype.h); the helpers here decode a byte to its value, encode a value with the ONNX
// rounding/saturation rules, and convert between that layout and the packed form
// serialized ONNX tensors use for the 4-bit and 2-bit types.
#pragma once
#include <cstddef>
#include <cstdint>

#include "dtype.h"

namespace mrt {
namespace narrow {

// Integer narrow types (int4/uint4/int2/uint2).
inline bool is_integer(DType t) {
  return t == DType::kInt4 || t == DType::kUInt4 || t == DType::kInt2 || t == DType::kUInt2;
}
// Range of an integer narrow type.
void int_range(DType t, int64_t& lo, int64_t& hi);

// Table of the 256 byte values of a narrow floating or integer type, as doubles (exact).
// Bytes that are not valid codes of the type decode as 0.
const double* decode_table(DType t);
inline double to_double(DType t, uint8_t v) { return decode_table(t)[v]; }

// Encode x into a narrow floating type (float8 e4m3fn/e4m3fnuz/e5m2/e5m2fnuz, float4
// e2m1), rounding to nearest even. With `saturate` values beyond the finite range
// (infinities included) become the largest finite value of the sign; without it they
// become infinity (e5m2) or NaN (types without infinity). float4e2m1 has neither and
// always saturates.
uint8_t encode_float(DType t, double x, bool saturate);

enum class E8M0Round { kUp, kDown, kNearest };
// Encode into float8e8m0 from the float32 bits of x (the ONNX Cast rules: NaN stays NaN,
// the exponent is rounded by `mode`, saturate clamps at the largest power of two).
uint8_t encode_e8m0(float x, bool saturate, E8M0Round mode);

// Encode an integer value into an integer narrow type, keeping the low bits (modular,
// as the other integer casts). The byte holds the two's complement code in its low
// 4 (or 2) bits, upper bits zero.
uint8_t encode_int_wrap(DType t, int64_t v);
// Encode clamping to the type's range.
uint8_t encode_int_clamp(DType t, int64_t v);

// Elements per byte in serialized ONNX tensors: 2 for 4-bit types, 4 for 2-bit, else 1.
int elements_per_byte(DType t);
// Bytes a serialized tensor of n elements occupies.
size_t packed_bytes(DType t, int64_t n);
// Unpack n elements from ONNX's packed layout (element i in byte i / k, starting at the
// low bits) into one byte per element (the code in the low bits).
void unpack(DType t, const uint8_t* packed, int64_t n, uint8_t* out);

}  // namespace narrow
}  // namespace mrt
