// Times the portable compute routines on MobileNetV2's and ResNet-50's convolutions, GEMMs at the
// shapes of ViT-small's and ResNet-50's layers (B row-major and transposed) and the
// transformer kernels (softmax, layer norm, GELU, fused attention) at ViT-small / encoder shapes.
// Prints one line per case: "<name> <milliseconds> <GFLOP/s>" (bench_kernels.py compares with torch).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/layer_norm.h"
#include "kernels/cpu/softmax.h"

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
  const double flops =
      2.0 * s.batch * s.out_channels * s.out_h() * s.out_w() * (s.in_channels / s.groups) * s.kernel_h * s.kernel_w;
  std::printf("%s %.4f %.2f\n", name, ms, flops / ms / 1e6);
  return ms;
}

cpu::Conv2dShape conv(int64_t c, int64_t hw, int64_t oc, int64_t k, int64_t stride, int64_t groups) {
  const int64_t pad = (k - 1) / 2;
  return {1, c, hw, hw, oc, k, k, stride, stride, pad, pad, 1, 1, groups};
}

// Transformer kernels; names carry the shape for bench_kernels.py, GFLOP/s column is 0.
void bench_transformer() {
  char name[96];
  // Attention scores of ViT-small (6 heads x 197 tokens) and of a 128-token encoder (8 heads).
  static const int64_t kScores[][2] = {{6 * 197, 197}, {8 * 128, 128}};
  static const int64_t kTokens[][2] = {{197, 384}, {128, 512}};
  for (const auto& s : kScores) {
    auto x = filled(s[0] * s[1]);
    std::vector<float> y(x.size());
    std::snprintf(name, sizeof(name), "softmax_%ldx%ld", long(s[0]), long(s[1]));
    std::printf("%s %.4f 0\n", name, time_ms([&] { cpu::softmax(x.data(), y.data(), s[0], s[1], 1, false); }));
    std::snprintf(name, sizeof(name), "log_softmax_%ldx%ld", long(s[0]), long(s[1]));
    std::printf("%s %.4f 0\n", name, time_ms([&] { cpu::softmax(x.data(), y.data(), s[0], s[1], 1, true); }));
  }
  // Fused attention [batch, heads, seq, head_dim]: the encoder's 8 x 128 x 64, and causal at 256.
  static const int64_t kAttention[][5] = {{1, 8, 128, 64, 0}, {1, 8, 256, 64, 1}};
  for (const auto& s : kAttention) {
    cpu::AttentionShape a{};
    a.batch = s[0], a.heads = a.kv_heads = s[1], a.q_len = a.kv_len = s[2], a.dim = s[3];
    const int64_t strides[3] = {s[1] * s[2] * s[3], s[2] * s[3], s[3]};
    for (int i = 0; i < 3; ++i) a.q_strides[i] = a.k_strides[i] = a.v_strides[i] = a.out_strides[i] = strides[i];
    a.scale = 0.125f, a.causal = s[4] != 0;
    auto q = filled(s[0] * strides[0]), k = filled(q.size()), v = filled(q.size());
    std::vector<float> out(q.size()), scratch(cpu::attention_scratch_floats(a));
    std::snprintf(name, sizeof(name), "%s_%ldx%ldx%ldx%ld", s[4] ? "attention_causal" : "attention", long(s[0]),
                  long(s[1]), long(s[2]), long(s[3]));
    const double ms = time_ms([&] { cpu::attention(a, q.data(), k.data(), v.data(), out.data(), scratch.data()); });
    std::printf("%s %.4f %.2f\n", name, ms, 4.0 * s[0] * s[1] * s[2] * s[2] * s[3] / (s[4] ? 2 : 1) / ms / 1e6);
  }
  // Token rows of ViT-small (197 x 384, MLP 1536) and of the encoder (128 x 512, MLP 2048).
  for (const auto& s : kTokens) {
    auto x = filled(s[0] * s[1]), w = filled(s[1]), b = filled(s[1]);
    std::vector<float> y(x.size());
    std::snprintf(name, sizeof(name), "layer_norm_%ldx%ld", long(s[0]), long(s[1]));
    std::printf("%s %.4f 0\n", name, time_ms([&] {
                  cpu::layer_norm(x.data(), y.data(), s[0], s[1], w.data(), b.data(), 1e-6, nullptr, nullptr);
                }));
    auto h = filled(s[0] * s[1] * 4);
    std::vector<float> g(h.size());
    std::snprintf(name, sizeof(name), "gelu_%ldx%ld", long(s[0]), long(s[1] * 4));
    std::printf("%s %.4f 0\n", name, time_ms([&] { cpu::gelu(h.data(), g.data(), h.size(), false); }));
    std::snprintf(name, sizeof(name), "gelu_tanh_%ldx%ld", long(s[0]), long(s[1] * 4));
    std::printf("%s %.4f 0\n", name, time_ms([&] { cpu::gelu(h.data(), g.data(), h.size(), true); }));
  }
}

