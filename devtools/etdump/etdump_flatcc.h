// ETDumpGen: an EventTracer that records a run's profiling and debug events and writes them as
// an ETDump (`.etdp`: a size-prefixed FlatBuffer, identifier "ED00", the published schema).
// Its own library (etdump), outside the core runtime: link it where profiling is wanted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/core/event_tracer.h"
#include "runtime/core/span.h"

namespace executorch {
namespace etdump {

// The serialized ETDump; `buf` comes from malloc and belongs to the caller (free it).
struct ETDumpResult {
  void* buf = nullptr;
  size_t size = 0;
};

class ETDumpGen final : public runtime::EventTracer {
 public:
  // Events are kept in growable tables (heap), like the published ETDumpGen without a buffer;
  // `buffer` is accepted for its signature and must be empty.
  explicit ETDumpGen(runtime::Span<uint8_t> buffer = {nullptr, static_cast<size_t>(0)});

  void create_event_block(const char* name) override;
  runtime::EventTracerEntry start_profiling(const char* name, runtime::ChainID chain_id = runtime::kUnsetChainId,
                                            runtime::DebugHandle debug_handle = runtime::kUnsetDebugHandle) override;
  void end_profiling(runtime::EventTracerEntry entry) override;
  runtime::EventTracerEntry start_profiling_delegate(const char* name,
                                                     runtime::DelegateDebugIntId delegate_debug_id) override;
  void end_profiling_delegate(runtime::EventTracerEntry entry, const void* metadata = nullptr,
                              size_t metadata_len = 0) override;
  void log_profiling_delegate(const char* name, runtime::DelegateDebugIntId delegate_debug_id,
                              runtime::et_timestamp_t start_time, runtime::et_timestamp_t end_time,
                              const void* metadata = nullptr, size_t metadata_len = 0) override;
  void log_evalue(const runtime::EValue& evalue, runtime::LoggedEValueType evalue_type) override;

  // Where tensor values go (64-byte aligned); the caller keeps it alive. Values that no longer fit
  // are not logged (dropped_values() counts them).
  void set_debug_buffer(runtime::Span<uint8_t> buffer);
  runtime::Span<uint8_t> get_debug_buffer() const { return debug_buffer_; }
  size_t dropped_values() const { return dropped_values_; }

  // Everything recorded so far, serialized; recording goes on afterwards.
  ETDumpResult get_etdump_data();
  size_t get_num_blocks() const { return blocks_.size(); }
  bool is_static_etdump() const { return false; }
  // Drops every recorded event (the debug buffer is reused from its start).
  void reset();

 private:
  struct Event {
    enum class Kind : uint8_t { Profile, Debug } kind;
    int32_t name;  // string index or -1
    int32_t delegate_str;  // string index or -1
    int32_t delegate_int;
    int32_t chain;
    uint32_t instruction;
    uint64_t start, end;
    uint32_t metadata_offset, metadata_len;  // into metadata_
    uint32_t value;  // Debug: index into values_
  };
  struct Value {
    enum class Kind : uint8_t { Null, Int, Bool, Double, Tensor, TensorList } kind;
    bool output;
    int64_t i;
    double d;
    uint32_t first_tensor, num_tensors;  // into tensors_
  };
  struct TensorRecord {
    int8_t scalar_type;
    uint32_t first_dim, dim;  // into dims_ (size, stride pairs)
    int64_t offset;
  };
  struct Block {
    int32_t name;
    size_t first_event;
  };

  int32_t intern(const char* s);
  void add_profile(int32_t name, int32_t delegate_str, int32_t delegate_int, runtime::ChainID chain,
                   runtime::DebugHandle instruction, uint64_t start, uint64_t end, const void* metadata,
                   size_t metadata_len);
  bool add_tensor(const runtime::Tensor& t);

  std::vector<std::string> strings_;
  std::unordered_map<const char*, int32_t> string_index_;
  std::vector<Block> blocks_;
  std::vector<Event> events_;
  std::vector<Value> values_;
  std::vector<TensorRecord> tensors_;
  std::vector<int64_t> dims_;
  std::vector<uint8_t> metadata_;
  runtime::Span<uint8_t> debug_buffer_;
  size_t debug_used_ = 0;
  size_t dropped_values_ = 0;
};

}  // namespace etdump
}  // namespace executorch
