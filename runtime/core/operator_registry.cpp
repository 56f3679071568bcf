// A fixed-capacity kernel table: no heap, filled at static-initialisation time.
#include "runtime/core/operator_registry.h"

#include <cstring>

namespace executorch {
namespace runtime {
namespace {

// Zero-initialised before any dynamic initialiser runs, so registration from
// other translation units' static initialisers is safe in any order.
Kernel g_kernels[kMaxRegisteredKernels];
size_t g_num_kernels = 0;

}  // namespace

Error register_kernels(Span<const Kernel> kernels) {
  for (const Kernel& k : kernels) {
    if (k.name == nullptr || k.op == nullptr) return Error::InvalidArgument;
    if (get_op_function(k.name) != nullptr) {
      ET_LOG(Error, "kernel %s is already registered", k.name);
      return Error::RegistrationAlreadyRegistered;
    }
    if (g_num_kernels >= kMaxRegisteredKernels) {
      ET_LOG(Error, "cannot register %s: the registry holds at most %zu kernels", k.name, kMaxRegisteredKernels);
      return Error::RegistrationExceedingMaxKernels;
    }
    g_kernels[g_num_kernels++] = k;
  }
  return Error::Ok;
}

OpFunction get_op_function(std::string_view name) {
  for (size_t i = 0; i < g_num_kernels; ++i)
    if (name == g_kernels[i].name) return g_kernels[i].op;
  return nullptr;
}

OpFunction get_op_function(std::string_view name, std::string_view overload) {
  if (overload.empty()) return get_op_function(name);
  for (size_t i = 0; i < g_num_kernels; ++i) {
    std::string_view k = g_kernels[i].name;
    if (k.size() == name.size() + 1 + overload.size() && k.compare(0, name.size(), name) == 0 &&
        k[name.size()] == '.' && k.compare(name.size() + 1, overload.size(), overload) == 0)
      return g_kernels[i].op;
  }
  return nullptr;
}

Span<const Kernel> registered_kernels() { return {g_kernels, g_num_kernels}; }

}  // namespace runtime
}  // namespace executorch
