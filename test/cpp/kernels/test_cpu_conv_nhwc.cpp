// NHWC float convolution, depthwise and fully connected against double-precision loops, on every
// ISA level this CPU has, with the thread count changed between runs (results must not move).
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/conv_nhwc.h"
#include "kernels/cpu/threadpool.h"
#include "test/cpp/kernels/check.h"

namespace cpu = executorch::kernels::cpu;
using cpu::ConvNhwc;
using cpu::ConvWeights;
using cpu::Isa;
using executorch::extension::threadpool::get_threadpool;

namespace {

constexpr Isa kIsas[] = {Isa::kBaseline, Isa::kAvx2, Isa::kAvx512};

// Reference over OHWI weights, clamped like the kernel.
std::vector<float> naive_conv(const ConvNhwc& c, int64_t batch, int64_t h, int64_t w, const std::vector<float>& in,
                              const std::vector<float>& wt, const float* bias, float lo, float hi) {
  const int64_t oh = c.out_h(h), ow = c.out_w(w), cg = c.group_in_channels, ocg = c.group_out_channels,
                cin = c.in_channels(), cout = c.out_channels();
  std::vector<float> out(batch * oh * ow * cout);
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t x = 0; x < ow; ++x)
        for (int64_t oc = 0; oc < cout; ++oc) {
          double acc = bias ? bias[oc] : 0.0;
          const int64_t g = oc / ocg;
          for (int64_t kh = 0; kh < c.kernel_h; ++kh)
            for (int64_t kw = 0; kw < c.kernel_w; ++kw) {
              const int64_t ih = y * c.stride_h - c.pad_top + kh * c.dilation_h;
              const int64_t iw = x * c.stride_w - c.pad_left + kw * c.dilation_w;
              if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
              for (int64_t i = 0; i < cg; ++i)
                acc += double(in[((n * h + ih) * w + iw) * cin + g * cg + i]) *
                       wt[((oc * c.kernel_h + kh) * c.kernel_w + kw) * cg + i];
            }
          out[((n * oh + y) * ow + x) * cout + oc] = static_cast<float>(std::fmin(std::fmax(acc, lo), hi));
        }
  return out;
}

struct Case {
  int64_t batch, h, w;
  ConvNhwc c;
};

ConvNhwc geometry(int64_t k, int64_t stride, int64_t pad, int64_t dil, int64_t groups, int64_t cg, int64_t ocg) {
  ConvNhwc c;
  c.kernel_h = c.kernel_w = k;
  c.stride_h = c.stride_w = stride;
  c.dilation_h = c.dilation_w = dil;
  c.pad_top = c.pad_left = c.pad_bottom = c.pad_right = pad;
  c.groups = groups;
  c.group_in_channels = cg;
  c.group_out_channels = ocg;
  return c;
}

