// EventTracer: the interface the runtime reports profiling and debug events through (ETDumpGen
// in devtools/etdump implements it). The runtime holds a pointer; null means tracing is off and
// costs one branch per execute().
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "runtime/core/evalue.h"

namespace executorch {
namespace runtime {

using ChainID = int32_t;
using DebugHandle = uint32_t;
using AllocatorID = uint32_t;
using DelegateDebugIntId = int32_t;
using et_timestamp_t = uint64_t;

constexpr DelegateDebugIntId kUnsetDelegateDebugIntId = -1;
constexpr ChainID kUnsetChainId = -1;
constexpr DebugHandle kUnsetDebugHandle = 0;

enum class DelegateDebugIdType : uint8_t { kNone, kInt, kStr };

// How much of the run's data a tracer records besides timings.
enum class EventTracerDebugLogLevel : uint8_t {
  kNoLogging,
  kProgramOutputs,  // the method's outputs after each execute
  kIntermediateOutputs,  // every kernel's output and every delegate call's arguments too
};

enum class LoggedEValueType : uint8_t { kIntermediateOutput, kProgramOutput };

// The clock every event uses: steady nanoseconds (the published runtime's ticks on Linux).
inline et_timestamp_t pal_current_ticks() {
  return static_cast<et_timestamp_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

// A started profiling event; passed back to end_profiling.
struct EventTracerEntry {
  int64_t event_id = -1;  // the tracer's handle for the name (or the delegate's integer id)
  ChainID chain_id = kUnsetChainId;
  DebugHandle debug_handle = kUnsetDebugHandle;
  et_timestamp_t start_time = 0;
  DelegateDebugIdType delegate_event_id_type = DelegateDebugIdType::kNone;
};

class EventTracer {
 public:
  virtual ~EventTracer() = default;

  // Starts a block of events (one per load, one per execute); later events belong to it.
  virtual void create_event_block(const char* name) = 0;
  // Starts timing `name` (a string that lives until the tracer is written). With chain_id -1
  // the event takes the tracer's current chain and instruction (set_chain_debug_handle).
  virtual EventTracerEntry start_profiling(const char* name, ChainID chain_id = kUnsetChainId,
                                           DebugHandle debug_handle = kUnsetDebugHandle) = 0;
  virtual void end_profiling(EventTracerEntry entry) = 0;

  // A backend's own events inside the current DelegateCall, named by a string (copied) or by an
  // integer id (then `name` is null), matching the ids its ahead-of-time debug map uses.
  virtual EventTracerEntry start_profiling_delegate(const char* name, DelegateDebugIntId delegate_debug_id) = 0;
  virtual void end_profiling_delegate(EventTracerEntry entry, const void* metadata = nullptr,
                                      size_t metadata_len = 0) = 0;
  virtual void log_profiling_delegate(const char* name, DelegateDebugIntId delegate_debug_id, et_timestamp_t start_time,
                                      et_timestamp_t end_time, const void* metadata = nullptr,
                                      size_t metadata_len = 0) = 0;

  // Records a value (tensor data goes to the tracer's debug buffer) for the current instruction.
  virtual void log_evalue(const EValue& evalue, LoggedEValueType evalue_type) = 0;

  void set_chain_debug_handle(ChainID chain_id, DebugHandle debug_handle) {
    chain_id_ = chain_id;
    debug_handle_ = debug_handle;
  }
  ChainID current_chain_id() const { return chain_id_; }
  DebugHandle current_debug_handle() const { return debug_handle_; }

  void set_event_tracer_debug_level(EventTracerDebugLogLevel level) { debug_level_ = level; }
  EventTracerDebugLogLevel event_tracer_debug_level() const { return debug_level_; }

 protected:
  ChainID chain_id_ = kUnsetChainId;
  DebugHandle debug_handle_ = kUnsetDebugHandle;
  EventTracerDebugLogLevel debug_level_ = EventTracerDebugLogLevel::kNoLogging;
};

// Helpers backends call with their context's tracer, which may be null (tracing off).
inline EventTracerEntry event_tracer_start_profiling_delegate(EventTracer* tracer, const char* name,
                                                              DelegateDebugIntId delegate_debug_id) {
  return tracer != nullptr ? tracer->start_profiling_delegate(name, delegate_debug_id) : EventTracerEntry();
}

inline void event_tracer_end_profiling_delegate(EventTracer* tracer, EventTracerEntry entry,
                                                const void* metadata = nullptr, size_t metadata_len = 0) {
  if (tracer != nullptr) tracer->end_profiling_delegate(entry, metadata, metadata_len);
}

inline void event_tracer_log_profiling_delegate(EventTracer* tracer, const char* name,
                                                DelegateDebugIntId delegate_debug_id, et_timestamp_t start_time,
                                                et_timestamp_t end_time, const void* metadata = nullptr,
                                                size_t metadata_len = 0) {
  if (tracer != nullptr)
    tracer->log_profiling_delegate(name, delegate_debug_id, start_time, end_time, metadata, metadata_len);
}

}  // namespace runtime
}  // namespace executorch
