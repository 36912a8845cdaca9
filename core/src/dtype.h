// Element types. Values are ONNX TensorProto.DataType codes so they pass through
// the C ABI and the model decoder unchanged.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

#include "error.h"

namespace mrt {

enum class DType : int32_t {
  kUndefined = 0,
  kFloat = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kDouble = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  kComplex64 = 14,
  kComplex128 = 15,
  kBFloat16 = 16,
  // Narrow types. In memory each element takes one byte: the 8-bit floats hold their
  // bit pattern, the 4-bit and 2-bit types their code (two's complement for int4/int2)
  // in the low bits with the upper bits zero (ml_dtypes' layout). Serialized ONNX tensors pack the
  // 4-bit and 2-bit types (see narrow_dtype.h); the model decoder unpacks them.
  kFloat8E4M3FN = 17,
  kFloat8E4M3FNUZ = 18,
  kFloat8E5M2 = 19,
  kFloat8E5M2FNUZ = 20,
  kUInt4 = 21,
  kInt4 = 22,
  kFloat4E2M1 = 23,
  kFloat8E8M0 = 24,
  kUInt2 = 25,
  kInt2 = 26,
  // Not ONNX element types: the executor carries ONNX sequence and optional values as Tensors of
  // these kinds (see Tensor::sequence and Tensor::none in tensor.h). They have no elements.
  kSequence = 1001,
  kNone = 1002,  // an optional without a value
  kMap = 1003,   // an ONNX map: a keys tensor and a values tensor of the same length
};

// Storage types for the 16-bit floats (bit patterns; convert with the helpers below).
struct Float16 { uint16_t bits; };
struct BFloat16 { uint16_t bits; };

// Size in bytes of one element; 0 for types the core cannot store (complex, sequence, none). A string
// element is a pointer to an immutable std::string (tensor.h).
size_t dtype_size(DType t);
// "float32", "int64", ... (numpy-style names used in messages and the Python API).
const char* dtype_name(DType t);
bool dtype_is_known(int32_t code);
bool dtype_is_storable(DType t);
// Storable and held by value (every storable type but string): its bytes are its value.
inline bool dtype_is_plain(DType t) { return t != DType::kString && dtype_is_storable(t); }
// The one-byte-per-element narrow types (codes 17..26).
inline bool dtype_is_narrow(DType t) {
  return static_cast<int32_t>(t) >= 17 && static_cast<int32_t>(t) <= 26;
}
inline bool dtype_is_float(DType t) {
  return t == DType::kFloat || t == DType::kDouble || t == DType::kFloat16 || t == DType::kBFloat16;
}

float half_to_float(uint16_t h);
uint16_t float_to_half(float f);  // round to nearest even
inline float bfloat16_to_float(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t float_to_bfloat16(float f);  // round to nearest even, NaN preserved

template <class T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::kFloat; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::kDouble; };
template <> struct DTypeOf<int8_t> { static constexpr DType value = DType::kInt8; };
template <> struct DTypeOf<int16_t> { static constexpr DType value = DType::kInt16; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::kInt32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::kInt64; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::kUInt8; };
template <> struct DTypeOf<uint16_t> { static constexpr DType value = DType::kUInt16; };
template <> struct DTypeOf<uint32_t> { static constexpr DType value = DType::kUInt32; };
template <> struct DTypeOf<uint64_t> { static constexpr DType value = DType::kUInt64; };
template <> struct DTypeOf<bool> { static constexpr DType value = DType::kBool; };
template <> struct DTypeOf<Float16> { static constexpr DType value = DType::kFloat16; };
template <> struct DTypeOf<BFloat16> { static constexpr DType value = DType::kBFloat16; };

}  // namespace mrt

// Type dispatch: MRT_DISPATCH_<SET>(dtype, T, { body using T }) runs body with T bound
// to the C++ type, or throws a NOT_IMPLEMENTED error naming the type.
#define MRT_DTYPE_CASE(ENUM, TYPE, ...) \
  case ::mrt::DType::ENUM: {            \
    using T = TYPE;                     \
    __VA_ARGS__;                        \
    break;                              \
  }

#define MRT_DISPATCH_FAIL(dt, what)                                                     \
  default:                                                                              \
    ::mrt::fail(MRT_NOT_IMPLEMENTED, what, ": element type ", ::mrt::dtype_name(dt), \
                " is not supported")

// float and double
#define MRT_DISPATCH_FLOATING(dt, what, ...)           \
  switch (dt) {                                        \
    MRT_DTYPE_CASE(kFloat, float, __VA_ARGS__)         \
    MRT_DTYPE_CASE(kDouble, double, __VA_ARGS__)       \
    MRT_DISPATCH_FAIL(dt, what);                       \
  }

// signed/unsigned integers (no bool)
#define MRT_DISPATCH_INTEGER_CASES(...)              \
  MRT_DTYPE_CASE(kInt8, int8_t, __VA_ARGS__)         \
  MRT_DTYPE_CASE(kInt16, int16_t, __VA_ARGS__)       \
  MRT_DTYPE_CASE(kInt32, int32_t, __VA_ARGS__)       \
  MRT_DTYPE_CASE(kInt64, int64_t, __VA_ARGS__)       \
  MRT_DTYPE_CASE(kUInt8, uint8_t, __VA_ARGS__)       \
  MRT_DTYPE_CASE(kUInt16, uint16_t, __VA_ARGS__)     \
  MRT_DTYPE_CASE(kUInt32, uint32_t, __VA_ARGS__)     \
  MRT_DTYPE_CASE(kUInt64, uint64_t, __VA_ARGS__)

#define MRT_DISPATCH_INTEGER(dt, what, ...)  \
  switch (dt) {                              \
    MRT_DISPATCH_INTEGER_CASES(__VA_ARGS__)  \
    MRT_DISPATCH_FAIL(dt, what);             \
  }

// float, double and all integers (the "numeric" set of most arithmetic ops)
#define MRT_DISPATCH_NUMERIC(dt, what, ...)          \
  switch (dt) {                                      \
    MRT_DTYPE_CASE(kFloat, float, __VA_ARGS__)       \
    MRT_DTYPE_CASE(kDouble, double, __VA_ARGS__)     \
    MRT_DISPATCH_INTEGER_CASES(__VA_ARGS__)          \
    MRT_DISPATCH_FAIL(dt, what);                     \
  }

// every storable fixed-size type, including bool and 16-bit floats (for data movement)
#define MRT_DISPATCH_ALL(dt, what, ...)                 \
  switch (dt) {                                         \
    MRT_DTYPE_CASE(kFloat, float, __VA_ARGS__)          \
    MRT_DTYPE_CASE(kDouble, double, __VA_ARGS__)        \
    MRT_DTYPE_CASE(kBool, bool, __VA_ARGS__)            \
    MRT_DTYPE_CASE(kFloat16, ::mrt::Float16, __VA_ARGS__)   \
    MRT_DTYPE_CASE(kBFloat16, ::mrt::BFloat16, __VA_ARGS__) \
    MRT_DISPATCH_INTEGER_CASES(__VA_ARGS__)             \
    MRT_DISPATCH_FAIL(dt, what);                        \
  }
