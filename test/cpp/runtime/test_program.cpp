// Program and Method on .pte files written by the published exporter.
#include <algorithm>
#include <cstring>

#include "runtime/executor/hosted_method.h"
#include "test/cpp/runtime/harness.h"

using namespace executorch::runtime;

namespace {

struct Loaded {
  std::vector<uint8_t> file;
  std::optional<Program> program;
};

Loaded load(const char* name) {
  Loaded l;
  l.file = rtest::read_file(rtest::fixture(name));
  Result<Program> p = Program::load(l.file.data(), l.file.size());
  if (p.ok()) l.program.emplace(std::move(*p));
  return l;
}

Error set_floats(Method& m, size_t index, std::vector<int64_t> sizes, const std::vector<float>& v) {
  return m.set_input_tensor(index, ScalarType::Float, Span<const int64_t>(sizes.data(), sizes.size()), v.data(),
                            v.size() * sizeof(float));
}

std::vector<float> output_floats(Method& m, size_t index) {
  Result<const EValue*> out = m.get_output(index);
  if (!out.ok() || !(*out)->isTensor()) return {};
  Tensor t = (*out)->toTensor();
  return std::vector<float>(t.const_data_ptr<float>(), t.const_data_ptr<float>() + t.numel());
}

}  // namespace

RTEST(extended_header_is_parsed) {
  auto file = rtest::read_file(rtest::fixture("native/affine.pte"));
  Result<ExtendedHeader> h = Program::parse_extended_header(file.data(), file.size());
  RCHECK(h.ok());
  RCHECK(h.ok() && h->program_size > 8 && h->program_size <= file.size());
  RCHECK(h.ok() && h->segment_base_offset >= h->program_size);
  RCHECK(h.ok() && h->segment_base_offset + h->segment_data_size <= file.size());
}

RTEST(program_lists_methods_and_meta) {
  Loaded l = load("native/add.pte");
  RCHECK(l.program.has_value());
  if (!l.program) return;
  RCHECK(l.program->num_methods() == 1);
  RCHECK(std::strcmp(*l.program->get_method_name(0), "forward") == 0);
  RCHECK(!l.program->get_method_name(1).ok());
  Result<MethodMeta> meta = l.program->method_meta("forward");
  RCHECK(meta.ok() && meta->num_inputs() == 2 && meta->num_outputs() == 1);
  RCHECK(meta.ok() && meta->input_tensor_info(0)->sizes.size() == 2);
  RCHECK(meta.ok() && !meta->input_tensor_info(2).ok());
  RCHECK(l.program->method_meta("backward").error() == Error::NotFound);
}

RTEST(add_runs_and_repeats) {
  Loaded l = load("native/add.pte");
  RCHECK(l.program.has_value());
  if (!l.program) return;
  auto hosted = HostedMethod::load(*l.program, "forward", {});
  RCHECK(hosted.ok());
  if (!hosted.ok()) return;
  Method& m = (*hosted)->method();
  RCHECK(m.execute() == Error::Ok);  // planned inputs start zeroed
  RCHECK(set_floats(m, 0, {2, 3}, {1, 2, 3, 4, 5, 6}) == Error::Ok);
  RCHECK(set_floats(m, 1, {2, 3}, {10, 20, 30, 40, 50, 60}) == Error::Ok);
  RCHECK(m.execute() == Error::Ok);
  RCHECK((output_floats(m, 0) == std::vector<float>{11, 22, 33, 44, 55, 66}));
  RCHECK(set_floats(m, 1, {2, 3}, {0, 0, 0, 0, 0, 1}) == Error::Ok);
  RCHECK(m.execute() == Error::Ok);
  RCHECK((output_floats(m, 0) == std::vector<float>{1, 2, 3, 4, 5, 7}));
}

