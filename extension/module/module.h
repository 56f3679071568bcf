// executorch::extension::Module: load a .pte file and run its methods, for host applications.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "extension/tensor/tensor_ptr.h"
#include "runtime/core/evalue.h"
#include "runtime/core/result.h"
#include "runtime/executor/hosted_method.h"
#include "runtime/executor/method_meta.h"
#include "runtime/executor/program.h"

namespace executorch {
namespace extension {

using runtime::Error;
using runtime::EValue;
using runtime::MethodMeta;
using runtime::Program;
using runtime::Result;

class Module {
 public:
  // How the file reaches memory: read into the heap (File: later changes to the file never reach
  // the loaded program), or mapped (optionally locked in RAM; the *IgnoreErrors form goes on when
  // mlock is refused): a mapped file truncated while loaded is undefined behaviour (SIGBUS on the
  // next read past its new end), so map only files nothing rewrites in place.
  enum class LoadMode { File, Mmap, MmapUseMlock, MmapUseMlockIgnoreErrors };

  // Nothing is read until load() (or the first call that needs the program).
  explicit Module(const std::string& file_path, LoadMode load_mode = LoadMode::File);
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Reads and verifies the program. Loading twice is a no-op.
  Error load(Program::Verification verification = Program::Verification::Minimal);
  bool is_loaded() const { return program_ != nullptr; }
  // The loaded program (nullptr before load()).
  std::shared_ptr<Program> program() const { return program_; }

  Result<size_t> num_methods();
  Result<std::unordered_set<std::string>> method_names();
  Result<MethodMeta> method_meta(const std::string& method_name);

  // Plans memory for the method and initialises it (its delegates included).
  Error load_method(const std::string& method_name);
  bool is_method_loaded(const std::string& method_name) const;
  Error load_forward() { return load_method("forward"); }

  // Sets the inputs given, runs the method and returns its outputs. Output tensors point into the
  // method's memory: they stay valid until the method runs again or the Module goes.
  Result<std::vector<EValue>> execute(const std::string& method_name, const std::vector<EValue>& inputs);
  Result<std::vector<EValue>> execute(const std::string& method_name, const EValue& input) {
    return execute(method_name, std::vector<EValue>{input});
  }
  Result<std::vector<EValue>> execute(const std::string& method_name, const TensorPtr& input) {
    return execute(method_name, std::vector<EValue>{EValue(*input)});
  }
  Result<std::vector<EValue>> execute(const std::string& method_name) {
    return execute(method_name, std::vector<EValue>{});
  }

  Result<std::vector<EValue>> forward(const std::vector<EValue>& inputs) { return execute("forward", inputs); }
  Result<std::vector<EValue>> forward(const EValue& input) { return execute("forward", input); }
  Result<std::vector<EValue>> forward(const TensorPtr& input) { return execute("forward", input); }
  Result<std::vector<EValue>> forward() { return execute("forward"); }

  // The first output of a method.
  Result<EValue> get(const std::string& method_name, const std::vector<EValue>& inputs = {});

  // Inputs kept for the next execute() of the method; execute's own inputs go first.
  Error set_input(const std::string& method_name, const EValue& input, size_t input_index);
  Error set_input(const EValue& input, size_t input_index) { return set_input("forward", input, input_index); }
  Error set_inputs(const std::string& method_name, const std::vector<EValue>& inputs);
  Error set_inputs(const std::vector<EValue>& inputs) { return set_inputs("forward", inputs); }

 private:
  struct FileData;

  Result<runtime::Method*> method(const std::string& method_name);

  std::string file_path_;
  LoadMode load_mode_;
  std::unique_ptr<FileData> file_;
  std::shared_ptr<Program> program_;
  std::unordered_map<std::string, std::unique_ptr<runtime::HostedMethod>> methods_;
  // Memory id 2, one block for all methods: the state methods exported with shared mutable buffers share.
  std::shared_ptr<runtime::SharedArena> shared_;
};

}  // namespace extension
}  // namespace executorch
