// NamedDataMap: byte blobs a program stores by key, for backends to read at init.
#pragma once

#include <cstddef>

#include "runtime/core/freeable_buffer.h"
#include "runtime/core/result.h"

namespace executorch {
namespace runtime {

class NamedDataMap {
 public:
  virtual ~NamedDataMap() = default;
  // The bytes stored under `key`; NotFound when the program has no such key.
  virtual Result<FreeableBuffer> get_data(const char* key) const = 0;
  virtual Result<size_t> get_num_keys() const = 0;
  virtual Result<const char*> get_key(size_t index) const = 0;
};

}  // namespace runtime
}  // namespace executorch
