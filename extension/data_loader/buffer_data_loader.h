// BufferDataLoader: a DataLoader over bytes already in memory (the caller keeps them alive).
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/core/data_loader.h"

namespace executorch {
namespace extension {

class BufferDataLoader final : public runtime::DataLoader {
 public:
  BufferDataLoader(const void* data, size_t size) : data_(static_cast<const uint8_t*>(data)), size_(size) {}

  runtime::Result<runtime::FreeableBuffer> load(size_t offset, size_t size,
                                                const SegmentInfo& /*segment_info*/) const override {
    ET_CHECK_OR_RETURN(data_ != nullptr, InvalidArgument, "BufferDataLoader: no buffer");
    ET_CHECK_OR_RETURN(offset <= size_ && size <= size_ - offset, InvalidArgument,
                       "BufferDataLoader: %zu bytes at offset %zu run past the %zu-byte buffer", size, offset, size_);
    return runtime::FreeableBuffer(data_ + offset, size);
  }

  runtime::Result<size_t> size() const override { return size_; }

 private:
  const uint8_t* data_;
  size_t size_;
};

}  // namespace extension
}  // namespace executorch
