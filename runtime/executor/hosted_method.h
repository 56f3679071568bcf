// HostedMethod: a loaded Method together with heap memory it runs in, for hosts
// with a heap (Python bindings, executor_runner, tests, fuzzers). Header-only so
// the core library stays heap-free.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "runtime/core/device_allocator.h"
#include "runtime/executor/method.h"
#include "runtime/executor/program.h"

namespace executorch {
namespace runtime {

// Memory arena 2 of a program, one block for every method loaded with it (sized to the largest
// method's claim): methods exported with shared mutable buffers keep their common state, such as a
// KV cache both a prefill and a decode method update, there, as ExecuTorch's runtime does.
class SharedArena final {
 public:
  static constexpr size_t kIndex = 1;  // planned_buffers[1] backs memory id 2

  static Result<std::shared_ptr<SharedArena>> make(const Program& program, uint64_t max_bytes) {
    uint64_t size = 0;
    for (size_t m = 0; m < program.num_methods(); ++m) {
      Result<const char*> name = program.get_method_name(m);
      if (!name.ok()) return name.error();
      Result<MethodMeta> meta = program.method_meta(*name);
      if (!meta.ok()) return meta.error();
      if (meta->num_memory_planned_buffers() <= kIndex) continue;
      Result<etensor::Device> device = meta->memory_planned_buffer_device(kIndex);
      if (!device.ok()) return device.error();
      if (!device->is_cpu()) continue;  // that method's arena 2 is device memory of its own
      Result<int64_t> want = meta->memory_planned_buffer_size(kIndex);
      if (!want.ok()) return want.error();
      ET_CHECK_OR_RETURN(static_cast<uint64_t>(*want) <= max_bytes, OutOfResources,
                         "method '%s' plans %lld bytes of shared memory; the limit is %llu", *name,
                         static_cast<long long>(*want), static_cast<unsigned long long>(max_bytes));
      if (static_cast<uint64_t>(*want) > size) size = static_cast<uint64_t>(*want);
    }
    std::shared_ptr<SharedArena> self(new SharedArena(static_cast<size_t>(size)));
    ET_CHECK_OR_RETURN(self->block_ != nullptr, MemoryAllocationFailed,
                       "cannot allocate %llu bytes of shared planned memory", static_cast<unsigned long long>(size));
    return self;
  }

  Span<uint8_t> span() { return Span<uint8_t>(block_.get(), size_); }

 private:
  friend class HostedMethod;
  explicit SharedArena(size_t size)
      : block_(static_cast<uint8_t*>(std::calloc(size == 0 ? 1 : size, 1)), std::free), size_(size) {}

  std::unique_ptr<uint8_t, void (*)(void*)> block_;
  size_t size_;
  bool holds_state_ = false;  // a method was loaded: its state must survive the next method's load
};

class HostedMethod final {
 public:
  struct Limits {
    // Refuse programs whose memory plan asks for more than this (malformed files can claim anything).
    uint64_t max_planned_bytes = uint64_t(8) << 30;
    // Upper bound for the method allocator (values, tensor metadata, instructions).
    size_t max_method_bytes = size_t(1) << 30;
    size_t temp_bytes = size_t(16) << 20;
    // Instructions one execute() may run (0: no limit); see Method::set_instruction_limit.
    uint64_t instruction_limit = Method::kDefaultInstructionLimit;
  };

