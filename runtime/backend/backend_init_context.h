// BackendInitContext: what a backend's init() may use besides its payload.
#pragma once

#include "runtime/core/memory_allocator.h"
#include "runtime/core/named_data_map.h"

namespace executorch {
namespace runtime {

class BackendInitContext final {
 public:
  BackendInitContext(MemoryAllocator* runtime_allocator, const NamedDataMap* named_data_map, const char* method_name)
      : runtime_allocator_(runtime_allocator), named_data_map_(named_data_map), method_name_(method_name) {}
  // Memory that lives as long as the method (the method allocator).
  MemoryAllocator* get_runtime_allocator() { return runtime_allocator_; }
  // The program's named data; valid during init() only.
  const NamedDataMap* get_named_data_map() const { return named_data_map_; }
  const char* get_method_name() const { return method_name_; }

 private:
  MemoryAllocator* runtime_allocator_;
  const NamedDataMap* named_data_map_;
  const char* method_name_;
};

}  // namespace runtime
}  // namespace executorch
