// Times the NHWC kernels (conv_nhwc.h) layer by layer over MobileNetV2 and ResNet-18 at 224x224,
// next to the NCHW conv2d() the portable operator runs today. Prints one line per layer,
// "<model> <layer> <nhwc ms> <nchw ms> <nhwc GFLOP/s> <qs8 ms>", then a total per model (QS8: the
// same layer in int8 with per-channel weights, on the best int8 ISA). Threads: the
// kernel pool's size (EXECUTORCH_NUM_THREADS). Convolutions only (plus the classifier): the
// elementwise adds and pooling of the models are left out of the totals. Then QD8 fully
// connected layers at LLM decode (m = 1) and prefill (m = 32) shapes: "qd8 <weights> <m>x<n>x<k>
// <ms> <weight GB/s>". --isa baseline|avx2|avx512 forces an ISA (default: the best).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <time.h>

#include "kernels/cpu/conv.h"
#include "kernels/cpu/conv_nhwc.h"
#include "kernels/cpu/quantized.h"
#include "kernels/cpu/threadpool.h"

namespace cpu = executorch::kernels::cpu;

namespace {

// --cpu-time: time with this thread's CPU clock instead of the wall clock. With one thread all
// work runs on the calling thread, so this leaves out the time other processes held the core
// (for figures taken on a shared, loaded machine; caches are still shared).
bool g_cpu_time = false;

double now_ms() {
  if (g_cpu_time) {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <typename F>
double time_ms(F f) {
  f();
  double best = 1e30;
  for (int round = 0; round < 5; ++round) {
    int calls = 0;
    const double start = now_ms();
    double elapsed = 0;
    do {
      f();
      ++calls;
      elapsed = now_ms() - start;
    } while (elapsed < 20);
    best = std::min(best, elapsed / calls);
  }
  return best;
}

std::vector<float> filled(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 7919) % 1000) / 1000.f - 0.5f;
  return v;
}

cpu::Isa g_float_isa = cpu::best_float_isa();
cpu::Isa g_int8_isa = cpu::best_int8_isa();

struct Layer {
  std::string name;
  int64_t hw, cin, cout, k, stride, groups;
};

struct Totals {
  double nhwc = 0, nchw = 0, flops = 0, qs8 = 0;
};

void bench_layer(const char* model, const Layer& l, Totals* t, bool with_nchw) {
  cpu::ConvNhwc c;
  c.kernel_h = c.kernel_w = l.k;
  c.stride_h = c.stride_w = l.stride;
  c.pad_top = c.pad_left = c.pad_bottom = c.pad_right = (l.k - 1) / 2;
  c.groups = l.groups;
  c.group_in_channels = l.cin / l.groups;
  c.group_out_channels = l.cout / l.groups;
  const int64_t oh = c.out_h(l.hw), ow = c.out_w(l.hw);
  auto in = filled(l.hw * l.hw * l.cin);
  auto w = filled(l.cout * l.k * l.k * c.group_in_channels);
  auto bias = filled(l.cout);
  std::vector<float> out(oh * ow * l.cout);
  const cpu::Isa isa = g_float_isa;
  std::vector<unsigned char> packed(cpu::conv2d_nhwc_f32_packed_bytes(c, isa) + 64);
  void* p = packed.data() + (64 - reinterpret_cast<uintptr_t>(packed.data()) % 64) % 64;
  cpu::conv2d_nhwc_f32_pack(c, cpu::ConvWeights::kOhwi, w.data(), bias.data(), isa, p);
  const double nhwc = time_ms([&] { cpu::conv2d_nhwc_f32(c, p, 1, l.hw, l.hw, in.data(), out.data(), 0.f, 6.f); });
  double nchw = 0;
  if (with_nchw) {
    const cpu::Conv2dShape s{1,        l.cin,    l.hw,          l.hw,          l.cout, l.k, l.k,
                             l.stride, l.stride, (l.k - 1) / 2, (l.k - 1) / 2, 1,      1,   l.groups};
    std::vector<float> ws(cpu::conv2d_workspace_floats(s));
    nchw = time_ms([&] { cpu::conv2d(s, in.data(), w.data(), bias.data(), out.data(), ws.data()); });
  }
  std::vector<int8_t> qin(in.size()), qw(w.size()), qout(out.size());
  for (size_t i = 0; i < qin.size(); ++i) qin[i] = static_cast<int8_t>(i * 31 % 255 - 127);
  for (size_t i = 0; i < qw.size(); ++i) qw[i] = static_cast<int8_t>(i * 17 % 255 - 127);
  std::vector<int32_t> qb(l.cout, 100);
  std::vector<float> ws(l.cout, 0.01f);
  cpu::Qs8ConvQuant q;
  q.in_scale = 0.02f;
  q.in_zero_point = 3;
  q.weight_scales = ws.data();
  q.out_scale = 0.05f;
  const cpu::Isa qisa = g_int8_isa;
  std::vector<unsigned char> qpacked(cpu::conv2d_nhwc_qs8_packed_bytes(c, qisa) + 64);
  void* qp = qpacked.data() + (64 - reinterpret_cast<uintptr_t>(qpacked.data()) % 64) % 64;
  cpu::conv2d_nhwc_qs8_pack(c, cpu::ConvWeights::kOhwi, qw.data(), qb.data(), q, qisa, qp);
  const double qs8 = time_ms([&] { cpu::conv2d_nhwc_qs8(c, qp, 1, l.hw, l.hw, qin.data(), qout.data(), -128, 127); });
  const double flops = 2.0 * oh * ow * l.cout * c.group_in_channels * l.k * l.k;
  std::printf("%s %s %.4f %.4f %.2f %.4f\n", model, l.name.c_str(), nhwc, nchw, flops / nhwc / 1e6, qs8);
  t->qs8 += qs8;
  t->nhwc += nhwc;
  t->nchw += nchw;
  t->flops += flops;
}

std::vector<Layer> mobilenet_v2() {
  std::vector<Layer> v = {{"stem", 224, 3, 32, 3, 2, 1}};
  const int64_t cfg[][4] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                            {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  int64_t hw = 112, cin = 32, b = 0;
  for (const auto& r : cfg) {
    for (int64_t i = 0; i < r[2]; ++i, ++b) {
      const int64_t hidden = cin * r[0], stride = i == 0 ? r[3] : 1;
      const std::string tag = "b" + std::to_string(b);
      if (r[0] != 1) v.push_back({tag + "_expand", hw, cin, hidden, 1, 1, 1});
      v.push_back({tag + "_dw", hw, hidden, hidden, 3, stride, hidden});
      hw = (hw + stride - 1) / stride;
      v.push_back({tag + "_project", hw, hidden, r[1], 1, 1, 1});
      cin = r[1];
    }
  }
  v.push_back({"head", 7, 320, 1280, 1, 1, 1});
  v.push_back({"classifier", 1, 1280, 1000, 1, 1, 1});
  return v;
}

std::vector<Layer> resnet18() {
  std::vector<Layer> v = {{"stem", 224, 3, 64, 7, 2, 1}};
  int64_t hw = 56, cin = 64;
  for (int64_t stage = 0; stage < 4; ++stage) {
    const int64_t c = 64 << stage;
    for (int64_t blk = 0; blk < 2; ++blk) {
      const int64_t stride = stage > 0 && blk == 0 ? 2 : 1;
      const std::string tag = "s" + std::to_string(stage) + "b" + std::to_string(blk);
      v.push_back({tag + "_conv1", hw, cin, c, 3, stride, 1});
      if (stride != 1) v.push_back({tag + "_down", hw, cin, c, 1, 2, 1});
      hw /= stride;
      v.push_back({tag + "_conv2", hw, c, c, 3, 1, 1});
      cin = c;
    }
  }
  v.push_back({"classifier", 1, 512, 1000, 1, 1, 1});
  return v;
}

void bench_qd8(int64_t m, int64_t n, int64_t k, int64_t group) {
  auto in = filled(m * k);
  std::vector<float> out(m * n), bias(n, 0.1f), scales(n * (k / group), 0.01f);
  std::vector<int8_t> w8(n * k);
  std::vector<uint8_t> w4(n * k / 2);
  for (size_t i = 0; i < w8.size(); ++i) w8[i] = static_cast<int8_t>(i * 13 % 255 - 127);
  for (size_t i = 0; i < w4.size(); ++i) w4[i] = static_cast<uint8_t>(i * 29);
  std::vector<unsigned char> packed(cpu::fully_connected_qd8_packed_bytes(n, k, group, g_int8_isa));
  const bool int4 = group != k;
  if (int4) {
    cpu::fully_connected_qd8_pack_qb4w(n, k, group, w4.data(), 8, scales.data(), false, bias.data(), g_int8_isa,
                                       packed.data());
  } else {
    cpu::fully_connected_qd8_pack_qc8w(n, k, w8.data(), scales.data(), bias.data(), g_int8_isa, packed.data());
  }
  std::vector<unsigned char> scratch(cpu::fully_connected_qd8_scratch_bytes(m, k));
  const double ms = time_ms(
      [&] { cpu::fully_connected_qd8(packed.data(), m, in.data(), k, out.data(), n, -1e30f, 1e30f, scratch.data()); });
  std::printf("qd8 %s %ldx%ldx%ld %.4f %.1f\n", int4 ? "qb4w-g32" : "qc8w", long(m), long(n), long(k), ms,
              double(packed.size()) / ms / 1e6);
}

}  // namespace

// Usage: bench_nhwc [--nhwc-only] [--cpu-time] [--isa baseline|avx2|avx512] [LAYER-SUBSTRING]
int main(int argc, char** argv) {
  bool with_nchw = true;
  const char* only = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--nhwc-only") == 0) {
      with_nchw = false;
    } else if (std::strcmp(argv[i], "--cpu-time") == 0) {
      g_cpu_time = true;
    } else if (std::strcmp(argv[i], "--isa") == 0 && i + 1 < argc) {
      ++i;
      const cpu::Isa want = std::strcmp(argv[i], "avx512") == 0 ? cpu::Isa::kAvx512
                            : std::strcmp(argv[i], "avx2") == 0 ? cpu::Isa::kAvx2
                                                                : cpu::Isa::kBaseline;
      if (!cpu::float_isa_supported(want) || !cpu::int8_isa_supported(want)) {
        std::fprintf(stderr, "bench_nhwc: this CPU lacks --isa %s\n", argv[i]);
        return 1;
      }
      g_float_isa = g_int8_isa = want;
    } else {
      only = argv[i];
    }
  }
  if (g_cpu_time && executorch::extension::threadpool::get_threadpool()->get_thread_count() != 1) {
    std::fprintf(stderr, "bench_nhwc: --cpu-time needs EXECUTORCH_NUM_THREADS=1\n");
    return 1;
  }
  std::printf(
      "# float isa %s, int8 isa %s, %zu threads%s; columns: model layer nhwc_ms nchw_ms "
      "nhwc_gflops qs8_ms\n",
      cpu::isa_name(g_float_isa), cpu::isa_name(g_int8_isa),
      executorch::extension::threadpool::get_threadpool()->get_thread_count(), g_cpu_time ? ", thread CPU time" : "");
  const std::pair<const char*, std::vector<Layer>> models[] = {{"mobilenet_v2", mobilenet_v2()},
                                                               {"resnet18", resnet18()}};
  for (const auto& m : models) {
    Totals t;
    for (const Layer& l : m.second)
      if (only == nullptr || (std::string(m.first) + " " + l.name).find(only) != std::string::npos)
        bench_layer(m.first, l, &t, with_nchw);
    if (t.flops > 0)
      std::printf("TOTAL %s fp32 nhwc %.3f ms (%.1f GFLOP/s), nchw %.3f ms, qs8 %.3f ms (%.2fx fp32 nhwc)\n", m.first,
                  t.nhwc, t.flops / t.nhwc / 1e6, t.nchw, t.qs8, t.nhwc / t.qs8);
  }
  if (only == nullptr || std::strstr("qd8", only) != nullptr) {
    for (int64_t m : {1, 32}) {
      bench_qd8(m, 4096, 4096, 4096);
      bench_qd8(m, 4096, 4096, 32);
      bench_qd8(m, 11008, 4096, 32);
    }
  }
  return 0;
}
