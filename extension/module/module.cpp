// Module: the file, its Program and one HostedMethod per loaded method.
#include "extension/module/module.h"

#include <sys/mman.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

#include "extension/data_loader/open_file.h"
#include "runtime/platform/log.h"

namespace executorch {
namespace extension {

using runtime::HostedMethod;
using runtime::Method;
using runtime::Tag;
using runtime::Tensor;

// The program's bytes: a heap copy, or a private writable mapping (constants point into it and the
// runtime wants writable memory, see Program::load).
struct Module::FileData {
  std::vector<uint8_t> heap;
  void* mapped = nullptr;
  size_t mapped_size = 0;

  ~FileData() {
    if (mapped != nullptr) munmap(mapped, mapped_size);
  }
  const void* data() const { return mapped != nullptr ? mapped : static_cast<const void*>(heap.data()); }
  size_t size() const { return mapped != nullptr ? mapped_size : heap.size(); }
};

Module::Module(const std::string& file_path, LoadMode load_mode) : file_path_(file_path), load_mode_(load_mode) {}

Module::~Module() {
  // Methods hold pointers into the program and the file: drop them first.
  methods_.clear();
  program_.reset();
}

Error Module::load(Program::Verification verification) {
  if (is_loaded()) return Error::Ok;
  std::unique_ptr<FileData> file(new FileData());
  const OpenedFile opened = open_file(file_path_.c_str());
  ET_CHECK_OR_RETURN(opened.fd >= 0, AccessFailed, "Module: %s %s", file_path_.c_str(), opened.problem);
  const int fd = opened.fd;
  const size_t size = opened.size;
  if (size == 0 || ::lseek(fd, 0, SEEK_SET) != 0) {
    ::close(fd);
    ET_LOG(Error, "Module: %s %s", file_path_.c_str(),
           size == 0 ? "is empty (0 bytes); not a .pte" : "cannot be read from its start");
    return size == 0 ? Error::InvalidProgram : Error::AccessFailed;
  }
  if (load_mode_ == LoadMode::File) {
    file->heap.resize(size);
    size_t got = 0;
    while (got < size) {
      ssize_t n = ::read(fd, file->heap.data() + got, size - got);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    ::close(fd);
    ET_CHECK_OR_RETURN(got == size, AccessFailed, "Module: short read of '%s' (%zu of %zu bytes)", file_path_.c_str(),
                       got, size);
  } else {
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    ::close(fd);
    ET_CHECK_OR_RETURN(p != MAP_FAILED, AccessFailed, "Module: cannot map '%s'", file_path_.c_str());
    file->mapped = p;
    file->mapped_size = size;
    if (load_mode_ != LoadMode::Mmap && ::mlock(p, size) != 0) {
      ET_CHECK_OR_RETURN(load_mode_ == LoadMode::MmapUseMlockIgnoreErrors, AccessFailed,
                         "Module: cannot lock '%s' in memory (mlock refused; use "
                         "LoadMode::MmapUseMlockIgnoreErrors to go on without it)",
                         file_path_.c_str());
    }
  }
  Result<Program> program = Program::load(file->data(), file->size(), verification);
  if (!program.ok()) return program.error();
  file_ = std::move(file);
  program_ = std::make_shared<Program>(std::move(*program));
  return Error::Ok;
}

Result<size_t> Module::num_methods() {
  Error e = load();
  if (e != Error::Ok) return e;
  return program_->num_methods();
}

Result<std::unordered_set<std::string>> Module::method_names() {
  Error e = load();
  if (e != Error::Ok) return e;
  std::unordered_set<std::string> names;
  for (size_t i = 0; i < program_->num_methods(); ++i) {
    Result<const char*> name = program_->get_method_name(i);
    if (!name.ok()) return name.error();
    names.emplace(*name);
  }
  return names;
}

Result<MethodMeta> Module::method_meta(const std::string& method_name) {
  Error e = load();
  if (e != Error::Ok) return e;
  return program_->method_meta(method_name.c_str());
}

Error Module::load_method(const std::string& method_name) {
  if (is_method_loaded(method_name)) return Error::Ok;
  Error e = load();
  if (e != Error::Ok) return e;
  HostedMethod::Limits limits;
  if (shared_ == nullptr) {
    Result<std::shared_ptr<runtime::SharedArena>> shared =
        runtime::SharedArena::make(*program_, limits.max_planned_bytes);
    if (!shared.ok()) return shared.error();
    shared_ = std::move(*shared);
  }
  Result<std::unique_ptr<HostedMethod>> hosted =
      HostedMethod::load(*program_, method_name.c_str(), limits, nullptr, shared_);
  if (!hosted.ok()) return hosted.error();
  methods_.emplace(method_name, std::move(*hosted));
  return Error::Ok;
}

bool Module::is_method_loaded(const std::string& method_name) const {
  return methods_.find(method_name) != methods_.end();
}

Result<Method*> Module::method(const std::string& method_name) {
  Error e = load_method(method_name);
  if (e != Error::Ok) return e;
  return &methods_.at(method_name)->method();
}

Error Module::set_input(const std::string& method_name, const EValue& input, size_t input_index) {
  Result<Method*> m = method(method_name);
  if (!m.ok()) return m.error();
  if (!input.isTensor()) return (*m)->set_input(input_index, input);
  const Tensor t = input.toTensor();
  ET_CHECK_OR_RETURN(t.unsafeGetTensorImpl() != nullptr, InvalidArgument,
                     "Module: input %zu of '%s' is an empty Tensor handle", input_index, method_name.c_str());
  int64_t sizes[runtime::kTensorDimensionLimit];
  for (size_t d = 0; d < t.sizes().size(); ++d) sizes[d] = t.sizes()[d];
  return (*m)->set_input_tensor(input_index, t.scalar_type(), runtime::Span<const int64_t>(sizes, t.sizes().size()),
                                t.const_data_ptr(), t.nbytes());
}

Error Module::set_inputs(const std::string& method_name, const std::vector<EValue>& inputs) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    Error e = set_input(method_name, inputs[i], i);
    if (e != Error::Ok) return e;
  }
  return Error::Ok;
}

Result<std::vector<EValue>> Module::execute(const std::string& method_name, const std::vector<EValue>& inputs) {
  Result<Method*> m = method(method_name);
  if (!m.ok()) return m.error();
  ET_CHECK_OR_RETURN(inputs.size() <= (*m)->inputs_size(), InvalidArgument, "Module: '%s' takes %zu inputs; got %zu",
                     method_name.c_str(), (*m)->inputs_size(), inputs.size());
  Error e = set_inputs(method_name, inputs);
  if (e != Error::Ok) return e;
  e = (*m)->execute();
  if (e != Error::Ok) return e;
  std::vector<EValue> outputs;
  outputs.reserve((*m)->outputs_size());
  for (size_t j = 0; j < (*m)->outputs_size(); ++j) {
    Result<const EValue*> out = (*m)->get_output(j);
    if (!out.ok()) return out.error();
    outputs.push_back(**out);
  }
  return outputs;
}

Result<EValue> Module::get(const std::string& method_name, const std::vector<EValue>& inputs) {
  Result<std::vector<EValue>> outputs = execute(method_name, inputs);
  if (!outputs.ok()) return outputs.error();
  ET_CHECK_OR_RETURN(!outputs->empty(), InvalidArgument, "Module: '%s' has no outputs", method_name.c_str());
  return outputs->front();
}

}  // namespace extension
}  // namespace executorch
