// Device memory: where a tensor's bytes live (DeviceType + index, as the program's
// ExtraTensorInfo and non_const_buffer_device say), and the allocator a device backend
// registers for its device type so hosts can plan its arenas and kernels can copy across.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/core/error.h"
#include "runtime/core/memory_allocator.h"
#include "runtime/core/result.h"

namespace executorch {
namespace runtime {
namespace etensor {

// The program format's device types (schema/program.fbs DeviceType).
enum class DeviceType : int8_t { CPU = 0, CUDA = 1 };
constexpr size_t kNumDeviceTypes = 2;
using DeviceIndex = int8_t;

struct Device {
  DeviceType type = DeviceType::CPU;
  DeviceIndex index = 0;
  bool is_cpu() const { return type == DeviceType::CPU; }
};

}  // namespace etensor

class DeviceAllocator {
 public:
  static constexpr size_t kDefaultAlignment = MemoryAllocator::kDefaultAlignment;

  virtual ~DeviceAllocator() = default;
  // `nbytes` of device memory on device `index`, aligned to `alignment` (a power of two).
  virtual Result<void*> allocate(size_t nbytes, etensor::DeviceIndex index, size_t alignment = kDefaultAlignment) = 0;
  virtual void deallocate(void* ptr, etensor::DeviceIndex index) = 0;
  virtual Error copy_host_to_device(void* dst, const void* src, size_t nbytes, etensor::DeviceIndex index) = 0;
  virtual Error copy_device_to_host(void* dst, const void* src, size_t nbytes, etensor::DeviceIndex index) = 0;
  virtual etensor::DeviceType device_type() const = 0;
};

// One allocator per non-CPU device type, registered from a static initializer of the device
// backend's library (the pointer must stay valid). Registering a second one for a type, or one
// for CPU, is refused with InvalidArgument.
Error register_device_allocator(DeviceAllocator* allocator);
// The allocator registered for `type`, or nullptr.
DeviceAllocator* get_device_allocator(etensor::DeviceType type);

}  // namespace runtime
}  // namespace executorch
