// The backend registry: a fixed table filled by static registration (no heap).
#include "runtime/backend/interface.h"

#include <cstring>

namespace executorch {
namespace runtime {
namespace {

constexpr size_t kMaxBackends = 16;
Backend g_backends[kMaxBackends];
size_t g_num_backends = 0;

}  // namespace

Error register_backend(const Backend& backend) {
  ET_CHECK_OR_RETURN(backend.name != nullptr && backend.backend != nullptr, InvalidArgument,
                     "register_backend needs a name and a BackendInterface");
  ET_CHECK_OR_RETURN(get_backend_class(backend.name) == nullptr, RegistrationAlreadyRegistered,
                     "a backend named '%s' is already registered", backend.name);
  ET_CHECK_OR_RETURN(g_num_backends < kMaxBackends, RegistrationExceedingMaxKernels,
                     "cannot register backend '%s': the registry holds %zu backends", backend.name, kMaxBackends);
  g_backends[g_num_backends++] = backend;
  return Error::Ok;
}

BackendInterface* get_backend_class(const char* name) {
  for (size_t i = 0; i < g_num_backends; ++i)
    if (std::strcmp(g_backends[i].name, name) == 0) return g_backends[i].backend;
  return nullptr;
}

size_t get_num_registered_backends() { return g_num_backends; }

Result<const char*> get_backend_name(size_t index) {
  ET_CHECK_OR_RETURN(index < g_num_backends, InvalidArgument, "backend %zu is out of range (%zu registered)", index,
                     g_num_backends);
  return g_backends[index].name;
}

}  // namespace runtime
}  // namespace executorch
