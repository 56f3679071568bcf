// FlatTensorDataMap: the named tensors of a .ptd file held in caller memory.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/core/named_data_map.h"
#include "runtime/core/result.h"

namespace flat_tensor_flatbuffer {
struct FlatTensor;
struct NamedData;
}  // namespace flat_tensor_flatbuffer

namespace executorch {
namespace extension {

using runtime::Error;
using runtime::FreeableBuffer;
using runtime::Result;
using runtime::TensorLayout;

class FlatTensorDataMap final : public runtime::NamedDataMap {
 public:
  // Checks the header and verifies the index; `data` must stay alive, unmoved and 16-byte
  // aligned while the map (and tensors taken from it) are used.
  static Result<FlatTensorDataMap> load(const void* data, size_t size);

  // The bytes stored under `key`, a view into the file (nothing to free).
  Result<FreeableBuffer> get_data(const char* key) const override;
  Result<size_t> get_num_keys() const override;
  Result<const char*> get_key(size_t index) const override;
  // NotSupported for an entry stored without a layout (opaque named data).
  Result<TensorLayout> get_tensor_layout(const char* key) const override;
  // Checks dtype, sizes, dim order (when the entry records a layout) and byte size, naming the key.
  Result<const void*> get_tensor(const char* key, runtime::ScalarType type, runtime::Span<const int32_t> sizes,
                                 runtime::Span<const uint8_t> dim_order, size_t nbytes) const override;

 private:
  FlatTensorDataMap(const uint8_t* data, const flat_tensor_flatbuffer::FlatTensor* root, uint64_t base,
                    uint64_t data_size)
      : data_(data), root_(root), base_(base), data_size_(data_size) {}
  // The entry for `key` after checking its segment lies inside the file's tensor data.
  Result<const flat_tensor_flatbuffer::NamedData*> find(const char* key) const;

  const uint8_t* data_;
  const flat_tensor_flatbuffer::FlatTensor* root_;
  uint64_t base_;
  uint64_t data_size_;
};

}  // namespace extension
}  // namespace executorch
