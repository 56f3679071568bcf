// DataLoader: where a program's bytes come from (a file read into memory, a mapping, a buffer).
#pragma once

#include <cstddef>
#include <cstring>

#include "runtime/core/error.h"
#include "runtime/core/freeable_buffer.h"
#include "runtime/core/result.h"

namespace executorch {
namespace runtime {

class DataLoader {
 public:
  // What a load is for, so a loader may place or cache kinds of data differently.
  struct SegmentInfo {
    enum class Type { Program, Constant, Backend, Mutable, External };
    SegmentInfo() = default;
    explicit SegmentInfo(Type segment_type, size_t segment_index = 0, const char* descriptor = nullptr)
        : segment_type(segment_type), segment_index(segment_index), descriptor(descriptor) {}
    Type segment_type = Type::Program;
    size_t segment_index = 0;
    const char* descriptor = nullptr;
  };

  virtual ~DataLoader() = default;

  // `size` bytes from `offset`, bounds-checked against size(). File and mmap loaders' buffers
  // stay valid until freed; a BufferDataLoader's are the caller's memory.
  virtual Result<FreeableBuffer> load(size_t offset, size_t size, const SegmentInfo& segment_info) const = 0;

  // Copies `size` bytes from `offset` into `buffer`.
  virtual Error load_into(size_t offset, size_t size, const SegmentInfo& segment_info, void* buffer) const {
    ET_CHECK_OR_RETURN(buffer != nullptr, InvalidArgument, "load_into: destination is null");
    Result<FreeableBuffer> bytes = load(offset, size, segment_info);
    if (!bytes.ok()) return bytes.error();
    std::memcpy(buffer, bytes->data(), size);
    return Error::Ok;
  }

  // Total bytes the loader can give.
  virtual Result<size_t> size() const = 0;
};

}  // namespace runtime
}  // namespace executorch
