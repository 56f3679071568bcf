// ExecutorBackend: delegates whose payload is a nested .pte, loaded and run by this runtime.
// A host backend: init() uses the heap (HostedMethod); execute() copies in, runs, copies out.
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>

#include "runtime/backend/interface.h"
#include "runtime/executor/hosted_method.h"
#include "runtime/executor/program.h"

namespace executorch {
namespace runtime {
namespace {

// While the outer method is profiled, the nested method reports here: each nested kernel becomes a
// delegate event of the outer DelegateCall, named "<op>.<overload>#<nested instruction>" (the names
// the ahead-of-time ExecutorBackend lists in its debug handle map).
class NestedEvents final : public EventTracer {
 public:
  EventTracer* outer = nullptr;

  void create_event_block(const char*) override {}
  EventTracerEntry start_profiling(const char* name, ChainID chain_id, DebugHandle debug_handle) override {
    EventTracerEntry entry;
    entry.event_id = static_cast<int64_t>(reinterpret_cast<intptr_t>(name));
    entry.chain_id = chain_id;
    entry.debug_handle = debug_handle;
    entry.start_time = pal_current_ticks();
    return entry;
  }
  void end_profiling(EventTracerEntry entry) override {
    et_timestamp_t end = pal_current_ticks();
    const char* name = reinterpret_cast<const char*>(static_cast<intptr_t>(entry.event_id));
    static constexpr char kPrefix[] = "native_call_";
    if (name == nullptr || std::strncmp(name, kPrefix, sizeof(kPrefix) - 1) != 0) return;
    char id[192];
    std::snprintf(id, sizeof(id), "%s#%u", name + sizeof(kPrefix) - 1, static_cast<unsigned>(entry.debug_handle));
    outer->log_profiling_delegate(id, kUnsetDelegateDebugIntId, entry.start_time, end);
  }
  EventTracerEntry start_profiling_delegate(const char*, DelegateDebugIntId) override { return EventTracerEntry(); }
  void end_profiling_delegate(EventTracerEntry, const void*, size_t) override {}
  void log_profiling_delegate(const char*, DelegateDebugIntId, et_timestamp_t, et_timestamp_t, const void*,
                              size_t) override {}
  void log_evalue(const EValue&, LoggedEValueType) override {}
};

struct Nested {
  explicit Nested(Program&& p) : program(std::move(p)) {}
  Program program;
  std::unique_ptr<HostedMethod> method;
  NestedEvents events;
};

class ExecutorBackend final : public BackendInterface {
 public:
  bool is_available() const override { return true; }

  Result<DelegateHandle*> init(BackendInitContext& context, FreeableBuffer* processed,
                               ArrayRef<CompileSpec> /*compile_specs*/) const override {
    // Compile specs are a bag: `external_constants` changed the payload ahead of time (its weights are
    // named data, found through the context's map below); nothing else is read here.
    // The payload lives in the outer file, which outlives this delegate.
    Result<Program> program = Program::load(processed->data(), processed->size());
    if (!program.ok()) return program.error();
    std::unique_ptr<Nested> nested(new (std::nothrow) Nested(std::move(*program)));
    ET_CHECK_OR_RETURN(nested != nullptr, MemoryAllocationFailed, "ExecutorBackend: out of memory");
    // The payload is file content like any other: bound what it may ask for (the core's default
    // instruction limit stops its loops).
    HostedMethod::Limits limits;
    limits.max_planned_bytes = uint64_t(256) << 20;
    limits.max_method_bytes = size_t(256) << 20;
    limits.temp_bytes = size_t(1) << 20;
    Result<std::unique_ptr<HostedMethod>> method =
        HostedMethod::load(nested->program, "forward", limits, context.get_named_data_map());
    if (!method.ok()) return method.error();
    nested->method = std::move(*method);
    return static_cast<DelegateHandle*>(nested.release());
  }

  Error execute(BackendExecutionContext& context, DelegateHandle* handle, Span<EValue*> args) const override {
    Nested* nested = static_cast<Nested*>(handle);
    Method& m = nested->method->method();
    nested->events.outer = context.event_tracer();
    m.set_event_tracer(nested->events.outer != nullptr ? &nested->events : nullptr);
    size_t n_in = m.inputs_size(), n_out = m.outputs_size();
    ET_CHECK_OR_RETURN(args.size() == n_in + n_out, InvalidProgram,
                       "ExecutorBackend: the call passes %zu values; the nested program takes %zu inputs "
                       "and returns %zu outputs",
                       args.size(), n_in, n_out);
    for (size_t i = 0; i < n_in; ++i) {
      const EValue& v = *args[i];
      if (!v.isTensor()) {
        ET_TRY(m.set_input(i, v));
        continue;
      }
      Tensor t = v.toTensor();
      int64_t sizes[kTensorDimensionLimit];
      for (int64_t d = 0; d < t.dim(); ++d) sizes[d] = t.size(d);
      ET_TRY(m.set_input_tensor(i, t.scalar_type(), Span<const int64_t>(sizes, static_cast<size_t>(t.dim())),
                                t.const_data_ptr(), t.nbytes()));
    }
    ET_TRY(m.execute());
    for (size_t j = 0; j < n_out; ++j) {
      Result<const EValue*> out = m.get_output(j);
      if (!out.ok()) return out.error();
      EValue* dst = args[n_in + j];
      ET_CHECK_OR_RETURN((*out)->isTensor() && dst->isTensor(), InvalidProgram,
                         "ExecutorBackend: output %zu is not a tensor", j);
      Tensor from = (*out)->toTensor(), to = dst->toTensor();
      ET_CHECK_OR_RETURN(from.scalar_type() == to.scalar_type(), InvalidProgram,
                         "ExecutorBackend: output %zu has another dtype than the call's", j);
      ET_TRY(to.resize(from.sizes()));
      std::memcpy(to.mutable_data_ptr(), from.const_data_ptr(), from.nbytes());
    }
    return Error::Ok;
  }

  void destroy(DelegateHandle* handle) const override { delete static_cast<Nested*>(handle); }
};

ExecutorBackend g_backend;
const Error g_registered = register_backend(Backend{"ExecutorBackend", &g_backend});

}  // namespace
}  // namespace runtime
}  // namespace executorch
