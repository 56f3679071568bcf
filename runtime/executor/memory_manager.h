// MemoryManager: the memory a Method may use, all provided by the caller.
#pragma once

#include <cstdint>

#include "runtime/core/memory_allocator.h"
#include "runtime/core/span.h"

namespace executorch {
namespace runtime {

struct MemoryManager {
  // Holds the method's EValues, tensor metadata and instruction tables.
  MemoryAllocator* method_allocator = nullptr;
  // planned_buffers[i] backs memory arena i+1 of the plan (non_const_buffer_sizes[i+1]).
  Span<Span<uint8_t>> planned_buffers;
  // Kernel scratch memory, reset after every kernel; may be null.
  MemoryAllocator* temp_allocator = nullptr;
};

}  // namespace runtime
}  // namespace executorch