  // Loads `name` from `program`, growing the method allocator until the method fits. With `shared`,
  // memory id 2 is that arena (the same for every method of the program) instead of the method's own.
  static Result<std::unique_ptr<HostedMethod>> load(const Program& program, const char* name, const Limits& limits,
                                                    const NamedDataMap* external_data = nullptr,
                                                    std::shared_ptr<SharedArena> shared = nullptr,
                                                    EventTracer* event_tracer = nullptr) {
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
      Result<etensor::Device> device = meta->memory_planned_buffer_device(i);
      if (!device.ok()) return device.error();
      if (!device->is_cpu()) {
        Result<void*> block = self->add_device_block(*device, size, name, i);
        if (!block.ok()) return block.error();
        self->arenas_.push_back(Span<uint8_t>(static_cast<uint8_t*>(*block), size));
        continue;
      }
      if (i == SharedArena::kIndex && shared != nullptr) {
        self->arenas_.push_back(shared->span());  // Method::init checks it holds `size` bytes
        continue;
      }
      Error e = self->add_block(size);
      if (e != Error::Ok) return e;
      self->arenas_.push_back(Span<uint8_t>(self->blocks_.back().get(), size));
    }
    Error e = self->add_block(limits.temp_bytes);
    if (e != Error::Ok) return e;
    self->temp_ = MemoryAllocator(self->blocks_.back().get(), limits.temp_bytes);
    // Loading writes initial contents into planned memory; shared state another method already
    // uses is kept as it is (loading the decode method must not reset the prefill's cache).
    std::vector<uint8_t> kept;
    if (shared != nullptr && shared->holds_state_)
      kept.assign(shared->block_.get(), shared->block_.get() + shared->size_);
    Result<std::unique_ptr<HostedMethod>> loaded = init(self, program, name, limits, external_data, event_tracer);
    if (shared != nullptr) {
      if (!kept.empty()) std::memcpy(shared->block_.get(), kept.data(), kept.size());
      if (loaded.ok()) {
        shared->holds_state_ = true;
        (*loaded)->shared_ = std::move(shared);
      }
    }
    return loaded;
  }

  Method& method() { return *method_; }

  ~HostedMethod() {
    method_.reset();  // its backends let go of device memory before it is returned
    for (const DeviceBlock& b : device_blocks_) b.allocator->deallocate(b.ptr, b.index);
  }
  HostedMethod(const HostedMethod&) = delete;
  HostedMethod& operator=(const HostedMethod&) = delete;

 private:
  HostedMethod() : method_block_(nullptr, std::free) {}

  struct DeviceBlock {
    DeviceAllocator* allocator;
    void* ptr;
    etensor::DeviceIndex index;
  };

  // A planned arena in device memory, from the allocator the device backend registered.
  Result<void*> add_device_block(etensor::Device device, size_t size, const char* name, size_t arena) {
    DeviceAllocator* allocator = get_device_allocator(device.type);
    ET_CHECK_OR_RETURN(allocator != nullptr, NotFound,
                       "method '%s' plans memory arena %zu on device type %d (index %d), and no device allocator is "
                       "registered for it: link the device backend's library (whole-archive) into the program",
                       name, arena + 1, static_cast<int>(device.type), static_cast<int>(device.index));
    Result<void*> block = allocator->allocate(size == 0 ? 1 : size, device.index);
    if (!block.ok()) return block.error();
    ET_CHECK_OR_RETURN(*block != nullptr, MemoryAllocationFailed,
                       "cannot allocate %zu bytes of device memory for arena %zu", size, arena + 1);
    device_blocks_.push_back({allocator, *block, device.index});
    return *block;
  }

