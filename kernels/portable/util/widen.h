// Float32 stand-ins for Half/BFloat16 tensors, so float32-only kernels serve 16-bit programs.
#pragma once

#include <cstddef>

#include "kernels/portable/util/kernel_util.h"

namespace executorch {
namespace kernels {

using KernelFn = void (*)(KernelRuntimeContext&, Args);

// True when any of the first `nargs` arguments is a Half or BFloat16 tensor.
bool has_half_tensor(Args args, size_t nargs);

// Runs `kernel` with each Half/BFloat16 tensor among the first `nargs` arguments replaced by a
// float32 copy in temp memory, then resizes the last `nouts` of them (the out arguments) to
// what the kernel computed and rounds its float32 results into them. Float32 in between is the
// accumulation precision these kernels (norms, softmax, convolution, pooling) need anyway.
void call_widened(KernelRuntimeContext& ctx, Args args, size_t nargs, size_t nouts, KernelFn kernel);

}  // namespace kernels
}  // namespace executorch