std::vector<Case> cases() {
  std::vector<Case> v = {
      {1, 9, 11, geometry(3, 1, 1, 1, 1, 3, 5)},  // odd everything
      {2, 17, 15, geometry(3, 2, 1, 1, 1, 3, 32)},  // MobileNet stem
      {1, 7, 9, geometry(1, 1, 0, 1, 1, 16, 24)},  // pointwise
      {1, 5, 6, geometry(1, 1, 0, 1, 1, 67, 45)},  // pointwise, ragged tiles
      {2, 6, 5, geometry(1, 2, 0, 1, 1, 8, 12)},  // strided 1x1
      {1, 13, 12, geometry(3, 1, 1, 1, 19, 1, 1)},  // depthwise s1, channel tail
      {1, 13, 12, geometry(3, 2, 1, 1, 40, 1, 1)},  // depthwise s2
      {2, 7, 7, geometry(3, 1, 1, 1, 96, 1, 1)},  // depthwise small plane
      {1, 4, 3, geometry(3, 1, 1, 1, 5, 1, 1)},  // image smaller than filter
      {1, 11, 10, geometry(5, 2, 2, 1, 33, 1, 1)},  // depthwise 5x5
      {1, 12, 9, geometry(3, 1, 2, 2, 7, 1, 1)},  // depthwise dilated
      {1, 9, 9, geometry(3, 1, 1, 1, 4, 1, 2)},  // channel multiplier 2 (GEMM path)
      {1, 10, 10, geometry(5, 1, 2, 1, 1, 4, 6)},  // 5x5
      {1, 12, 11, geometry(3, 1, 2, 2, 1, 3, 4)},  // dilation
      {2, 10, 8, geometry(3, 1, 1, 1, 3, 2, 3)},  // grouped
      {1, 19, 19, geometry(7, 2, 3, 1, 1, 3, 64)},  // ResNet stem (49 taps: chunked)
      {1, 6, 6, geometry(3, 3, 0, 1, 1, 3, 4)},  // stride 3
      {1, 7, 7, geometry(3, 1, 1, 1, 1, 37, 70)},
      {1, 8, 9, geometry(3, 1, 1, 1, 1, 1, 5)},  // one input channel: merged rows, both layouts
      {2, 7, 7, geometry(1, 1, 0, 1, 1, 33, 40)},  // pointwise on 7x7 maps: balanced row tiles
      {1, 7, 7, geometry(3, 1, 1, 1, 1, 20, 150)},  // 3x3 over 49 pixels, 5 column blocks
      {1, 1, 1, geometry(1, 1, 0, 1, 1, 40, 170)},  // one pixel: one-row tile over many blocks
      {1, 13, 13, geometry(7, 1, 0, 2, 1, 3, 100)},  // one pixel, 49 taps in two chunks
  };
  // Dense 3x3 at stride 1 with 16+ channels each way: Winograd F(2x2, 3x3) tiles. Odd sizes
  // (tiles cut by the image edge), no padding, uneven padding, input channels over several
  // passes of 64 with a tail, output columns over several spans with a tail, a batch whose
  // tiles groups straddle two images, and the largest channel product that takes this path.
  v.push_back({2, 9, 11, geometry(3, 1, 1, 1, 1, 16, 16)});
  v.push_back({1, 10, 7, geometry(3, 1, 0, 1, 1, 150, 100)});
  v.push_back({3, 5, 5, geometry(3, 1, 1, 1, 1, 65, 33)});
  v.push_back({1, 6, 6, geometry(3, 1, 1, 1, 1, 256, 256)});
  Case wino_pad{1, 8, 9, geometry(3, 1, 0, 1, 1, 24, 40)};
  wino_pad.c.pad_top = 2;
  wino_pad.c.pad_right = 1;
  v.push_back(wino_pad);
  Case asym{1, 9, 8, geometry(3, 2, 0, 1, 1, 5, 17)};
  asym.c.pad_top = 1;
  asym.c.pad_right = 2;  // TF-style "same" padding: more on one side
  v.push_back(asym);
  Case rect{1, 8, 13, geometry(1, 1, 0, 1, 1, 6, 9)};
  rect.c.kernel_w = 3;
  rect.c.pad_left = rect.c.pad_right = 1;
  rect.c.stride_w = 2;
  v.push_back(rect);
  return v;
}

bool run_conv(const ConvNhwc& c, Isa isa, ConvWeights layout, const std::vector<float>& wt, const float* bias,
              int64_t batch, int64_t h, int64_t w, const std::vector<float>& in, std::vector<float>* out, float lo,
              float hi) {
  std::vector<unsigned char> packed(cpu::conv2d_nhwc_f32_packed_bytes(c, isa));
  if (!cpu::conv2d_nhwc_f32_pack(c, layout, wt.data(), bias, isa, packed.data())) return false;
  out->assign(batch * c.out_h(h) * c.out_w(w) * c.out_channels(), std::nanf(""));
  return cpu::conv2d_nhwc_f32(c, packed.data(), batch, h, w, in.data(), out->data(), lo, hi);
}

// OHWI [C*m, KH, KW, 1] weights rewritten as HWO [KH, KW, C*m].
std::vector<float> to_hwo(const ConvNhwc& c, const std::vector<float>& ohwi) {
  const int64_t ks = c.kernel_h * c.kernel_w, oc = c.out_channels();
  std::vector<float> hwo(ohwi.size());
  for (int64_t o = 0; o < oc; ++o)
    for (int64_t t = 0; t < ks; ++t) hwo[t * oc + o] = ohwi[o * ks + t];
  return hwo;
}

}  // namespace

