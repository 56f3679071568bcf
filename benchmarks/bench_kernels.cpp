// Times the portable compute routines on MobileNetV2's convolutions and a 512^3 GEMM.
// Prints one line per case: "<name> <milliseconds> <GFLOP/s>" (bench_kernels.py compares with torch).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "kernels/portable/cpu/conv.h"
#include "kernels/portable/cpu/gemm.h"

namespace cpu = executorch::kernels::cpu;

namespace {

// Best of several timed rounds, each at least ~50 ms, in milliseconds per call.
template <typename F>
double time_ms(F f) {
  f();
  double best = 1e30;
  for (int round = 0; round < 5; ++round) {
    int calls = 0;
    const auto start = std::chrono::steady_clock::now();
    double elapsed = 0;
    do {
      f();
      ++calls;
      elapsed = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    } while (elapsed < 50);
    best = std::min(best, elapsed / calls);
  }
  return best;
}

std::vector<float> filled(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 7919) % 1000) / 1000.f - 0.5f;
  return v;
}

double bench_conv(const char* name, const cpu::Conv2dShape& s) {
  auto in = filled(s.batch * s.in_channels * s.in_h * s.in_w);
  auto w = filled(s.out_channels * (s.in_channels / s.groups) * s.kernel_h * s.kernel_w);
  auto bias = filled(s.out_channels);
  std::vector<float> out(s.batch * s.out_channels * s.out_h() * s.out_w());
  std::vector<float> ws(cpu::conv2d_workspace_floats(s));
  const double ms = time_ms([&] { cpu::conv2d(s, in.data(), w.data(), bias.data(), out.data(), ws.data()); });
  const double flops = 2.0 * s.batch * s.out_channels * s.out_h() * s.out_w() * (s.in_channels / s.groups) *
                       s.kernel_h * s.kernel_w;
  std::printf("%s %.4f %.2f\n", name, ms, flops / ms / 1e6);
  return ms;
}

cpu::Conv2dShape conv(int64_t c, int64_t hw, int64_t oc, int64_t k, int64_t stride, int64_t groups) {
  const int64_t pad = (k - 1) / 2;
  return {1, c, hw, hw, oc, k, k, stride, stride, pad, pad, 1, 1, groups};
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  {
    const int64_t n = 512;
    auto a = filled(n * n), b = filled(n * n);
    std::vector<float> c(n * n), ws(cpu::sgemm_workspace_floats(n, n, n));
    const double ms = time_ms([&] {
      cpu::sgemm(n, n, n, 1.f, {a.data(), n, 1}, {b.data(), n, 1}, 0.f, nullptr, c.data(), n, ws.data());
    });
    std::printf("gemm_512x512x512 %.4f %.2f\n", ms, 2.0 * n * n * n / ms / 1e6);
  }
  // MobileNetV2 at 224x224: stem, then per block (expand 1x1, depthwise 3x3, project 1x1), head.
  const int64_t table[][4] = {{1, 16, 1, 1}, {6, 24, 2, 2}, {6, 32, 3, 2}, {6, 64, 4, 2},
                              {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  double total = bench_conv("mv2_stem_3x3s2_3to32_224", conv(3, 224, 32, 3, 2, 1));
  int64_t c = 32, hw = 112;
  char name[96];
  for (const auto& row : table) {
    for (int64_t r = 0; r < row[2]; ++r) {
      const int64_t stride = r == 0 ? row[3] : 1, hidden = c * row[0];
      if (row[0] != 1) {
        std::snprintf(name, sizeof(name), "mv2_pw_%ldto%ld_%ld", long(c), long(hidden), long(hw));
        total += bench_conv(name, conv(c, hw, hidden, 1, 1, 1));
      }
      std::snprintf(name, sizeof(name), "mv2_dw3x3s%ld_%ld_%ld", long(stride), long(hidden), long(hw));
      total += bench_conv(name, conv(hidden, hw, hidden, 3, stride, hidden));
      hw = (hw + 2 - 3) / stride + 1;
      std::snprintf(name, sizeof(name), "mv2_pw_%ldto%ld_%ld", long(hidden), long(row[1]), long(hw));
      total += bench_conv(name, conv(hidden, hw, row[1], 1, 1, 1));
      c = row[1];
      if (quick) break;
    }
  }
  total += bench_conv("mv2_pw_320to1280_7", conv(320, 7, 1280, 1, 1, 1));
  std::printf("mv2_all_convolutions %.4f 0\n", total);
  return 0;
}
