// KernelRuntimeContext: what a kernel may use besides its arguments, and how it fails.
#pragma once

#include <cstddef>
#include <initializer_list>

#include "runtime/core/error.h"
#include "runtime/core/evalue.h"
#include "runtime/core/memory_allocator.h"
#include "runtime/core/result.h"
#include "runtime/core/span.h"

namespace executorch {
namespace runtime {

class KernelRuntimeContext final {
 public:
  explicit KernelRuntimeContext(MemoryAllocator* temp_allocator = nullptr, const void* call_state = nullptr)
      : temp_allocator_(temp_allocator), call_state_(call_state) {}

  // What a load pass prepared for this call site (runtime/core/load_pass.h), or null.
  const void* call_state() const { return call_state_; }

  // Records a failure; the executor stops after the kernel returns and
  // reports it. The first failure wins.
  void fail(Error error) {
    if (failure_ == Error::Ok) failure_ = error;
  }
  Error failure_state() const { return failure_; }

  // Scratch memory valid until the kernel returns (reset between kernels).
  Result<void*> allocate_temp(size_t size, size_t alignment = MemoryAllocator::kDefaultAlignment) {
    if (temp_allocator_ == nullptr) return Error::NotFound;
    void* p = temp_allocator_->allocate(size, alignment);
    if (p == nullptr) return Error::MemoryAllocationFailed;
    return p;
  }

 private:
  MemoryAllocator* temp_allocator_;
  const void* call_state_;
  Error failure_ = Error::Ok;
};

// True when the first tags.size() entries of `args` match `tags` (Tag::None
// accepts anything, for optional arguments; Tag::ListScalar accepts any scalar).
// Entries past them are the op's return values (see README.md) and are ignored.
inline bool args_match(Span<EValue*> args, std::initializer_list<Tag> tags) {
  if (args.size() < tags.size()) return false;
  size_t i = 0;
  for (Tag want : tags) {
    const EValue* v = args[i++];
    if (v == nullptr) return false;
    if (want == Tag::None) continue;
    if (want == Tag::ListScalar ? !v->isScalar() : v->tag() != want) return false;
  }
  return true;
}

}  // namespace runtime
}  // namespace executorch

// In a kernel: when `cond` is false, log, fail the context with `error` and return.
#define ET_KERNEL_CHECK(ctx, cond, error, ...)         \
  do {                                                 \
    if (!(cond)) {                                     \
      ET_LOG(Error, "kernel check failed: %s", #cond); \
      (ctx).fail(::executorch::runtime::Error::error); \
      return __VA_ARGS__;                              \
    }                                                  \
  } while (0)

// Like ET_KERNEL_CHECK with a printf-style message.
#define ET_KERNEL_CHECK_MSG(ctx, cond, error, retval, ...) \
  do {                                                     \
    if (!(cond)) {                                         \
      ET_LOG(Error, __VA_ARGS__);                          \
      (ctx).fail(::executorch::runtime::Error::error);     \
      return retval;                                       \
    }                                                      \
  } while (0)
