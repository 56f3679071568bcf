// Method: a loaded execution plan, ready to take inputs and execute.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/backend/interface.h"
#include "runtime/core/evalue.h"
#include "runtime/core/event_tracer.h"
#include "runtime/core/named_data_map.h"
#include "runtime/core/operator_registry.h"
#include "runtime/core/result.h"
#include "runtime/core/span.h"
#include "runtime/executor/memory_manager.h"
#include "runtime/executor/method_meta.h"

namespace executorch {
namespace runtime {

class Program;

// One decoded instruction; every index in it was checked at load.
struct Step {
  enum class Kind : uint8_t { Kernel, Move, JumpFalse, Free, Delegate };
  Kind kind;
  uint32_t a;  // Kernel, Delegate: arg count; Move: from; JumpFalse: condition value; Free: value
  uint32_t b;  // Kernel: operator; Move: to; JumpFalse: destination instruction; Delegate: delegate
  OpFunction op;
  EValue** args;
  const void* state = nullptr;  // Kernel: what a load pass prepared for it (call_state())
};

// The initialised delegates of a method; destroyed (backend destroy()) with it.
struct DelegateSlot {
  BackendInterface* backend = nullptr;
  DelegateHandle* handle = nullptr;
  const char* id = nullptr;
};

class DelegateSlots final {
 public:
  DelegateSlots() = default;
  DelegateSlots(DelegateSlots&& other) noexcept : slots(other.slots), count(other.count) {
    other.slots = nullptr;
    other.count = 0;
  }
  DelegateSlots(const DelegateSlots&) = delete;
  DelegateSlots& operator=(const DelegateSlots&) = delete;
  ~DelegateSlots() {
    for (size_t i = 0; i < count; ++i)
      if (slots[i].backend != nullptr) slots[i].backend->destroy(slots[i].handle);
  }
  DelegateSlot* slots = nullptr;
  size_t count = 0;
};

class Method final {
 public:
  Method(Method&&) = default;
  Method(const Method&) = delete;
  Method& operator=(const Method&) = delete;
  Method& operator=(Method&&) = delete;

  MethodMeta method_meta() const { return meta_; }
  size_t inputs_size() const { return num_inputs_; }
  size_t outputs_size() const { return num_outputs_; }

  // Copies `nbytes` of `data` into tensor input `index` after checking dtype,
  // rank and sizes (bounded dynamic inputs are resized within their plan). An
  // input without a memory plan borrows `data` until the next execute() returns.
  Error set_input_tensor(size_t index, ScalarType type, Span<const int64_t> sizes, const void* data, size_t nbytes);
  // Replaces scalar input `index` (Int, Double or Bool; the tag must match).
  Error set_input(size_t index, const EValue& value);

  // Binds `buffer` (`size` bytes) to output `output_idx`, one the program leaves to the caller (exported
  // with alloc_graph_output=False). It must hold the output at its upper-bound sizes and be aligned to its
  // elements; the binding holds until replaced, and execute() refuses while such an output is unbound.
  Error set_output_data_ptr(void* buffer, size_t size, size_t output_idx);
  // Whether output `index` takes the caller's memory (set_output_data_ptr) rather than the program's.
  bool output_is_caller_bound(size_t index) const { return index < num_outputs_ && output_state_[index] != kOwnMemory; }

  // Runs every instruction; the first kernel failure stops it and is returned.
  Error execute();

  // execute() stops with OutOfResources once it has run this many instructions: a program
  // (malformed, or a loop whose condition never turns) can jump backwards forever. The default
  // is the Python engine's limit too; 0 means no limit, for programs known to run longer.
  static constexpr uint64_t kDefaultInstructionLimit = 10'000'000;
  void set_instruction_limit(uint64_t max) { instruction_limit_ = max; }
  uint64_t instruction_limit() const { return instruction_limit_; }

  // Reports each execute() to `tracer` (null: off). Program::load_method sets the one it was given.
  void set_event_tracer(EventTracer* tracer) { event_tracer_ = tracer; }
  EventTracer* get_event_tracer() { return event_tracer_; }

  Result<const EValue*> get_output(size_t index) const;
  Result<const EValue*> get_input(size_t index) const;

 private:
  friend class Program;
  friend class MethodRewriterImpl;
  Method(MethodMeta meta) : meta_(meta) {}
  Error init(const Program& program, MemoryManager* memory_manager);
  Error init_values(const Program& program, MemoryManager* mm);
  Error init_steps(const Program& program, MemoryManager* mm);
  Error init_op_event_names(MemoryAllocator* a, const void* operators, size_t n_ops);
  Error init_delegate(const Program& program, MemoryManager* mm, size_t index);
  Error check_lists();
  Error check_tensor_memory();
  Error bind_view_outputs();
  // Set by the first register_load_pass(): runs the passes on a loaded method.
  static void (*run_load_passes_)(Method& method, MemoryAllocator* a);
  template <bool kTraced>
  Error run_steps();
  void log_value(const EValue& v, LoggedEValueType type);

  MethodMeta meta_;
  MemoryAllocator* temp_allocator_ = nullptr;
  EValue* values_ = nullptr;
  size_t num_values_ = 0;
  uint32_t* input_index_ = nullptr;
  size_t num_inputs_ = 0;
  uint32_t* output_index_ = nullptr;
  size_t num_outputs_ = 0;
  // An input without planned memory borrows caller data; it must be bound first.
  bool* input_borrowed_ = nullptr;
  bool* input_bound_ = nullptr;
  // Per output: planned or constant memory, or caller memory not yet bound / bound.
  static constexpr uint8_t kOwnMemory = 0, kUnbound = 1, kBound = 2;
  uint8_t* output_state_ = nullptr;
  Step* steps_ = nullptr;
  size_t num_steps_ = 0;
  uint64_t instruction_limit_ = kDefaultInstructionLimit;
  EventTracer* event_tracer_ = nullptr;
  // Per operator, "native_call_<name>.<overload>": the kernel events' names.
  const char** op_event_names_ = nullptr;
  DelegateSlots delegates_;
  // Per value, set by run_load_passes: kWritten (an instruction or the caller writes it),
  // kEscapes (a method input/output), kFolded (a pass computed it at load), kView (planned memory
  // no instruction writes: an alias of another tensor's).
  static constexpr uint8_t kWritten = 1, kEscapes = 2, kFolded = 4, kView = 8;
  uint8_t* value_flags_ = nullptr;
  // Where external tensors and named data come from while loading; not used after init().
  const NamedDataMap* external_ = nullptr;
};

}  // namespace runtime
}  // namespace executorch
