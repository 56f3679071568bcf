// BackendExecutionContext: what a backend's execute() may use besides its arguments.
#pragma once

#include "runtime/core/memory_allocator.h"

namespace executorch {
namespace runtime {

class BackendExecutionContext final {
 public:
  BackendExecutionContext(MemoryAllocator* temp_allocator, const char* method_name)
      : temp_allocator_(temp_allocator), method_name_(method_name) {}
  // Scratch memory, reset after the call; may be null.
  MemoryAllocator* get_temp_allocator() { return temp_allocator_; }
  const char* get_method_name() const { return method_name_; }

 private:
  MemoryAllocator* temp_allocator_;
  const char* method_name_;
};

}  // namespace runtime
}  // namespace executorch
