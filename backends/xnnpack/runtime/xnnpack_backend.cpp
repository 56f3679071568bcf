// XnnpackBackend: runs the XNNPACK delegate's payloads (as the published exporter writes them) on
// this runtime's own kernels. init() compiles the graph once into a Plan (weights decoded and laid
// out, activations planned into one arena); execute() runs it without allocating.
#include <memory>
#include <new>

#include "backends/xnnpack/runtime/compiler.h"
#include "backends/xnnpack/runtime/executor.h"
#include "backends/xnnpack/runtime/payload.h"
#include "runtime/backend/interface.h"

namespace executorch {
namespace backends {
namespace xnnpack {
namespace {

using runtime::ArrayRef;
using runtime::BackendExecutionContext;
using runtime::BackendInitContext;
using runtime::CompileSpec;
using runtime::DelegateHandle;
using runtime::Error;
using runtime::EValue;
using runtime::FreeableBuffer;
using runtime::Result;
using runtime::Span;

class XnnpackBackend final : public runtime::BackendInterface {
 public:
  bool is_available() const override { return true; }

  Result<DelegateHandle*> init(BackendInitContext& context, FreeableBuffer* processed,
                               ArrayRef<CompileSpec> compile_specs) const override {
    // Compile specs are a bag the partitioner may share with other backends; none changes how this
    // payload runs (the published runtime reads none either), so all are left unread.
    (void)compile_specs;
    Result<Payload> payload = parse_payload(processed->data(), processed->size());
    if (!payload.ok()) return payload.error();
    std::unique_ptr<Plan> plan(new (std::nothrow) Plan());
    ET_CHECK_OR_RETURN(plan != nullptr, MemoryAllocationFailed, "XnnpackBackend: out of memory");
    ET_TRY(compile(*payload, context.get_named_data_map(), plan.get()));
    // Everything the plan needs was copied or decoded.
    processed->Free();
    return static_cast<DelegateHandle*>(plan.release());
  }

  Error execute(BackendExecutionContext& context, DelegateHandle* handle, Span<EValue*> args) const override {
    return xnnpack::execute(*static_cast<Plan*>(handle), args, context.event_tracer());
  }

  void destroy(DelegateHandle* handle) const override { delete static_cast<Plan*>(handle); }
};

XnnpackBackend g_backend;
const Error g_registered = runtime::register_backend(runtime::Backend{"XnnpackBackend", &g_backend});

}  // namespace
}  // namespace xnnpack
}  // namespace backends
}  // namespace executorch
