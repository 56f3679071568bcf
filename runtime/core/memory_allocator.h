// MemoryAllocator: a bump allocator over a caller-owned buffer (no heap).
#pragma once

#include <cstddef>
#include <cstdint>

namespace executorch {
namespace runtime {

class MemoryAllocator {
 public:
  static constexpr size_t kDefaultAlignment = 16;

  MemoryAllocator() = default;
  MemoryAllocator(void* base, size_t size) : base_(static_cast<uint8_t*>(base)), size_(size) {}
  virtual ~MemoryAllocator() = default;

  // Returns `size` bytes aligned to `alignment` (a power of two), or nullptr
  // when the buffer is exhausted or the alignment is invalid.
  virtual void* allocate(size_t size, size_t alignment = kDefaultAlignment) {
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) return nullptr;
    uintptr_t start = reinterpret_cast<uintptr_t>(base_) + used_;
    uintptr_t aligned = (start + alignment - 1) & ~(uintptr_t(alignment) - 1);
    size_t pad = static_cast<size_t>(aligned - start);
    if (pad > size_ - used_ || size > size_ - used_ - pad) return nullptr;
    used_ += pad + size;
    return reinterpret_cast<void*>(aligned);
  }

  template <typename T>
  T* allocate_list(size_t count) {
    if (count > SIZE_MAX / sizeof(T)) return nullptr;
    return static_cast<T*>(
        allocate(count * sizeof(T), alignof(T) > kDefaultAlignment ? alignof(T) : kDefaultAlignment));
  }

  virtual void reset() { used_ = 0; }
  size_t used() const { return used_; }
  size_t size() const { return size_; }
  uint8_t* base() const { return base_; }

 private:
  uint8_t* base_ = nullptr;
  size_t size_ = 0;
  size_t used_ = 0;
};

}  // namespace runtime
}  // namespace executorch