RTEST(set_input_checks_dtype_rank_sizes_bytes) {
  Loaded l = load("native/add.pte");
  RCHECK(l.program.has_value());
  if (!l.program) return;
  auto hosted = HostedMethod::load(*l.program, "forward", {});
  RCHECK(hosted.ok());
  if (!hosted.ok()) return;
  Method& m = (*hosted)->method();
  std::vector<float> v(6, 1.f);
  std::vector<int64_t> ok = {2, 3}, wrong = {3, 2}, rank3 = {1, 2, 3};
  RCHECK(m.set_input_tensor(0, ScalarType::Int, Span<const int64_t>(ok.data(), 2), v.data(), 24) ==
         Error::InvalidArgument);
  RCHECK(m.set_input_tensor(0, ScalarType::Float, Span<const int64_t>(wrong.data(), 2), v.data(), 24) ==
         Error::InvalidArgument);
  RCHECK(m.set_input_tensor(0, ScalarType::Float, Span<const int64_t>(rank3.data(), 3), v.data(), 24) ==
         Error::InvalidArgument);
  RCHECK(m.set_input_tensor(0, ScalarType::Float, Span<const int64_t>(ok.data(), 2), v.data(), 20) ==
         Error::InvalidArgument);
  RCHECK(m.set_input_tensor(2, ScalarType::Float, Span<const int64_t>(ok.data(), 2), v.data(), 24) ==
         Error::InvalidArgument);
  RCHECK(m.set_input(0, EValue(int64_t(1))) == Error::InvalidArgument);
}

RTEST(constants_come_from_the_segment) {
  Loaded l = load("native/affine.pte");
  RCHECK(l.program.has_value());
  if (!l.program) return;
  auto hosted = HostedMethod::load(*l.program, "forward", {});
  RCHECK(hosted.ok());
  if (!hosted.ok()) return;
  Method& m = (*hosted)->method();
  RCHECK(set_floats(m, 0, {2, 3}, {0, 1, 2, 3, 4, 5}) == Error::Ok);
  RCHECK(m.execute() == Error::Ok);
  // x * (arange(6)/4) + 0.5, and x + x
  std::vector<float> want0, want1;
  for (int i = 0; i < 6; ++i) {
    want0.push_back(i * (i / 4.f) + 0.5f);
    want1.push_back(2.f * i);
  }
  RCHECK(output_floats(m, 0) == want0);
  RCHECK(output_floats(m, 1) == want1);
}

RTEST(cond_takes_both_branches) {
  Loaded l = load("native/cond.pte");
  RCHECK(l.program.has_value());
  if (!l.program) return;
  auto hosted = HostedMethod::load(*l.program, "forward", {});
  RCHECK(hosted.ok());
  if (!hosted.ok()) return;
  Method& m = (*hosted)->method();
  for (bool p : {true, false}) {
    std::vector<int64_t> none;
    RCHECK(m.set_input_tensor(0, ScalarType::Bool, Span<const int64_t>(none.data(), 0), &p, 1) == Error::Ok);
    RCHECK(set_floats(m, 1, {4}, {1, 2, 3, 4}) == Error::Ok);
    RCHECK(m.execute() == Error::Ok);
    std::vector<float> want = p ? std::vector<float>{2, 4, 6, 8} : std::vector<float>{1, 4, 9, 16};
    RCHECK(output_floats(m, 0) == want);
  }
}

RTEST(missing_operator_is_named_error) {
  auto file = rtest::read_file(rtest::fixture("native/add.pte"));
  // Rename the operator in place (same length) so the registry cannot resolve it.
  const char* needle = "aten::add";
  auto it = std::search(file.begin(), file.end(), needle, needle + 9);
  RCHECK(it != file.end());
  if (it == file.end()) return;
  it[6] = 'q';
  Result<Program> p = Program::load(file.data(), file.size());
  RCHECK(p.ok());
  if (!p.ok()) return;
  auto hosted = HostedMethod::load(*p, "forward", {});
  RCHECK(hosted.error() == Error::OperatorMissing);
}

RTEST(rejects_non_programs) {
  uint8_t zeros[64] = {};
  RCHECK(Program::load(zeros, sizeof(zeros)).error() == Error::InvalidProgram);
  RCHECK(Program::load(zeros, 3).error() == Error::InvalidProgram);
  RCHECK(Program::load(nullptr, 8).error() == Error::InvalidArgument);
  // An empty file is no program, whether its bytes come as a null pointer or not.
  RCHECK(Program::load(nullptr, 0).error() == Error::InvalidProgram);
  RCHECK(Program::load(zeros, 0).error() == Error::InvalidProgram);
}

