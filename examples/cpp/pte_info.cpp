// pte_info: load a .pte through one of the SDK's data loaders and print its methods.
//   pte_info model.pte [--loader file|mmap|buffer]
#include <executorch/extension/data_loader/buffer_data_loader.h>
#include <executorch/extension/data_loader/file_data_loader.h>
#include <executorch/extension/data_loader/mmap_data_loader.h>
#include <executorch/runtime/executor/program.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

using executorch::extension::BufferDataLoader;
using executorch::extension::FileDataLoader;
using executorch::extension::MmapDataLoader;
using executorch::runtime::Program;
using executorch::runtime::Result;

namespace {

int describe(Result<Program> program, const char* path) {
  if (!program.ok())
    return std::fprintf(stderr, "cannot load %s: %s\n", path, executorch::runtime::error_name(program.error())), 1;
  std::printf("methods: %zu\n", program->num_methods());
  for (size_t i = 0; i < program->num_methods(); ++i) {
    const char* name = *program->get_method_name(i);
    auto meta = program->method_meta(name);
    if (!meta.ok()) return std::fprintf(stderr, "method %s: no metadata\n", name), 1;
    std::printf("method %s: %zu inputs, %zu outputs\n", name, meta->num_inputs(), meta->num_outputs());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const char* usage = "usage: %s model.pte [--loader file|mmap|buffer]\n";
  if (argc != 2 && !(argc == 4 && std::strcmp(argv[2], "--loader") == 0))
    return std::fprintf(stderr, usage, argv[0]), 2;
  const char* path = argv[1];
  const std::string loader = argc == 4 ? argv[3] : "file";
  std::printf("loader: %s\n", loader.c_str());
  if (loader == "file") {
    auto file = FileDataLoader::from(path);
    if (!file.ok()) return std::fprintf(stderr, "cannot open %s\n", path), 1;
    return describe(Program::load(&file.get()), path);
  }
  if (loader == "mmap") {
    auto mapped = MmapDataLoader::from(path, MmapDataLoader::MlockConfig::NoMlock);
    if (!mapped.ok()) return std::fprintf(stderr, "cannot open %s\n", path), 1;
    return describe(Program::load(&mapped.get()), path);
  }
  if (loader == "buffer") {
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::fprintf(stderr, "cannot open %s\n", path), 1;
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    BufferDataLoader buffer(bytes.data(), bytes.size());
    return describe(Program::load(&buffer), path);
  }
  return std::fprintf(stderr, usage, argv[0]), 2;
}