KTEST(conv_nhwc_f32_matches_reference_on_every_isa) {
  unsigned seed = 100;
  for (const Case& k : cases()) {
    const ConvNhwc& c = k.c;
    CHECK(c.valid());
    auto in = ktest::random_floats(k.batch * k.h * k.w * c.in_channels(), ++seed);
    auto wt = ktest::random_floats(c.out_channels() * c.kernel_h * c.kernel_w * c.group_in_channels, ++seed);
    auto bias = ktest::random_floats(c.out_channels(), ++seed);
    const double tol = 1e-6 + 5e-8 * c.group_in_channels * c.kernel_h * c.kernel_w;
    for (int clamp = 0; clamp < 2; ++clamp) {
      const float lo = clamp ? -0.25f : -std::numeric_limits<float>::infinity();
      const float hi = clamp ? 0.5f : std::numeric_limits<float>::infinity();
      const float* b = clamp ? nullptr : bias.data();
      auto expected = naive_conv(c, k.batch, k.h, k.w, in, wt, b, lo, hi);
      for (Isa isa : kIsas) {
        if (!cpu::float_isa_supported(isa)) continue;
        std::vector<float> out;
        CHECK(run_conv(c, isa, ConvWeights::kOhwi, wt, b, k.batch, k.h, k.w, in, &out, lo, hi));
        CHECK_CLOSE(out.data(), expected.data(), out.size(), tol);
        if (c.group_in_channels == 1) {
          CHECK(run_conv(c, isa, ConvWeights::kHwo, to_hwo(c, wt), b, k.batch, k.h, k.w, in, &out, lo, hi));
          CHECK_CLOSE(out.data(), expected.data(), out.size(), tol);
        }
      }
    }
  }
}

KTEST(conv_nhwc_f32_is_bit_identical_for_any_thread_count) {
  const uint32_t before = static_cast<uint32_t>(get_threadpool()->get_thread_count());
  struct Big {
    int64_t batch, h, w;
    ConvNhwc c;
  };
  const Big bigs[] = {{1, 28, 28, geometry(1, 1, 0, 1, 1, 32, 96)},
                      {1, 30, 30, geometry(3, 1, 1, 1, 1, 16, 40)},
                      {1, 56, 56, geometry(3, 2, 1, 1, 144, 1, 1)},
                      {1, 20, 20, geometry(7, 1, 3, 1, 1, 8, 8)},
                      // Small maps: depthwise split over channel blocks too, with a tail block;
                      // the GEMM numbered column-block major (more columns than rows).
                      {1, 7, 7, geometry(3, 1, 1, 1, 200, 1, 1)},
                      {1, 14, 14, geometry(3, 2, 1, 1, 75, 1, 1)},
                      {1, 7, 7, geometry(1, 1, 0, 1, 1, 64, 330)},
                      // Winograd: 16 x 4 tasks over two images, three passes of channels.
                      {2, 17, 13, geometry(3, 1, 1, 1, 1, 130, 200)}};
  for (const Big& k : bigs) {
    auto in = ktest::random_floats(k.batch * k.h * k.w * k.c.in_channels(), 7);
    auto wt = ktest::random_floats(k.c.out_channels() * k.c.kernel_h * k.c.kernel_w * k.c.group_in_channels, 8);
    auto bias = ktest::random_floats(k.c.out_channels(), 9);
    for (Isa isa : kIsas) {
      if (!cpu::float_isa_supported(isa)) continue;
      std::vector<float> first;
      for (uint32_t t : {1u, 2u, 3u}) {
        CHECK(get_threadpool()->_unsafe_reset_threadpool(t));
        std::vector<float> out;
        CHECK(run_conv(k.c, isa, ConvWeights::kOhwi, wt, bias.data(), k.batch, k.h, k.w, in, &out, -1e30f, 1e30f));
        if (first.empty()) first = out;
        CHECK(std::memcmp(out.data(), first.data(), out.size() * sizeof(float)) == 0);
      }
    }
  }
  get_threadpool()->_unsafe_reset_threadpool(before);
}

