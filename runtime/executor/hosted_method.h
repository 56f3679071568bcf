// HostedMethod: a loaded Method together with heap memory it runs in, for hosts
// with a heap (Python bindings, executor_runner, tests, fuzzers). Header-only so
// the core library stays heap-free.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <vector>

#include "runtime/executor/method.h"
#include "runtime/executor/program.h"

namespace executorch {
namespace runtime {

class HostedMethod final {
 public:
  struct Limits {
    // Refuse programs whose memory plan asks for more than this (malformed files can claim anything).
    uint64_t max_planned_bytes = uint64_t(8) << 30;
    // Upper bound for the method allocator (values, tensor metadata, instructions).
    size_t max_method_bytes = size_t(1) << 30;
    size_t temp_bytes = size_t(16) << 20;
    // Backward jumps allowed per execute() (0: unlimited); see Method::set_loop_limit.
    uint64_t loop_limit = 0;
  };

  // Loads `name` from `program`, growing the method allocator until the method fits.
  static Result<std::unique_ptr<HostedMethod>> load(const Program& program, const char* name,
                                                    const Limits& limits,
                                                    const NamedDataMap* external_data = nullptr) {
    Result<MethodMeta> meta = program.method_meta(name);
    if (!meta.ok()) return meta.error();
    std::unique_ptr<HostedMethod> self(new HostedMethod());
    uint64_t total = 0;
    for (size_t i = 0; i < meta->num_memory_planned_buffers(); ++i) {
      Result<int64_t> size = meta->memory_planned_buffer_size(i);
      if (!size.ok()) return size.error();
      total += static_cast<uint64_t>(*size);
      ET_CHECK_OR_RETURN(total <= limits.max_planned_bytes, OutOfResources,
                         "method '%s' plans %llu bytes of memory; the limit is %llu", name,
                         static_cast<unsigned long long>(total),
                         static_cast<unsigned long long>(limits.max_planned_bytes));
    }
    for (size_t i = 0; i < meta->num_memory_planned_buffers(); ++i) {
      size_t size = static_cast<size_t>(*meta->memory_planned_buffer_size(i));
      Error e = self->add_block(size);
      if (e != Error::Ok) return e;
      self->arenas_.push_back(Span<uint8_t>(self->blocks_.back().get(), size));
    }
    Error e = self->add_block(limits.temp_bytes);
    if (e != Error::Ok) return e;
    self->temp_ = MemoryAllocator(self->blocks_.back().get(), limits.temp_bytes);

    // Every runtime structure comes from file content, so a multiple of the FlatBuffer's
    // size is enough in practice; the loop only grows it for unusual programs.
    for (size_t bytes = (size_t(64) << 10) + 16 * program.program_size();; bytes *= 4) {
      if (bytes > limits.max_method_bytes) bytes = limits.max_method_bytes;
      std::unique_ptr<uint8_t, void (*)(void*)> block(static_cast<uint8_t*>(std::malloc(bytes)), std::free);
      ET_CHECK_OR_RETURN(block != nullptr, MemoryAllocationFailed, "cannot allocate %zu bytes", bytes);
      self->method_alloc_ = MemoryAllocator(block.get(), bytes);
      MemoryManager mm;
      mm.method_allocator = &self->method_alloc_;
      mm.planned_buffers = Span<Span<uint8_t>>(self->arenas_.data(), self->arenas_.size());
      mm.temp_allocator = &self->temp_;
      Result<Method> method = program.load_method(name, &mm, external_data);
      if (method.ok()) {
        self->method_block_ = std::move(block);
        self->method_.emplace(std::move(*method));
        self->method_->set_loop_limit(limits.loop_limit);
        return Result<std::unique_ptr<HostedMethod>>(std::move(self));
      }
      if (method.error() != Error::MemoryAllocationFailed || bytes >= limits.max_method_bytes)
        return method.error();
    }
  }

  Method& method() { return *method_; }

 private:
  HostedMethod() : method_block_(nullptr, std::free) {}

  Error add_block(size_t size) {
    // calloc: zeroed pages are cheap and make runs reproducible; 1 keeps 0-byte arenas distinct.
    blocks_.emplace_back(static_cast<uint8_t*>(std::calloc(size == 0 ? 1 : size, 1)), std::free);
    ET_CHECK_OR_RETURN(blocks_.back() != nullptr, MemoryAllocationFailed,
                       "cannot allocate %zu bytes of planned memory", size);
    return Error::Ok;
  }

  std::vector<std::unique_ptr<uint8_t, void (*)(void*)>> blocks_;
  std::vector<Span<uint8_t>> arenas_;
  MemoryAllocator temp_;
  MemoryAllocator method_alloc_;
  std::unique_ptr<uint8_t, void (*)(void*)> method_block_;
  std::optional<Method> method_;
};

}  // namespace runtime
}  // namespace executorch
