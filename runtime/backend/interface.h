// The delegate backend interface and its registry: a backend library registers itself
// (statically, from a global initializer) and the runtime hands it each DelegateCall.
#pragma once

#include <cstddef>

#include "runtime/backend/backend_execution_context.h"
#include "runtime/backend/backend_init_context.h"
#include "runtime/core/error.h"
#include "runtime/core/evalue.h"
#include "runtime/core/freeable_buffer.h"
#include "runtime/core/result.h"
#include "runtime/core/span.h"

namespace executorch {
namespace runtime {

template <typename T>
using ArrayRef = Span<const T>;

struct SizedBuffer {
  const void* buffer;
  size_t nbytes;
};

// One option from the BackendDelegate entry; key and value point into the program.
struct CompileSpec {
  const char* key;
  SizedBuffer value;
};

// Whatever a backend's init() returns; the runtime only passes it back.
using DelegateHandle = void;

class BackendInterface {
 public:
  virtual ~BackendInterface() = default;
  // False when the backend cannot run here (missing hardware); methods calling it fail to load.
  virtual bool is_available() const = 0;
  // Prepares one delegate. `processed` is the payload; it points into the program, and a
  // backend that copies what it needs may Free() it. Runs once per delegate at method load.
  virtual Result<DelegateHandle*> init(BackendInitContext& context, FreeableBuffer* processed,
                                       ArrayRef<CompileSpec> compile_specs) const = 0;
  // Runs one DelegateCall: `args` are its values, inputs then outputs; outputs are written
  // in place (resized if dynamic). No heap, no exceptions.
  virtual Error execute(BackendExecutionContext& context, DelegateHandle* handle, Span<EValue*> args) const = 0;
  // Releases what init() made, when the method is destroyed.
  virtual void destroy(DelegateHandle* /*handle*/) const {}
};

struct Backend {
  const char* name;
  BackendInterface* backend;
};

// Registers `backend` under its name (which must outlive the process, e.g. a literal).
// RegistrationAlreadyRegistered for a taken name; RegistrationExceedingMaxKernels when full.
Error register_backend(const Backend& backend);
// The backend registered as `name`, or null.
BackendInterface* get_backend_class(const char* name);
size_t get_num_registered_backends();
Result<const char*> get_backend_name(size_t index);

}  // namespace runtime
}  // namespace executorch
