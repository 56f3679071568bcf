// TestDeviceBackend: runs the test engine (see device_backend/engine.py) on a "device" whose memory
// is ordinary host memory handed out by the DeviceAllocator registered here for CUDA. Only that
// allocator's copies and this backend touch it, so a program that gives the backend host memory, or
// moves bytes across without the et_copy kernels, fails. Built into the test build only.
#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/core/device_allocator.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace test_device {
namespace {

using executorch::runtime::ArrayRef;
using executorch::runtime::Backend;
using executorch::runtime::BackendExecutionContext;
using executorch::runtime::BackendInitContext;
using executorch::runtime::BackendInterface;
using executorch::runtime::CompileSpec;
using executorch::runtime::DelegateHandle;
using executorch::runtime::DeviceAllocator;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::FreeableBuffer;
using executorch::runtime::Result;
using executorch::runtime::ScalarType;
using executorch::runtime::Span;
using executorch::runtime::etensor::DeviceIndex;
using executorch::runtime::etensor::DeviceType;

constexpr size_t kMaxBlocks = 64;
constexpr uint32_t kMaxChannels = 1u << 20;

class TestDeviceMemory final : public DeviceAllocator {
 public:
  Result<void*> allocate(size_t nbytes, DeviceIndex index, size_t alignment) override {
    ET_CHECK_OR_RETURN(index == 0, NotSupported, "test device: only cuda:0 exists, not cuda:%d", int(index));
    ET_CHECK_OR_RETURN(alignment != 0 && (alignment & (alignment - 1)) == 0 && alignment <= 4096, InvalidArgument,
                       "test device: bad alignment %zu", alignment);
    for (Block& b : blocks_) {
      if (b.start != nullptr) continue;
      void* p = std::aligned_alloc(alignment, (nbytes + alignment - 1) / alignment * alignment);
      ET_CHECK_OR_RETURN(p != nullptr, MemoryAllocationFailed, "test device: out of memory (%zu bytes)", nbytes);
      b = {static_cast<uint8_t*>(p), nbytes};
      return p;
    }
    ET_LOG(Error, "test device: more than %zu blocks", kMaxBlocks);
    return Error::MemoryAllocationFailed;
  }
  void deallocate(void* ptr, DeviceIndex) override {
    for (Block& b : blocks_)
      if (b.start == ptr) {
        std::free(ptr);
        b = {};
      }
  }
  Error copy_host_to_device(void* dst, const void* src, size_t nbytes, DeviceIndex) override {
    ET_CHECK_OR_RETURN(owns(dst, nbytes) && !owns(src, nbytes), InvalidArgument,
                       "test device: copy_host_to_device was given the wrong memory");
    std::memcpy(dst, src, nbytes);
    ++h2d;
    return Error::Ok;
  }
  Error copy_device_to_host(void* dst, const void* src, size_t nbytes, DeviceIndex) override {
    ET_CHECK_OR_RETURN(owns(src, nbytes) && !owns(dst, nbytes), InvalidArgument,
                       "test device: copy_device_to_host was given the wrong memory");
    std::memcpy(dst, src, nbytes);
    ++d2h;
    return Error::Ok;
  }
  DeviceType device_type() const override { return DeviceType::CUDA; }

  bool owns(const void* p, size_t nbytes) const {
    const auto* q = static_cast<const uint8_t*>(p);
    for (const Block& b : blocks_)
      if (b.start != nullptr && q >= b.start && nbytes <= b.size && size_t(q - b.start) <= b.size - nbytes) return true;
    return false;
  }

  uint64_t h2d = 0, d2h = 0;

 private:
  struct Block {
    uint8_t* start = nullptr;
    size_t size = 0;
  };
  Block blocks_[kMaxBlocks];
};

TestDeviceMemory g_memory;

struct Engine {
  uint32_t channels;
  uint8_t n_inputs, n_outputs;
  uint8_t picks[2];  // which engine output each delegate output is
  float* scale;  // channels values, then `channels` shifts
};

class TestDeviceBackend final : public BackendInterface {
 public:
  bool is_available() const override { return true; }

