// et_copy::_h2d_copy.out / _d2h_copy.out: a tensor's bytes between host memory and the memory of
// the device a delegate runs on, through the allocator that device's backend registered.
#include "kernels/portable/util/kernel_util.h"
#include "runtime/core/device_allocator.h"

namespace executorch {
namespace kernels {
namespace {

using runtime::DeviceAllocator;
using runtime::etensor::DeviceType;

// Copies `self` into `out` (resized to self's sizes); `to_device` says which side is the device's.
void device_copy(KernelRuntimeContext& ctx, Args args, bool to_device) {
  const char* name = to_device ? "_h2d_copy" : "_d2h_copy";
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Tensor}), InvalidArgument);
  const Tensor& self = args[0]->toTensor();
  const Tensor& out = args[1]->toTensor();
  const Tensor& device_side = to_device ? out : self;
  const Tensor& host_side = to_device ? self : out;
  ET_KERNEL_CHECK_MSG(ctx, device_side.device_type() != DeviceType::CPU && host_side.device_type() == DeviceType::CPU,
                      InvalidArgument, , "%s: copies %s; the program has it the other way round", name,
                      to_device ? "host to device" : "device to host");
  ET_KERNEL_CHECK_MSG(ctx, self.scalar_type() == out.scalar_type() && self.dim() == out.dim(), InvalidArgument, ,
                      "%s: self and out differ in dtype or rank", name);
  for (int64_t d = 0; d < self.dim(); ++d)
    ET_KERNEL_CHECK_MSG(ctx, self.dim_order()[d] == out.dim_order()[d], InvalidArgument, ,
                        "%s: self and out differ in dim order", name);
  if (!resize_out(ctx, out, self)) return;
  DeviceAllocator* allocator = runtime::get_device_allocator(device_side.device_type());
  ET_KERNEL_CHECK_MSG(ctx, allocator != nullptr, NotFound, , "%s: no device allocator is registered for device type %d",
                      name, static_cast<int>(device_side.device_type()));
  const size_t nbytes = self.nbytes();
  if (nbytes == 0) return;
  const Error e = to_device ? allocator->copy_host_to_device(out.mutable_data_ptr(), self.const_data_ptr(), nbytes,
                                                             device_side.device_index())
                            : allocator->copy_device_to_host(out.mutable_data_ptr(), self.const_data_ptr(), nbytes,
                                                             device_side.device_index());
  ET_KERNEL_CHECK_MSG(ctx, e == Error::Ok, Internal, , "%s: the device copy of %zu bytes failed", name, nbytes);
}

// _h2d_copy.out(self, *, out) / _d2h_copy.out(self, *, out)
void h2d_copy_out(KernelRuntimeContext& ctx, Args args) { device_copy(ctx, args, true); }
void d2h_copy_out(KernelRuntimeContext& ctx, Args args) { device_copy(ctx, args, false); }

}  // namespace

// Registrations are generated from kernels/portable/functions.yaml (only the selected kernels).
#include "portable_registrations/op_device_copy.inc"

}  // namespace kernels
}  // namespace executorch
