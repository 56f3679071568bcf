// Load passes: rewrites a kernel library registers to run once on every method at load, so
// work each run would redo (constant weights dequantized or packed, ops fused) happens once.
#pragma once

#include <cstddef>

#include "runtime/core/error.h"
#include "runtime/core/evalue.h"
#include "runtime/core/operator_registry.h"
#include "runtime/core/span.h"

namespace executorch {
namespace runtime {

// A loaded method's instructions and values, as a load pass sees and edits them. Every edit
// keeps the method's results within the rewriting kernel's tolerance; memory comes from the
// method's allocator (it lives as long as the method), never from the heap at run time.
class MethodRewriter {
 public:
  virtual size_t num_steps() const = 0;
  // The kernel instruction `pc` calls, or null (not a kernel call, or pc out of range).
  virtual OpFunction kernel(size_t pc) const = 0;
  // Whether instruction `pc` does nothing (a free, or an instruction a pass removed).
  virtual bool does_nothing(size_t pc) const = 0;
  // Instruction `pc`'s arguments (empty unless it is a kernel call). A pass may point one at
  // another value only as part of a fold that then remove()s the folded instruction: uses()
  // answers from an index rebuilt after each remove().
  virtual Span<EValue*> args(size_t pc) const = 0;
  // A tensor whose data came with the program (or was computed by a pass), or a scalar or list
  // no instruction can overwrite: the same before every run.
  virtual bool is_constant(const EValue* v) const = 0;
  // Writes into `pcs` (up to `max`) the instructions naming `v` (as an argument or in a tensor
  // list argument, moves, jumps) in order, and returns how many there are; returns SIZE_MAX
  // when `v` is a method input or output, whose uses a pass cannot see.
  virtual size_t uses(const EValue* v, size_t* pcs, size_t max) const = 0;
  // Whether tensor `v` shares its memory through a view the memory plan aliases (a planned tensor
  // no instruction writes): `v` is such a view, or the tensor one shows. The view reads its
  // source's memory as its source lays it out (a method input's as the caller wrote it), so
  // neither may change its layout or its memory, the source must still be written there, and
  // uses() of either does not see every read of that memory.
  virtual bool aliased(const EValue* v) const = 0;
  // `bytes` of memory the method owns, or null when its allocator is full (the pass then
  // leaves the instruction as it was).
  virtual void* allocate(size_t bytes, size_t alignment) = 0;
  // Scratch valid until free_temp() or the pass returns (null when the method has none or it
  // is full).
  virtual void* allocate_temp(size_t bytes, size_t alignment) = 0;
  virtual void free_temp() = 0;
  // From now on instruction `pc` calls `op`, which reads `state` through
  // KernelRuntimeContext::call_state().
  virtual void set_kernel(size_t pc, OpFunction op, const void* state) = 0;
  // From now on instruction `pc` does nothing.
  virtual void remove(size_t pc) = 0;
  // Tensor `v` now permanently holds `data` (`bytes` bytes, from allocate()) and counts as a
  // constant.
  virtual void make_constant(const EValue* v, void* data, size_t bytes) = 0;

 protected:
  ~MethodRewriter() = default;
};

using LoadPass = void (*)(MethodRewriter& method);

// Passes run in registration order on every method loaded afterwards. Defined with the executor
// (runtime/executor/method_load_passes.cpp), which a program links only when something registers
// a pass, so a runtime without passes carries none of their code.
constexpr size_t kMaxLoadPasses = 16;
Error register_load_pass(LoadPass pass);
Span<const LoadPass> registered_load_passes();

}  // namespace runtime
}  // namespace executorch

// Registers `pass` at static-initialisation time (link the object whole, as for kernels).
#define ET_REGISTER_LOAD_PASS(pass)                                            \
  static const bool ET_KERNEL_CONCAT_(et_load_pass_registered_, __COUNTER__) = \
      ::executorch::runtime::register_load_pass(pass) == ::executorch::runtime::Error::Ok
