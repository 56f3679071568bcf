// The docs' high-level C++ API: Module loads model.pte, from_blob wraps caller-owned arrays
// (no copy), forward runs the program. Prints the output's elements on one line.
#include <executorch/extension/module/module.h>
#include <executorch/extension/tensor/tensor.h>

#include <array>
#include <cstdio>

using namespace ::executorch::extension;

int main() {
  Module module("model.pte");

  std::array<float, 4> a{1, 2, 3, 4};
  std::array<float, 4> b{10, 20, 30, 40};
  auto x = from_blob(a.data(), {2, 2});
  auto y = from_blob(b.data(), {2, 2});

  const auto result = module.forward({x, y});
  if (!result.ok()) {
    std::printf("forward failed: 0x%x\n", static_cast<unsigned>(result.error()));
    return 1;
  }
  const auto out = result->at(0).toTensor();
  for (int i = 0; i < out.numel(); ++i) { std::printf("%g ", out.const_data_ptr<float>()[i]); }
  std::printf("\n");
  return 0;
}
