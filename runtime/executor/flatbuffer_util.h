// Reads of FlatBuffer vector items that tolerate misalignment (internal).
#pragma once

#include <cstddef>
#include <cstring>

#include "flatbuffers/flatbuffers.h"

namespace executorch {
namespace runtime {

// The verifier checks a vector's length field, not that 8-byte items are
// 8-aligned; a corrupt file can misalign them, so copy bytes instead of
// dereferencing. (Little-endian hosts, as FlatBuffers' own fast path assumes.)
template <typename T>
T load_item(const flatbuffers::Vector<T>* vector, size_t index) {
  T value;
  std::memcpy(&value, vector->Data() + index * sizeof(T), sizeof(T));
  return value;
}

}  // namespace runtime
}  // namespace executorch
