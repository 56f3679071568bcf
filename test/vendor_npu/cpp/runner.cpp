// vendor_npu_runner: loads a .pte, feeds raw float32 inputs, writes raw float32 outputs.
//   vendor_npu_runner model.pte in0.bin [in1.bin ...] --out PREFIX   (writes PREFIX0.bin, ...)
#include <executorch/runtime/executor/hosted_method.h>
#include <executorch/runtime/executor/program.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace executorch::runtime;

static bool read_file(const char* path, std::vector<uint8_t>* out) {
  FILE* f = std::fopen(path, "rb");
  if (!f) return false;
  uint8_t buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out->insert(out->end(), buf, buf + n);
  std::fclose(f);
  return true;
}

int main(int argc, char** argv) {
  if (argc < 4 || std::strcmp(argv[argc - 2], "--out") != 0) {
    std::fprintf(stderr, "usage: %s model.pte in0.bin [in1.bin ...] --out PREFIX\n", argv[0]);
    return 2;
  }
  std::vector<uint8_t> pte;
  if (!read_file(argv[1], &pte)) return std::fprintf(stderr, "cannot read %s\n", argv[1]), 2;
  Result<Program> program = Program::load(pte.data(), pte.size());
  if (!program.ok()) return std::fprintf(stderr, "cannot load program: %s\n", error_name(program.error())), 1;
  auto hosted = HostedMethod::load(*program, "forward", HostedMethod::Limits());
  if (!hosted.ok()) return std::fprintf(stderr, "cannot load method: %s\n", error_name(hosted.error())), 1;
  Method& m = (*hosted)->method();
  std::vector<std::vector<uint8_t>> inputs(argc - 4);
  for (int i = 2; i < argc - 2; ++i) {
    std::vector<uint8_t>& data = inputs[i - 2];
    if (!read_file(argv[i], &data)) return std::fprintf(stderr, "cannot read %s\n", argv[i]), 2;
    const EValue* in = *m.get_input(i - 2);
    Tensor t = in->toTensor();
    std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end());
    Error e = m.set_input_tensor(i - 2, ScalarType::Float, Span<const int64_t>(sizes.data(), sizes.size()), data.data(),
                                 data.size());
    if (e != Error::Ok) return std::fprintf(stderr, "input %d: %s\n", i - 2, error_name(e)), 1;
  }
  Error e = m.execute();
  if (e != Error::Ok) return std::fprintf(stderr, "execute: %s\n", error_name(e)), 1;
  for (size_t j = 0; j < m.outputs_size(); ++j) {
    Tensor t = (*m.get_output(j))->toTensor();
    std::string path = std::string(argv[argc - 1]) + std::to_string(j) + ".bin";
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return 2;
    std::fwrite(t.const_data_ptr(), 1, t.nbytes(), f);
    std::fclose(f);
  }
  return 0;
}