KTEST(conv_nhwc_f32_refuses_mismatched_or_invalid_geometry) {
  ConvNhwc c = geometry(3, 1, 1, 1, 1, 4, 4);
  std::vector<float> wt(4 * 9 * 4, 0.5f);
  std::vector<unsigned char> packed(cpu::conv2d_nhwc_f32_packed_bytes(c, Isa::kBaseline));
  CHECK(cpu::conv2d_nhwc_f32_pack(c, ConvWeights::kOhwi, wt.data(), nullptr, Isa::kBaseline, packed.data()));
  std::vector<float> in(5 * 5 * 4, 1.f), out(5 * 5 * 4);
  ConvNhwc other = c;
  other.group_in_channels = 2;
  other.groups = 2;
  CHECK(!cpu::conv2d_nhwc_f32(other, packed.data(), 1, 5, 5, in.data(), out.data(), -1, 1));
  CHECK(!cpu::conv2d_nhwc_f32(c, packed.data(), 1, 0, 5, in.data(), out.data(), -1, 1));
  ConvNhwc bad = c;
  bad.stride_h = 0;
  CHECK(!bad.valid());
  ConvNhwc huge = geometry(4096, 1, 0, 1, 1, 4096, 4096);  // each field fine, products not
  CHECK(!huge.valid());
  CHECK(cpu::conv2d_nhwc_f32_packed_bytes(huge, Isa::kBaseline) == 0);
  CHECK(cpu::conv2d_nhwc_f32_packed_bytes(bad, Isa::kBaseline) == 0);
  // depthwise-only layout for a non-depthwise conv is refused
  CHECK(!cpu::conv2d_nhwc_f32_pack(c, ConvWeights::kHwo, wt.data(), nullptr, Isa::kBaseline, packed.data()));
  CHECK(cpu::conv2d_nhwc_f32(c, packed.data(), 1, 5, 5, in.data(), out.data(), -1, 1));
  CHECK(std::fabs(out[0] - 1.f) < 1e-6);  // clamped: 0.5 * 4 channels * 4 taps = 8 -> 1
}

// A one-row tile (its own kernel on AVX-512) sums each output exactly as a row of a taller tile.
KTEST(fully_connected_f32_one_row_is_bit_identical_to_a_row_of_a_tile) {
  for (const int64_t n : {1, 16, 17, 32, 100, 129, 1000}) {
    const int64_t k = 75;
    auto w = ktest::random_floats(n * k, 41);
    auto bias = ktest::random_floats(n, 42);
    auto row = ktest::random_floats(k, 43);
    std::vector<float> two(row);
    two.insert(two.end(), row.begin(), row.end());
    for (Isa isa : kIsas) {
      if (!cpu::float_isa_supported(isa)) continue;
#if !defined(__x86_64__) && !defined(__i386__)
      // The portable C++ kernel leaves multiply-add contraction to the compiler, which on other
      // CPUs (aarch64 GCC) fuses differently per tile height; the x86 kernels are written out.
      if (isa == Isa::kBaseline) continue;
#endif
      std::vector<unsigned char> packed(cpu::fully_connected_f32_packed_bytes(n, k, isa));
      CHECK(cpu::fully_connected_f32_pack(n, k, w.data(), false, bias.data(), isa, packed.data()));
      std::vector<float> one_out(n, std::nanf("")), two_out(2 * n, std::nanf(""));
      CHECK(cpu::fully_connected_f32(packed.data(), 1, row.data(), k, one_out.data(), n, -0.5f, 0.75f));
      CHECK(cpu::fully_connected_f32(packed.data(), 2, two.data(), k, two_out.data(), n, -0.5f, 0.75f));
      CHECK(std::memcmp(one_out.data(), two_out.data(), n * sizeof(float)) == 0);
      CHECK(std::memcmp(one_out.data(), two_out.data() + n, n * sizeof(float)) == 0);
    }
  }
}