// One GEMM C(m x n) = A(m x k) * B(k x n); `bt` stores B as its transpose (n x k, row-major), the
// layout nn.Linear's weight reaches mm/addmm in.
void bench_gemm(int64_t m, int64_t n, int64_t k, bool bt) {
  auto a = filled(m * k), b = filled(k * n);
  std::vector<float> c(m * n), ws(cpu::sgemm_workspace_floats(m, n, k));
  const cpu::ConstMatrix bm = bt ? cpu::ConstMatrix{b.data(), 1, k} : cpu::ConstMatrix{b.data(), n, 1};
  const double ms =
      time_ms([&] { cpu::sgemm(m, n, k, 1.f, {a.data(), k, 1}, bm, 0.f, nullptr, c.data(), n, ws.data()); });
  std::printf("%s_%ldx%ldx%ld %.4f %.2f\n", bt ? "gemmbt" : "gemm", long(m), long(n), long(k), ms,
              2.0 * m * n * k / ms / 1e6);
}

// ViT-small's linear layers (197 tokens: qkv, proj, fc1, fc2) and an encoder's (128 tokens), with
// the weight transposed as nn.Linear stores it, and ResNet-50's convolutions as GEMMs
// (out_channels x pixels x in_channels * kh * kw) on a row-major B.
// `linear_only` times just the transposed-weight products (for profiling their packing).
void bench_gemms(bool linear_only) {
  static const int64_t kLinear[][3] = {{197, 1152, 384}, {197, 384, 384},  {197, 1536, 384}, {197, 384, 1536},
                                       {128, 512, 512},  {128, 2048, 512}, {128, 512, 2048}};
  for (const auto& s : kLinear) {
    bench_gemm(s[0], s[1], s[2], true);
    if (!linear_only) bench_gemm(s[0], s[1], s[2], false);
  }
  if (linear_only) return;
  static const int64_t kConvGemm[][3] = {{64, 12544, 147}, {64, 3136, 64},   {64, 3136, 576},  {256, 3136, 64},
                                         {64, 3136, 256},  {128, 784, 1152}, {512, 784, 128},  {128, 784, 512},
                                         {256, 196, 2304}, {1024, 196, 256}, {256, 196, 1024}, {512, 49, 4608},
                                         {2048, 49, 512},  {512, 49, 2048}};
  for (const auto& s : kConvGemm) bench_gemm(s[0], s[1], s[2], false);
}

// ResNet-50 (torchvision, stride in the 3x3) at 224x224: each distinct convolution once, and the
// total weighted by how often the network runs it.
void bench_resnet50() {
  struct Case {
    int64_t c, hw, oc, k, stride, count;
  };
  static const Case kCases[] = {
      {3, 224, 64, 7, 2, 1},     {64, 56, 64, 1, 1, 1},    {64, 56, 64, 3, 1, 3},    {64, 56, 256, 1, 1, 4},
      {256, 56, 64, 1, 1, 2},    {256, 56, 128, 1, 1, 1},  {128, 56, 128, 3, 2, 1},  {128, 28, 512, 1, 1, 4},
      {256, 56, 512, 1, 2, 1},   {512, 28, 128, 1, 1, 3},  {128, 28, 128, 3, 1, 3},  {512, 28, 256, 1, 1, 1},
      {256, 28, 256, 3, 2, 1},   {256, 14, 1024, 1, 1, 6}, {512, 28, 1024, 1, 2, 1}, {1024, 14, 256, 1, 1, 5},
      {256, 14, 256, 3, 1, 5},   {1024, 14, 512, 1, 1, 1}, {512, 14, 512, 3, 2, 1},  {512, 7, 2048, 1, 1, 3},
      {1024, 14, 2048, 1, 2, 1}, {2048, 7, 512, 1, 1, 2},  {512, 7, 512, 3, 1, 2}};
  double total = 0;
  char name[96];
  for (const auto& c : kCases) {
    std::snprintf(name, sizeof(name), "r50_%ldto%ld_k%lds%ld_%ld_x%ld", long(c.c), long(c.oc), long(c.k),
                  long(c.stride), long(c.hw), long(c.count));
    total += c.count * bench_conv(name, conv(c.c, c.hw, c.oc, c.k, c.stride, 1));
  }
  std::printf("r50_all_convolutions %.4f 0\n", total);
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  if (argc > 1 && std::strcmp(argv[1], "--resnet50") == 0) {
    bench_resnet50();
    return 0;
  }
  if (argc > 1 && (std::strcmp(argv[1], "--gemm") == 0 || std::strcmp(argv[1], "--linear") == 0)) {
    bench_gemms(std::strcmp(argv[1], "--linear") == 0);
    return 0;
  }
  bench_transformer();
  {
    const int64_t n = 512;
    auto a = filled(n * n), b = filled(n * n);
    std::vector<float> c(n * n), ws(cpu::sgemm_workspace_floats(n, n, n));
    const double ms = time_ms(
        [&] { cpu::sgemm(n, n, n, 1.f, {a.data(), n, 1}, {b.data(), n, 1}, 0.f, nullptr, c.data(), n, ws.data()); });
    std::printf("gemm_512x512x512 %.4f %.2f\n", ms, 2.0 * n * n * n / ms / 1e6);
  }
  // MobileNetV2 at 224x224: stem, then per block (expand 1x1, depthwise 3x3, project 1x1), head.
  const int64_t table[][4] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
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
