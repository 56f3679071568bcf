// Operator registry: kernels registered by name ("aten::add.out"), looked up at method load.
#pragma once

#include <cstddef>
#include <string_view>

#include "runtime/core/error.h"
#include "runtime/core/evalue.h"
#include "runtime/core/kernel_runtime_context.h"
#include "runtime/core/span.h"

namespace executorch {
namespace runtime {

// Arguments: the operator's schema arguments in order (out arguments included), then
// one entry per return value (for out variants, the same values as the out arguments).
using OpFunction = void (*)(KernelRuntimeContext& context, Span<EValue*> args);

struct Kernel {
  const char* name;  // "namespace::op.overload"; must outlive the registry (a literal)
  OpFunction op;
};

// Registry capacity; registration beyond it fails with RegistrationExceedingMaxKernels.
constexpr size_t kMaxRegisteredKernels = 1024;

// Adds kernels; a name already registered fails with RegistrationAlreadyRegistered.
// Not thread-safe: register during static initialisation or before loading methods.
Error register_kernels(Span<const Kernel> kernels);
inline Error register_kernel(const Kernel& kernel) { return register_kernels({&kernel, 1}); }

// The kernel for `name` ("aten::add.out"), or nullptr.
OpFunction get_op_function(std::string_view name);
// The kernel for an operator as a program spells it: name "aten::add", overload "out"
// (an empty overload means the bare name).
OpFunction get_op_function(std::string_view name, std::string_view overload);

Span<const Kernel> registered_kernels();

}  // namespace runtime
}  // namespace executorch

#define ET_KERNEL_CONCAT_INNER_(a, b) a##b
#define ET_KERNEL_CONCAT_(a, b) ET_KERNEL_CONCAT_INNER_(a, b)

// Registers `fn` under `name` at static-initialisation time. Link the object
// file whole (OBJECT library or --whole-archive) so the registration survives.
#define ET_REGISTER_KERNEL(name, fn)                                                     \
  static const bool ET_KERNEL_CONCAT_(et_kernel_registered_, __COUNTER__) =              \
      ::executorch::runtime::register_kernel(::executorch::runtime::Kernel{name, fn}) == \
      ::executorch::runtime::Error::Ok