KTEST(fully_connected_f32_matches_reference_on_every_isa) {
  struct Shape {
    int64_t m, n, k;
  };
  const Shape shapes[] = {{1, 1, 1},   {1, 1000, 300}, {3, 17, 9},    {8, 32, 64},
                          {9, 33, 17}, {50, 70, 130},  {1, 4096, 64}, {5, 7, 1}};
  for (const Shape& s : shapes) {
    auto in = ktest::random_floats(s.m * (s.k + 3), 31);  // row stride k + 3
    auto w = ktest::random_floats(s.n * s.k, 32);
    auto bias = ktest::random_floats(s.n, 33);
    std::vector<float> wt(s.k * s.n);
    for (int64_t i = 0; i < s.n; ++i)
      for (int64_t p = 0; p < s.k; ++p) wt[p * s.n + i] = w[i * s.k + p];
    std::vector<float> expected(s.m * s.n);
    for (int64_t r = 0; r < s.m; ++r)
      for (int64_t i = 0; i < s.n; ++i) {
        double acc = bias[i];
        for (int64_t p = 0; p < s.k; ++p) acc += double(in[r * (s.k + 3) + p]) * w[i * s.k + p];
        expected[r * s.n + i] = static_cast<float>(std::fmax(acc, 0.0));
      }
    for (Isa isa : kIsas) {
      if (!cpu::float_isa_supported(isa)) continue;
      for (bool k_major : {false, true}) {
        std::vector<unsigned char> packed(cpu::fully_connected_f32_packed_bytes(s.n, s.k, isa));
        CHECK(cpu::fully_connected_f32_pack(s.n, s.k, k_major ? wt.data() : w.data(), k_major, bias.data(), isa,
                                            packed.data()));
        std::vector<float> out(s.m * s.n, std::nanf(""));
        CHECK(cpu::fully_connected_f32(packed.data(), s.m, in.data(), s.k + 3, out.data(), s.n, 0.f,
                                       std::numeric_limits<float>::infinity()));
        CHECK_CLOSE(out.data(), expected.data(), out.size(), 1e-6 + 5e-8 * s.k);
      }
    }
  }
}