RTEST(execute_stops_at_the_instruction_limit) {
  Loaded l = load("native/cond.pte");
  RCHECK(l.program.has_value());
  if (!l.program) return;
  auto hosted = HostedMethod::load(*l.program, "forward", {});
  RCHECK(hosted.ok());
  if (!hosted.ok()) return;
  Method& m = (*hosted)->method();
  // On by default (a program that loops forever is an error, not a hang), and the hosts' default too.
  RCHECK(m.instruction_limit() == Method::kDefaultInstructionLimit && Method::kDefaultInstructionLimit > 0);
  RCHECK(HostedMethod::Limits().instruction_limit == Method::kDefaultInstructionLimit);
  bool p = true;
  std::vector<int64_t> none;
  RCHECK(m.set_input_tensor(0, ScalarType::Bool, Span<const int64_t>(none.data(), 0), &p, 1) == Error::Ok);
  RCHECK(set_floats(m, 1, {4}, {1, 2, 3, 4}) == Error::Ok);
  RCHECK(m.execute() == Error::Ok);
  m.set_instruction_limit(1);
  RCHECK(m.execute() == Error::OutOfResources);
  m.set_instruction_limit(0);  // no limit
  RCHECK(m.execute() == Error::Ok);
  RCHECK(output_floats(m, 0) == (std::vector<float>{2, 4, 6, 8}));
}

RTEST(planned_buffers_too_small_are_refused) {
  Loaded l = load("native/add.pte");
  RCHECK(l.program.has_value());
  if (!l.program) return;
  alignas(16) static uint8_t method_mem[64 << 10];
  alignas(16) static uint8_t arena[8];
  MemoryAllocator alloc(method_mem, sizeof(method_mem));
  Span<uint8_t> arenas[1] = {Span<uint8_t>(arena, sizeof(arena))};
  MemoryManager mm;
  mm.method_allocator = &alloc;
  mm.planned_buffers = Span<Span<uint8_t>>(arenas, 1);
  RCHECK(l.program->load_method("forward", &mm).error() == Error::InvalidArgument);
  mm.planned_buffers = Span<Span<uint8_t>>();
  RCHECK(l.program->load_method("forward", &mm).error() == Error::InvalidArgument);
}

namespace {

// Host memory standing in for a device, counting what it hands out and takes back.
class CountingDevice final : public DeviceAllocator {
 public:
  Result<void*> allocate(size_t nbytes, etensor::DeviceIndex, size_t) override {
    ++allocated;
    return std::calloc(nbytes, 1);
  }
  void deallocate(void* ptr, etensor::DeviceIndex) override {
    ++freed;
    std::free(ptr);
  }
  Error copy_host_to_device(void*, const void*, size_t, etensor::DeviceIndex) override { return Error::Ok; }
  Error copy_device_to_host(void*, const void*, size_t, etensor::DeviceIndex) override { return Error::Ok; }
  etensor::DeviceType device_type() const override { return type; }
  etensor::DeviceType type = etensor::DeviceType::CUDA;
  int allocated = 0, freed = 0;
};

}  // namespace

// delegate_device.pte: the published exporter's file for test/device_backend's one_engine model
// ($ET_REFERENCE_PYTHON test/device_backend/device_backend/export_reference.py one_engine ...): its
// delegate names target_device cuda:0, so arena 2 is device memory.
RTEST(planned_arenas_on_a_device_come_from_its_allocator) {
  Loaded l = load("native/delegate_device.pte");
  RCHECK(l.program.has_value());
  if (!l.program) return;
  Result<MethodMeta> meta = l.program->method_meta("forward");
  RCHECK(meta.ok() && meta->num_memory_planned_buffers() == 2);
  if (!meta.ok()) return;
  RCHECK(meta->memory_planned_buffer_device(0)->is_cpu());
  Result<etensor::Device> device = meta->memory_planned_buffer_device(1);
  RCHECK(device.ok() && device->type == etensor::DeviceType::CUDA && device->index == 0);
  RCHECK(meta->memory_planned_buffer_device(2).error() == Error::InvalidArgument);
  // No allocator for the device: the method does not load (rather than run in host memory).
  RCHECK(HostedMethod::load(*l.program, "forward", {}).error() == Error::NotFound);

  static CountingDevice memory;
  CountingDevice cpu;
  cpu.type = etensor::DeviceType::CPU;
  RCHECK(register_device_allocator(nullptr) == Error::InvalidArgument);
  RCHECK(register_device_allocator(&cpu) == Error::InvalidArgument);
  RCHECK(register_device_allocator(&memory) == Error::Ok);
  CountingDevice other;
  RCHECK(register_device_allocator(&other) == Error::InvalidArgument);
  RCHECK(get_device_allocator(etensor::DeviceType::CUDA) == &memory);
  {
    // This test binary registers no et_copy kernels, so the load stops there; the device arena was
    // taken from the allocator and is given back.
    auto hosted = HostedMethod::load(*l.program, "forward", {});
    RCHECK(!hosted.ok() && memory.allocated == 1);
  }
  RCHECK(memory.freed == memory.allocated);
}

