// ScalarType: element types of tensors, numbered as in the .pte schema.
#pragma once

#include <cstddef>
#include <cstdint>

namespace executorch {
namespace runtime {

enum class ScalarType : int8_t {
  Byte = 0,
  Char = 1,
  Short = 2,
  Int = 3,
  Long = 4,
  Half = 5,
  Float = 6,
  Double = 7,
  Bool = 11,
  QInt8 = 12,
  QUInt8 = 13,
  QInt32 = 14,
  BFloat16 = 15,
  QUInt4x2 = 16,
  QUInt2x4 = 17,
  Bits16 = 22,
  Float8_e5m2 = 23,
  Float8_e4m3fn = 24,
  Float8_e5m2fnuz = 25,
  Float8_e4m3fnuz = 26,
  UInt16 = 27,
  UInt32 = 28,
  UInt64 = 29,
};

// Bytes per element; 0 for values that are not a known ScalarType.
size_t element_size(ScalarType type);

// True when `type` is one of the enumerators above.
inline bool is_valid_scalar_type(ScalarType type) { return element_size(type) != 0; }

// Name as torch spells the dtype ("float32", "int64", ...); "unknown" otherwise.
const char* scalar_type_name(ScalarType type);

}  // namespace runtime
}  // namespace executorch