  static Result<std::unique_ptr<HostedMethod>> init(std::unique_ptr<HostedMethod>& self, const Program& program,
                                                    const char* name, const Limits& limits,
                                                    const NamedDataMap* external_data, EventTracer* event_tracer) {
    // Every runtime structure comes from file content, so a multiple of the FlatBuffer's
    // size is enough in practice; the loop only grows it for unusual programs. Load passes keep
    // weights they dequantize (4 bytes per int8 weight) and pack (about their own size) there
    // too, so the segments count as well; pages they leave unused are never touched.
    const size_t segments = program.file_size() - program.program_size();
    for (size_t bytes = (size_t(64) << 10) + 16 * program.program_size() + 9 * segments;; bytes *= 4) {
      if (bytes > limits.max_method_bytes) bytes = limits.max_method_bytes;
      std::unique_ptr<uint8_t, void (*)(void*)> block(static_cast<uint8_t*>(std::malloc(bytes)), std::free);
      ET_CHECK_OR_RETURN(block != nullptr, MemoryAllocationFailed, "cannot allocate %zu bytes", bytes);
      prefer_huge_pages(block.get(), bytes);
      self->method_alloc_ = MemoryAllocator(block.get(), bytes);
      MemoryManager mm;
      mm.method_allocator = &self->method_alloc_;
      mm.planned_buffers = Span<Span<uint8_t>>(self->arenas_.data(), self->arenas_.size());
      mm.temp_allocator = &self->temp_;
      Result<Method> method = program.load_method(name, &mm, event_tracer, external_data);
      if (method.ok()) {
        self->method_block_ = std::move(block);
        self->method_.emplace(std::move(*method));
        self->method_->set_instruction_limit(limits.instruction_limit);
        Error bound = self->bind_caller_outputs(limits.max_planned_bytes);
        if (bound != Error::Ok) return bound;
        return Result<std::unique_ptr<HostedMethod>>(std::move(self));
      }
      if (method.error() != Error::MemoryAllocationFailed || bytes >= limits.max_method_bytes) return method.error();
    }
  }

  // Load passes write packed and dequantized weights (megabytes) into the method allocator's
  // block: on Linux, ask for transparent huge pages there, so that first touch takes one fault
  // per 2 MiB instead of per 4 KiB page (a hint; without it, or elsewhere, nothing changes).
  static void prefer_huge_pages(void* block, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    constexpr uintptr_t kHuge = uintptr_t(2) << 20;
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(block) + kHuge - 1) & ~(kHuge - 1);
    const uintptr_t end = (reinterpret_cast<uintptr_t>(block) + bytes) & ~(kHuge - 1);
    if (end > begin) (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
    (void)block;
    (void)bytes;
#endif
  }

  // Outputs the program leaves to the caller (exported with alloc_graph_output=False) get heap memory of
  // their upper-bound size once, here, so execute() needs nothing more and returns them as usual.
  Error bind_caller_outputs(uint64_t max_bytes) {
    Method& m = *method_;
    uint64_t total = 0;
    for (size_t i = 0; i < m.outputs_size(); ++i) {
      if (!m.output_is_caller_bound(i)) continue;
      Result<const EValue*> out = m.get_output(i);
      if (!out.ok()) return out.error();
      TensorImpl* t = (*out)->toTensor().unsafeGetTensorImpl();
      if (t->data() != nullptr) continue;  // the same value as an output bound before
      size_t bytes = t->capacity_bytes();
      total += bytes;
      ET_CHECK_OR_RETURN(total <= max_bytes, OutOfResources,
                         "method '%s' returns %llu bytes of outputs in caller memory; the limit is %llu",
                         m.method_meta().name(), static_cast<unsigned long long>(total),
                         static_cast<unsigned long long>(max_bytes));
      Error e = add_block(bytes);
      if (e != Error::Ok) return e;
      e = m.set_output_data_ptr(blocks_.back().get(), bytes, i);
      if (e != Error::Ok) return e;
    }
    return Error::Ok;
  }

  Error add_block(size_t size) {
    // calloc: zeroed pages are cheap and make runs reproducible; 1 keeps 0-byte arenas distinct.
    blocks_.emplace_back(static_cast<uint8_t*>(std::calloc(size == 0 ? 1 : size, 1)), std::free);
    ET_CHECK_OR_RETURN(blocks_.back() != nullptr, MemoryAllocationFailed, "cannot allocate %zu bytes of planned memory",
                       size);
    return Error::Ok;
  }

  std::vector<std::unique_ptr<uint8_t, void (*)(void*)>> blocks_;
  std::vector<DeviceBlock> device_blocks_;
  std::vector<Span<uint8_t>> arenas_;
  MemoryAllocator temp_;
  MemoryAllocator method_alloc_;
  std::unique_ptr<uint8_t, void (*)(void*)> method_block_;
  std::optional<Method> method_;
  std::shared_ptr<SharedArena> shared_;  // kept alive while this method may run
};

}  // namespace runtime
}  // namespace executorch