  Result<DelegateHandle*> init(BackendInitContext& context, FreeableBuffer* processed,
                               ArrayRef<CompileSpec> compile_specs) const override {
    const auto* p = static_cast<const uint8_t*>(processed->data());
    const size_t n = processed->size();
    ET_CHECK_OR_RETURN(n >= 8 && std::memcmp(p, "TDB1", 4) == 0, InvalidProgram, "test device: not a TDB1 payload");
    const uint8_t index = p[4], n_inputs = p[5], n_outputs = p[6];
    ET_CHECK_OR_RETURN(n_inputs >= 1 && n_inputs <= 2 && n_outputs >= 1 && n_outputs <= 2 && n - 8 >= n_outputs,
                       InvalidProgram, "test device: bad input/output counts");
    // The partitioner's target_device must name the engine's device.
    char want[16];
    std::snprintf(want, sizeof(want), "cuda:%u", unsigned(index));
    bool named = false;
    for (size_t i = 0; i < compile_specs.size(); ++i) {
      const CompileSpec& s = compile_specs[i];
      if (std::strcmp(s.key, "target_device") == 0)
        named = s.value.nbytes == std::strlen(want) && std::memcmp(s.value.buffer, want, s.value.nbytes) == 0;
    }
    ET_CHECK_OR_RETURN(named, InvalidProgram, "test device: no target_device compile spec naming %s", want);
    const uint8_t* engine = p + 8 + n_outputs;
    const size_t engine_size = n - 8 - n_outputs;
    ET_CHECK_OR_RETURN(engine_size >= 8 && std::memcmp(engine, "FKE1", 4) == 0, InvalidProgram,
                       "test device: not an FKE1 engine");
    uint32_t channels;
    std::memcpy(&channels, engine + 4, 4);
    ET_CHECK_OR_RETURN(channels >= 1 && channels <= kMaxChannels && engine_size - 8 == size_t(channels) * 8,
                       InvalidProgram, "test device: engine of %u channels has %zu bytes", channels, engine_size);
    Engine* e = context.get_runtime_allocator()->allocate_list<Engine>(1);
    ET_CHECK_OR_RETURN(e != nullptr, MemoryAllocationFailed, "test device: out of method memory");
    e->scale = context.get_runtime_allocator()->allocate_list<float>(size_t(channels) * 2);
    ET_CHECK_OR_RETURN(e->scale != nullptr, MemoryAllocationFailed, "test device: out of method memory");
    std::memcpy(e->scale, engine + 8, size_t(channels) * 8);
    e->channels = channels;
    e->n_inputs = n_inputs;
    e->n_outputs = n_outputs;
    for (uint8_t i = 0; i < n_outputs; ++i) {
      e->picks[i] = p[8 + i];
      ET_CHECK_OR_RETURN(e->picks[i] <= 1, InvalidProgram, "test device: the engine has 2 outputs");
    }
    processed->Free();
    return static_cast<DelegateHandle*>(e);
  }

  Error execute(BackendExecutionContext&, DelegateHandle* handle, Span<EValue*> args) const override {
    const Engine& e = *static_cast<Engine*>(handle);
    ET_CHECK_OR_RETURN(args.size() == size_t(e.n_inputs) + e.n_outputs, InvalidArgument,
                       "test device: %zu arguments, expected %u", args.size(), unsigned(e.n_inputs + e.n_outputs));
    float* data[4];
    int64_t numel = -1;
    for (size_t i = 0; i < args.size(); ++i) {
      ET_CHECK_OR_RETURN(args[i]->isTensor(), InvalidArgument, "test device: argument %zu is not a tensor", i);
      auto t = args[i]->toTensor();
      ET_CHECK_OR_RETURN(t.scalar_type() == ScalarType::Float && t.dim() >= 1 && t.size(-1) == e.channels &&
                             (numel < 0 || t.numel() == numel),
                         InvalidArgument, "test device: argument %zu is not float32[..., %u] like the others", i,
                         e.channels);
      numel = t.numel();
      ET_CHECK_OR_RETURN(t.device_type() == DeviceType::CUDA && g_memory.owns(t.const_data_ptr(), t.nbytes()),
                         InvalidArgument, "test device: argument %zu is in host memory, not the device's", i);
      data[i] = t.mutable_data_ptr<float>();
    }
    const float* x = data[0];
    const float* y = e.n_inputs > 1 ? data[1] : nullptr;
    const float* shift = e.scale + e.channels;
    for (int64_t i = 0; i < numel; ++i) {
      const uint32_t c = uint32_t(i % e.channels);
      float r = x[i] * e.scale[c] + shift[c];
      if (y != nullptr) r += y[i];
      for (uint8_t k = 0; k < e.n_outputs; ++k) data[e.n_inputs + k][i] = e.picks[k] == 0 ? r : (r > 0 ? r : 0.0f);
    }
    return Error::Ok;
  }
};

TestDeviceBackend g_backend;
const Error g_memory_registered = executorch::runtime::register_device_allocator(&g_memory);
const Error g_registered = executorch::runtime::register_backend(Backend{"TestDeviceBackend", &g_backend});

}  // namespace
}  // namespace test_device
