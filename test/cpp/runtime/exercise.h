// Drives a byte buffer through everything the runtime does with a file: load the
// program, load each method, fill tensor inputs, execute. Shared by tests and fuzzer.
#pragma once

#include <cstring>
#include <vector>

#include "runtime/executor/hosted_method.h"

namespace rtest {

using namespace executorch::runtime;

// Returns the first error met (Ok when every method ran). Never crashes, by contract.
inline Error exercise(const uint8_t* data, size_t size) {
  // The program may be written through by a malformed kernel call; give it its own copy.
  std::vector<uint8_t> file(data, data + size);
  Result<Program> program = Program::load(file.data(), file.size());
  if (!program.ok()) return program.error();
  HostedMethod::Limits limits;
  limits.max_planned_bytes = uint64_t(64) << 20;
  limits.max_method_bytes = size_t(64) << 20;
  limits.temp_bytes = size_t(1) << 20;
  limits.instruction_limit = 100'000;
  Error first = Error::Ok;
  // Memory id 2 shared by all methods, as the Python bindings and Module load them.
  Result<std::shared_ptr<SharedArena>> shared = SharedArena::make(*program, limits.max_planned_bytes);
  if (!shared.ok()) return shared.error();
  for (size_t m = 0; m < program->num_methods(); ++m) {
    Result<const char*> name = program->get_method_name(m);
    if (!name.ok()) return name.error();
    auto hosted = HostedMethod::load(*program, *name, limits, nullptr, *shared);
    if (!hosted.ok()) {
      if (first == Error::Ok) first = hosted.error();
      continue;
    }
    Method& method = (*hosted)->method();
    MethodMeta meta = method.method_meta();
    // One buffer per input: inputs without planned memory are read in place by execute().
    std::vector<std::vector<uint8_t>> inputs(method.inputs_size());
    for (size_t i = 0; i < method.inputs_size(); ++i) {
      Result<TensorInfo> info = meta.input_tensor_info(i);
      if (!info.ok()) continue;
      std::vector<int64_t> sizes(info->sizes.begin(), info->sizes.end());
      uint64_t n = element_size(info->scalar_type);
      for (int64_t s : sizes)
        n = s >= 0 && n * uint64_t(s) <= (uint64_t(16) << 20) ? n * uint64_t(s) : (uint64_t(1) << 40);
      if (n > (uint64_t(16) << 20)) continue;
      inputs[i].assign(static_cast<size_t>(n), 1);
      method.set_input_tensor(i, info->scalar_type, Span<const int64_t>(sizes.data(), sizes.size()), inputs[i].data(),
                              inputs[i].size());
    }
    Error e = method.execute();
    if (first == Error::Ok) first = e;
  }
  return first;
}

}  // namespace rtest
