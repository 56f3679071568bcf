// NamedDataMap: byte blobs a program stores by key, for backends to read at init.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/core/freeable_buffer.h"
#include "runtime/core/result.h"
#include "runtime/core/scalar_type.h"
#include "runtime/core/span.h"

namespace executorch {
namespace runtime {

// What a data file records about a tensor stored under a key (views into the file).
struct TensorLayout {
  ScalarType scalar_type;
  Span<const int32_t> sizes;
  Span<const uint8_t> dim_order;
};

class NamedDataMap {
 public:
  virtual ~NamedDataMap() = default;
  // The bytes stored under `key`; NotFound when the program has no such key.
  virtual Result<FreeableBuffer> get_data(const char* key) const = 0;
  virtual Result<size_t> get_num_keys() const = 0;
  virtual Result<const char*> get_key(size_t index) const = 0;
  // The layout recorded for `key`; NotFound when the map has no such key, NotSupported when it
  // records no layouts (opaque named data).
  virtual Result<TensorLayout> get_tensor_layout(const char* key) const {
    (void)key;
    return Error::NotSupported;
  }
  // The `nbytes` bytes of tensor `key` when the map holds it with exactly this layout; else
  // NotFound or InvalidExternalData, logged naming the key. The checks live in the map so that
  // runtimes without data files carry none of their code.
  virtual Result<const void*> get_tensor(const char* key, ScalarType type, Span<const int32_t> sizes,
                                         Span<const uint8_t> dim_order, size_t nbytes) const {
    (void)key, (void)type, (void)sizes, (void)dim_order, (void)nbytes;
    return Error::NotSupported;
  }
};

}  // namespace runtime
}  // namespace executorch
