// The device allocator registry: one slot per device type, filled at static initialization.
#include "runtime/core/device_allocator.h"

namespace executorch {
namespace runtime {
namespace {

DeviceAllocator* g_allocators[etensor::kNumDeviceTypes] = {};

}  // namespace

Error register_device_allocator(DeviceAllocator* allocator) {
  ET_CHECK_OR_RETURN(allocator != nullptr, InvalidArgument, "register_device_allocator: null allocator");
  const auto type = static_cast<size_t>(allocator->device_type());
  ET_CHECK_OR_RETURN(type > 0 && type < etensor::kNumDeviceTypes, InvalidArgument,
                     "register_device_allocator: device type %zu is not a non-CPU device type", type);
  ET_CHECK_OR_RETURN(g_allocators[type] == nullptr || g_allocators[type] == allocator, InvalidArgument,
                     "register_device_allocator: device type %zu already has an allocator", type);
  g_allocators[type] = allocator;
  return Error::Ok;
}

DeviceAllocator* get_device_allocator(etensor::DeviceType type) {
  const auto i = static_cast<size_t>(type);
  return i < etensor::kNumDeviceTypes ? g_allocators[i] : nullptr;
}

}  // namespace runtime
}  // namespace executorch
