// run_pte: load a .pte, run one method, print (and optionally save) its outputs.
//   run_pte model.pte [--method NAME] [--input FILE]... [--out PREFIX]
// Each --input is the raw bytes of one tensor input, in order; inputs not given are filled with
// ones. --out writes output j's raw bytes to PREFIX<j>.bin.
#include <executorch/runtime/executor/hosted_method.h>
#include <executorch/runtime/executor/program.h>
#ifndef RUN_PTE_NO_MODULE
#include <executorch/extension/module/module.h>
#include <executorch/extension/tensor/tensor.h>
#endif

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::MethodMeta;
using executorch::runtime::ScalarType;
using executorch::runtime::Tensor;

namespace {

bool read_file(const std::string& path, std::vector<uint8_t>* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  out->assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  return true;
}

// An input's bytes: the file given, or ones of the method's dtype and shape.
bool input_bytes(const MethodMeta& meta, size_t i, const std::vector<std::string>& files, std::vector<uint8_t>* out,
                 std::vector<int32_t>* sizes, ScalarType* type) {
  auto info = meta.input_tensor_info(i);
  if (!info.ok()) return false;
  sizes->assign(info->sizes.begin(), info->sizes.end());
  *type = info->scalar_type;
  if (i < files.size()) return read_file(files[i], out);
  size_t numel = 1;
  for (int32_t s : *sizes) numel *= static_cast<size_t>(s);
  out->assign(numel * executorch::runtime::element_size(*type), 0);
  for (size_t k = 0; k < numel; ++k) {
    if (*type == ScalarType::Float) {
      const float one = 1.0f;
      std::memcpy(out->data() + k * 4, &one, 4);
    } else if (*type == ScalarType::Long) {
      const int64_t one = 1;
      std::memcpy(out->data() + k * 8, &one, 8);
    } else {
      (*out)[k * executorch::runtime::element_size(*type)] = 1;
    }
  }
  return true;
}

int report(const std::vector<EValue>& outputs, const std::string& out_prefix) {
  for (size_t j = 0; j < outputs.size(); ++j) {
    if (!outputs[j].isTensor()) {
      std::printf("output %zu: %s\n", j, executorch::runtime::tag_name(outputs[j].tag()));
      continue;
    }
    Tensor t = outputs[j].toTensor();
    std::printf("output %zu: %s [", j, executorch::runtime::scalar_type_name(t.scalar_type()));
    for (size_t d = 0; d < t.sizes().size(); ++d) std::printf(d ? ", %d" : "%d", t.sizes()[d]);
    std::printf("]");
    if (t.scalar_type() == ScalarType::Float) {
      const float* v = t.const_data_ptr<float>();
      for (int64_t k = 0; k < t.numel() && k < 5; ++k) std::printf(" %g", v[k]);
    }
    std::printf("\n");
    if (!out_prefix.empty()) {
      std::ofstream f(out_prefix + std::to_string(j) + ".bin", std::ios::binary);
      f.write(static_cast<const char*>(t.const_data_ptr()), static_cast<std::streamsize>(t.nbytes()));
      if (!f) return std::fprintf(stderr, "cannot write %s%zu.bin\n", out_prefix.c_str(), j), 2;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, method = "forward", out_prefix;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if ((arg == "--method" || arg == "--input" || arg == "--out") && i + 1 < argc) {
      std::string value = argv[++i];
      if (arg == "--method")
        method = value;
      else if (arg == "--input")
        files.push_back(value);
      else
        out_prefix = value;
    } else if (model.empty() && arg.rfind("--", 0) != 0) {
      model = arg;
    } else {
      return std::fprintf(stderr, "usage: %s model.pte [--method NAME] [--input FILE]... [--out PREFIX]\n", argv[0]), 2;
    }
  }
  if (model.empty())
    return std::fprintf(stderr, "usage: %s model.pte [--method NAME] [--input FILE]... [--out PREFIX]\n", argv[0]), 2;

#ifndef RUN_PTE_NO_MODULE
  executorch::extension::Module module(model);
  if (module.load() != Error::Ok) return std::fprintf(stderr, "cannot load %s\n", model.c_str()), 1;
  auto meta = module.method_meta(method);
  if (!meta.ok()) return std::fprintf(stderr, "%s has no method '%s'\n", model.c_str(), method.c_str()), 1;
  std::vector<std::vector<uint8_t>> data(meta->num_inputs());
  std::vector<executorch::extension::TensorPtr> tensors;
  std::vector<EValue> inputs;
  for (size_t i = 0; i < meta->num_inputs(); ++i) {
    std::vector<int32_t> sizes;
    ScalarType type;
    if (!input_bytes(*meta, i, files, &data[i], &sizes, &type))
      return std::fprintf(stderr, "input %zu: not a tensor, or its file cannot be read\n", i), 2;
    tensors.push_back(executorch::extension::from_blob(data[i].data(), sizes, type));
    if (!tensors.back()) return std::fprintf(stderr, "input %zu: bad shape\n", i), 2;
    inputs.emplace_back(*tensors.back());
  }
  auto outputs = module.execute(method, inputs);
  if (!outputs.ok())
    return std::fprintf(stderr, "%s failed: %s\n", method.c_str(), executorch::runtime::error_name(outputs.error())), 1;
  return report(*outputs, out_prefix);
#else
  std::vector<uint8_t> pte;
  if (!read_file(model, &pte)) return std::fprintf(stderr, "cannot read %s\n", model.c_str()), 2;
  auto program = executorch::runtime::Program::load(pte.data(), pte.size());
  if (!program.ok()) return std::fprintf(stderr, "cannot load %s\n", model.c_str()), 1;
  auto hosted =
      executorch::runtime::HostedMethod::load(*program, method.c_str(), executorch::runtime::HostedMethod::Limits());
  if (!hosted.ok()) return std::fprintf(stderr, "cannot load method '%s'\n", method.c_str()), 1;
  executorch::runtime::Method& m = (*hosted)->method();
  MethodMeta meta = m.method_meta();
  for (size_t i = 0; i < meta.num_inputs(); ++i) {
    std::vector<uint8_t> data;
    std::vector<int32_t> sizes;
    ScalarType type;
    if (!input_bytes(meta, i, files, &data, &sizes, &type))
      return std::fprintf(stderr, "input %zu: not a tensor, or its file cannot be read\n", i), 2;
    std::vector<int64_t> sizes64(sizes.begin(), sizes.end());
    Error e = m.set_input_tensor(i, type, {sizes64.data(), sizes64.size()}, data.data(), data.size());
    if (e != Error::Ok) return std::fprintf(stderr, "input %zu: %s\n", i, executorch::runtime::error_name(e)), 1;
  }
  Error e = m.execute();
  if (e != Error::Ok)
    return std::fprintf(stderr, "%s failed: %s\n", method.c_str(), executorch::runtime::error_name(e)), 1;
  std::vector<EValue> outputs;
  for (size_t j = 0; j < m.outputs_size(); ++j) outputs.push_back(**m.get_output(j));
  return report(outputs, out_prefix);
#endif
}
