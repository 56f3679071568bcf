// BackendExecutionContext: what a backend's execute() may use besides its arguments.
#pragma once

#include "runtime/core/event_tracer.h"
#include "runtime/core/memory_allocator.h"

namespace executorch {
namespace runtime {

class BackendExecutionContext final {
 public:
  BackendExecutionContext(MemoryAllocator* temp_allocator, const char* method_name, EventTracer* event_tracer = nullptr)
      : temp_allocator_(temp_allocator), method_name_(method_name), event_tracer_(event_tracer) {}
  // Scratch memory, reset after the call; may be null.
  MemoryAllocator* get_temp_allocator() { return temp_allocator_; }
  const char* get_method_name() const { return method_name_; }
  // The method's tracer while profiling, else null: a backend may add its own events
  // (event_tracer_start_profiling_delegate and friends).
  EventTracer* event_tracer() { return event_tracer_; }

 private:
  MemoryAllocator* temp_allocator_;
  const char* method_name_;
  EventTracer* event_tracer_;
};

}  // namespace runtime
}  // namespace executorch