KTEST(conv_nhwc_f32_dw_pw_gives_the_two_calls_bits) {
  const uint32_t before = static_cast<uint32_t>(get_threadpool()->get_thread_count());
  struct Fused {
    int64_t batch, h, w;
    ConvNhwc dw;
    int64_t cout;
    float dw_lo, dw_hi;
  };
  const float inf = std::numeric_limits<float>::infinity();
  Case asym{1, 17, 15, geometry(3, 2, 0, 1, 40, 1, 1)};
  asym.c.pad_bottom = asym.c.pad_right = 1;  // "same" padding at stride 2, all on one side
  const Fused cases[] = {
      {1, 28, 28, geometry(3, 1, 1, 1, 144, 1, 1), 24, 0.f, 6.f},  // MobileNetV2 block, relu6
      {1, 29, 27, geometry(3, 2, 1, 1, 96, 1, 1), 32, 0.f, 6.f},  // stride 2, odd sizes
      {2, 14, 14, geometry(3, 1, 1, 1, 45, 1, 1), 70, -inf, inf},  // channel and column tails
      {1, 16, 300, geometry(3, 1, 1, 1, 40, 1, 1), 9, -0.5f, 0.5f},  // a row over several runs
      {1, 16, 12, geometry(5, 1, 2, 1, 20, 1, 1), 33, -inf, inf},  // 5x5
      {asym.batch, asym.h, asym.w, asym.c, 17, 0.f, inf},
      {1, 7, 7, geometry(3, 1, 1, 1, 160, 1, 1), 40, 0.f, 6.f},  // 7 rows: two calls
      {1, 16, 4, geometry(3, 1, 1, 1, 8192, 1, 1), 3, -inf, inf},  // a pixel fills the buffer
  };
  for (const Fused& f : cases) {
    const int64_t ch = f.dw.out_channels(), oh = f.dw.out_h(f.h), ow = f.dw.out_w(f.w);
    ConvNhwc pw = geometry(1, 1, 0, 1, 1, ch, f.cout);
    auto in = ktest::random_floats(f.batch * f.h * f.w * ch, 11);
    auto wd = ktest::random_floats(ch * f.dw.kernel_h * f.dw.kernel_w, 12);
    auto bd = ktest::random_floats(ch, 13);
    auto wp = ktest::random_floats(f.cout * ch, 14);
    auto bp = ktest::random_floats(f.cout, 15);
    for (Isa isa : kIsas) {
      if (!cpu::float_isa_supported(isa)) continue;
      std::vector<unsigned char> pd(cpu::conv2d_nhwc_f32_packed_bytes(f.dw, isa));
      std::vector<unsigned char> pp(cpu::conv2d_nhwc_f32_packed_bytes(pw, isa));
      CHECK(cpu::conv2d_nhwc_f32_pack(f.dw, ConvWeights::kOhwi, wd.data(), bd.data(), isa, pd.data()));
      CHECK(cpu::conv2d_nhwc_f32_pack(pw, ConvWeights::kOhwi, wp.data(), bp.data(), isa, pp.data()));
      std::vector<float> mid(f.batch * oh * ow * ch), two(f.batch * oh * ow * f.cout);
      CHECK(cpu::conv2d_nhwc_f32(f.dw, pd.data(), f.batch, f.h, f.w, in.data(), mid.data(), f.dw_lo, f.dw_hi));
      CHECK(cpu::conv2d_nhwc_f32(pw, pp.data(), f.batch, oh, ow, mid.data(), two.data(), -1.f, 2.f));
      std::vector<float> first[2];  // per variant, at one thread
      for (uint32_t t : {1u, 2u, 3u}) {
        CHECK(get_threadpool()->_unsafe_reset_threadpool(t));
        // With a buffer for the depthwise output (used on maps of few rows), and without (always
        // one pass).
        for (bool with_mid : {true, false}) {
          std::vector<float> scratch(mid.size(), std::nanf("")), out(two.size(), std::nanf(""));
          CHECK(cpu::conv2d_nhwc_f32_dw_pw(f.dw, pd.data(), f.dw_lo, f.dw_hi, pw, pp.data(), f.batch, f.h, f.w,
                                           in.data(), with_mid ? scratch.data() : nullptr, out.data(), -1.f, 2.f));
          if (first[with_mid].empty()) first[with_mid] = out;
          CHECK(std::memcmp(out.data(), first[with_mid].data(), out.size() * sizeof(float)) == 0);
#if defined(__x86_64__) || defined(__i386__)
          CHECK(std::memcmp(out.data(), two.data(), out.size() * sizeof(float)) == 0);
#else
          // Where the compiler may fuse a multiply and an add (aarch64), whether it does can
          // depend on a tile's row count, which the pair and the two calls choose differently.
          CHECK_CLOSE(out.data(), two.data(), out.size(), 1e-5);
#endif
        }
      }
      // Mismatched pairs are refused, nothing written.
      std::vector<float> out(two.size(), 7.f), scratch(mid.size());
      ConvNhwc wrong = pw;
      wrong.group_in_channels = ch + 1;
      CHECK(!cpu::conv2d_nhwc_f32_dw_pw(f.dw, pd.data(), f.dw_lo, f.dw_hi, wrong, pp.data(), f.batch, f.h, f.w,
                                        in.data(), scratch.data(), out.data(), -1.f, 2.f));
      CHECK(!cpu::conv2d_nhwc_f32_dw_pw(f.dw, pp.data(), f.dw_lo, f.dw_hi, pw, pd.data(), f.batch, f.h, f.w, in.data(),
                                        scratch.data(), out.data(), -1.f, 2.f));
      CHECK(out[0] == 7.f && out.back() == 7.f);
    }
  }
  // More channels than the task buffer holds: refused, nothing written.
  const ConvNhwc dw = geometry(3, 1, 1, 1, cpu::kDwPwMaxChannels + 1, 1, 1);
  const ConvNhwc pw = geometry(1, 1, 0, 1, 1, dw.out_channels(), 2);
  std::vector<float> wd(dw.out_channels() * 9, 0.5f), wp(pw.out_channels() * dw.out_channels(), 0.25f);
  std::vector<unsigned char> pd(cpu::conv2d_nhwc_f32_packed_bytes(dw, Isa::kBaseline));
  std::vector<unsigned char> pp(cpu::conv2d_nhwc_f32_packed_bytes(pw, Isa::kBaseline));
  CHECK(cpu::conv2d_nhwc_f32_pack(dw, ConvWeights::kOhwi, wd.data(), nullptr, Isa::kBaseline, pd.data()));
  CHECK(cpu::conv2d_nhwc_f32_pack(pw, ConvWeights::kOhwi, wp.data(), nullptr, Isa::kBaseline, pp.data()));
  std::vector<float> in(16 * 2 * dw.in_channels(), 1.f), out(16 * 2 * 2, 7.f);
  CHECK(!cpu::conv2d_nhwc_f32_dw_pw(dw, pd.data(), -inf, inf, pw, pp.data(), 1, 16, 2, in.data(), nullptr, out.data(),
                                    -inf, inf));
  CHECK(out[0] == 7.f && out.back() == 7.f);
  get_threadpool()->_unsafe_reset_threadpool(before);
}
