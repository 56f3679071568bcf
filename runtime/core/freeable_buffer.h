// FreeableBuffer: read-only bytes plus an optional function that releases them.
#pragma once

#include <cstddef>

namespace executorch {
namespace runtime {

class FreeableBuffer final {
 public:
  using FreeFn = void (*)(void* context, void* data, size_t size);

  FreeableBuffer() = default;
  FreeableBuffer(const void* data, size_t size, FreeFn free_fn = nullptr, void* free_context = nullptr)
      : data_(data), size_(size), free_fn_(free_fn), free_context_(free_context) {}
  FreeableBuffer(FreeableBuffer&& other) noexcept
      : data_(other.data_), size_(other.size_), free_fn_(other.free_fn_), free_context_(other.free_context_) {
    other.data_ = nullptr;
    other.size_ = 0;
    other.free_fn_ = nullptr;
  }
  FreeableBuffer(const FreeableBuffer&) = delete;
  FreeableBuffer& operator=(const FreeableBuffer&) = delete;
  FreeableBuffer& operator=(FreeableBuffer&& other) noexcept {
    if (this != &other) {
      Free();
      data_ = other.data_;
      size_ = other.size_;
      free_fn_ = other.free_fn_;
      free_context_ = other.free_context_;
      other.data_ = nullptr;
      other.size_ = 0;
      other.free_fn_ = nullptr;
    }
    return *this;
  }
  ~FreeableBuffer() { Free(); }

  // Releases the bytes (a no-op for bytes the file owns); data() is null afterwards.
  void Free() {
    if (data_ != nullptr && free_fn_ != nullptr) free_fn_(free_context_, const_cast<void*>(data_), size_);
    data_ = nullptr;
    size_ = 0;
  }
  const void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  const void* data_ = nullptr;
  size_t size_ = 0;
  FreeFn free_fn_ = nullptr;
  void* free_context_ = nullptr;
};

}  // namespace runtime
}  // namespace executorch