// caller_outputs.pte: the published exporter's file for models.py's make_caller_outputs with
// alloc_graph_output=False (x + y, its square, and x + y again): its outputs take caller memory.
RTEST(caller_bound_outputs_need_a_buffer_before_execute) {
  Loaded l = load("native/caller_outputs.pte");
  RCHECK(l.program.has_value());
  if (!l.program) return;
  std::vector<uint8_t> method_mem(1 << 16), arena(64);
  MemoryAllocator method_alloc(method_mem.data(), method_mem.size());
  Span<uint8_t> arenas[] = {Span<uint8_t>(arena.data(), arena.size())};
  MemoryManager mm;
  mm.method_allocator = &method_alloc;
  mm.planned_buffers = Span<Span<uint8_t>>(arenas, 1);
  Result<Method> loaded = l.program->load_method("forward", &mm);
  RCHECK(loaded.ok());
  if (!loaded.ok()) return;
  Method& m = *loaded;
  RCHECK(m.outputs_size() == 3 && m.output_is_caller_bound(0) && m.output_is_caller_bound(2));
  RCHECK(!m.output_is_caller_bound(3));
  RCHECK(set_floats(m, 0, {2, 3}, {1, 2, 3, 4, 5, 6}) == Error::Ok);
  RCHECK(set_floats(m, 1, {2, 3}, {1, 1, 1, 1, 1, 1}) == Error::Ok);
  RCHECK(m.execute() == Error::InvalidState);  // no output bound yet
  alignas(8) float sum[6], square[6], big[8];
  RCHECK(m.set_output_data_ptr(sum, sizeof(sum) - 4, 0) == Error::InvalidArgument);  // too small
  RCHECK(m.set_output_data_ptr(nullptr, sizeof(sum), 0) == Error::InvalidArgument);
  RCHECK(m.set_output_data_ptr(reinterpret_cast<uint8_t*>(big) + 1, sizeof(sum), 0) == Error::InvalidArgument);
  RCHECK(m.set_output_data_ptr(sum, sizeof(sum), 3) == Error::InvalidArgument);  // no output 3
  RCHECK(m.set_output_data_ptr(sum, sizeof(sum), 0) == Error::Ok);  // also binds output 2, the same value
  RCHECK(m.execute() == Error::InvalidState);  // output 1 still unbound
  RCHECK(m.set_output_data_ptr(big, sizeof(big), 1) == Error::Ok);  // larger is fine
  RCHECK(m.set_output_data_ptr(square, sizeof(square), 1) == Error::Ok);  // rebinding replaces it
  RCHECK(m.execute() == Error::Ok);
  RCHECK((std::vector<float>(sum, sum + 6) == std::vector<float>{2, 3, 4, 5, 6, 7}));
  RCHECK((std::vector<float>(square, square + 6) == std::vector<float>{4, 9, 16, 25, 36, 49}));
  RCHECK(output_floats(m, 2) == output_floats(m, 0));
  RCHECK(set_floats(m, 1, {2, 3}, {0, 0, 0, 0, 0, 0}) == Error::Ok);
  RCHECK(m.execute() == Error::Ok);  // bindings hold across runs
  RCHECK((std::vector<float>(square, square + 6) == std::vector<float>{1, 4, 9, 16, 25, 36}));
}

RTEST(hosted_method_binds_caller_bound_outputs_itself) {
  Loaded l = load("native/caller_outputs.pte");
  RCHECK(l.program.has_value());
  if (!l.program) return;
  auto hosted = HostedMethod::load(*l.program, "forward", {});
  RCHECK(hosted.ok());
  if (!hosted.ok()) return;
  Method& m = (*hosted)->method();
  RCHECK(set_floats(m, 0, {2, 3}, {1, 2, 3, 4, 5, 6}) == Error::Ok);
  RCHECK(set_floats(m, 1, {2, 3}, {1, 1, 1, 1, 1, 1}) == Error::Ok);
  RCHECK(m.execute() == Error::Ok);
  RCHECK((output_floats(m, 1) == std::vector<float>{4, 9, 16, 25, 36, 49}));
  RCHECK((output_floats(m, 2) == std::vector<float>{2, 3, 4, 5, 6, 7}));
}
