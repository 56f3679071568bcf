// QS8 convolution, depthwise, fully connected and add against integer reference loops with the
// documented requantization: every ISA level must return exactly the reference bytes, for any
// thread count.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/quantized.h"
#include "kernels/cpu/threadpool.h"
#include "test/cpp/kernels/check.h"

namespace cpu = executorch::kernels::cpu;
using cpu::ConvNhwc;
using cpu::ConvWeights;
using cpu::Isa;
using executorch::extension::threadpool::get_threadpool;

namespace {

constexpr Isa kIsas[] = {Isa::kBaseline, Isa::kAvx2, Isa::kAvx512};

std::vector<int8_t> random_i8(size_t n, unsigned seed, int lo = -128, int hi = 127) {
  std::vector<int8_t> v(n);
  for (auto& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<int8_t>(lo + static_cast<int>((seed >> 8) % unsigned(hi - lo + 1)));
  }
  return v;
}

std::vector<int32_t> random_i32(size_t n, unsigned seed, int span) {
  std::vector<int32_t> v(n);
  for (auto& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<int32_t>((seed >> 4) % unsigned(2 * span + 1)) - span;
  }
  return v;
}

int8_t requantize(int64_t acc, float scale, int zp, int lo, int hi) {
  float y = static_cast<float>(static_cast<int32_t>(acc)) * scale;
  y = std::fmin(std::fmax(y, float(lo - zp)), float(hi - zp));
  return static_cast<int8_t>(static_cast<int>(std::nearbyint(y)) + zp);
}

std::vector<int8_t> naive_conv(const ConvNhwc& c, int64_t batch, int64_t h, int64_t w, const std::vector<int8_t>& in,
                               const std::vector<int8_t>& wt, const int32_t* bias, const cpu::Qs8ConvQuant& q, int lo,
                               int hi) {
  const int64_t oh = c.out_h(h), ow = c.out_w(w), cg = c.group_in_channels, ocg = c.group_out_channels,
                cin = c.in_channels(), cout = c.out_channels();
  std::vector<int8_t> out(batch * oh * ow * cout);
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t x = 0; x < ow; ++x)
        for (int64_t oc = 0; oc < cout; ++oc) {
          int64_t acc = bias ? bias[oc] : 0;
          const int64_t g = oc / ocg;
          for (int64_t kh = 0; kh < c.kernel_h; ++kh)
            for (int64_t kw = 0; kw < c.kernel_w; ++kw) {
              const int64_t ih = y * c.stride_h - c.pad_top + kh * c.dilation_h;
              const int64_t iw = x * c.stride_w - c.pad_left + kw * c.dilation_w;
              if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
              for (int64_t i = 0; i < cg; ++i)
                acc += (int64_t(in[((n * h + ih) * w + iw) * cin + g * cg + i]) - q.in_zero_point) *
                       wt[((oc * c.kernel_h + kh) * c.kernel_w + kw) * cg + i];
            }
          const float scale = q.in_scale * q.weight_scales[oc] / q.out_scale;
          out[((n * oh + y) * ow + x) * cout + oc] = requantize(acc, scale, q.out_zero_point, lo, hi);
        }
  return out;
}

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

struct Case {
  int64_t batch, h, w;
  ConvNhwc c;
};

std::vector<Case> cases() {
  std::vector<Case> v = {
      {1, 9, 11, geometry(3, 1, 1, 1, 1, 3, 5)},  // stem-like, k tail on every ISA
      {2, 17, 15, geometry(3, 2, 1, 1, 1, 3, 32)},
      {1, 7, 9, geometry(1, 1, 0, 1, 1, 16, 24)},
      {1, 5, 6, geometry(1, 1, 0, 1, 1, 67, 45)},  // ragged k and n
      {1, 3, 3, geometry(1, 1, 0, 1, 1, 13, 33)},  // n just past one AVX-512 block
      {2, 6, 5, geometry(1, 2, 0, 1, 1, 8, 12)},
      {1, 13, 12, geometry(3, 1, 1, 1, 19, 1, 1)},  // depthwise
      {1, 13, 12, geometry(3, 2, 1, 1, 40, 1, 1)},
      {2, 7, 7, geometry(3, 1, 1, 1, 96, 1, 1)},
      {1, 4, 3, geometry(3, 1, 1, 1, 5, 1, 1)},
      {1, 11, 10, geometry(5, 2, 2, 1, 33, 1, 1)},
      {1, 12, 9, geometry(3, 1, 2, 2, 7, 1, 1)},
      {1, 9, 9, geometry(3, 1, 1, 1, 4, 1, 2)},  // multiplier 2: GEMM path
      {1, 10, 10, geometry(5, 1, 2, 1, 1, 4, 6)},
      {2, 10, 8, geometry(3, 1, 1, 1, 3, 2, 3)},  // grouped
      {1, 19, 19, geometry(7, 2, 3, 1, 1, 3, 64)},  // ResNet stem
      {1, 7, 7, geometry(3, 1, 1, 1, 1, 37, 70)},
      {1, 8, 9, geometry(3, 1, 1, 1, 1, 1, 5)},  // one input channel: merged rows, both layouts
  };
  Case asym{1, 9, 8, geometry(3, 2, 0, 1, 1, 5, 17)};
  asym.c.pad_top = 1;
  asym.c.pad_right = 2;
  v.push_back(asym);
  return v;
}

bool run_conv(const ConvNhwc& c, Isa isa, ConvWeights layout, const std::vector<int8_t>& wt, const int32_t* bias,
              const cpu::Qs8ConvQuant& q, int64_t batch, int64_t h, int64_t w, const std::vector<int8_t>& in,
              std::vector<int8_t>* out, int lo, int hi) {
  std::vector<unsigned char> packed(cpu::conv2d_nhwc_qs8_packed_bytes(c, isa));
  if (packed.empty() || !cpu::conv2d_nhwc_qs8_pack(c, layout, wt.data(), bias, q, isa, packed.data())) return false;
  out->assign(batch * c.out_h(h) * c.out_w(w) * c.out_channels(), 0x55);
  return cpu::conv2d_nhwc_qs8(c, packed.data(), batch, h, w, in.data(), out->data(), static_cast<int8_t>(lo),
                              static_cast<int8_t>(hi));
}

std::vector<int8_t> to_hwo(const ConvNhwc& c, const std::vector<int8_t>& ohwi) {
  const int64_t ks = c.kernel_h * c.kernel_w, oc = c.out_channels();
  std::vector<int8_t> hwo(ohwi.size());
  for (int64_t o = 0; o < oc; ++o)
    for (int64_t t = 0; t < ks; ++t) hwo[t * oc + o] = ohwi[o * ks + t];
  return hwo;
}

// Scales that put the outputs across the whole int8 range, so rounding and clamping both happen.
std::vector<float> weight_scales(int64_t n, int64_t reduction) {
  std::vector<float> s(n);
  for (int64_t i = 0; i < n; ++i) s[i] = (0.5f + 0.013f * float(i % 17)) / std::sqrt(float(reduction));
  return s;
}

}  // namespace

KTEST(qs8_conv_matches_reference_exactly_on_every_isa) {
  unsigned seed = 500;
  for (const Case& k : cases()) {
    const ConvNhwc& c = k.c;
    const int64_t red = c.group_in_channels * c.kernel_h * c.kernel_w;
    auto in = random_i8(k.batch * k.h * k.w * c.in_channels(), ++seed);
    auto wt = random_i8(c.out_channels() * red, ++seed, -127, 127);
    auto bias = random_i32(c.out_channels(), ++seed, 3000);
    auto ws = weight_scales(c.out_channels(), red);
    for (int variant = 0; variant < 3; ++variant) {
      cpu::Qs8ConvQuant q;
      q.in_scale = 0.02f;
      q.in_zero_point = variant == 0 ? 0 : variant == 1 ? -7 : 100;
      q.weight_scales = ws.data();
      q.out_scale = 0.05f;
      q.out_zero_point = variant == 2 ? -20 : 3;
      const int lo = variant == 1 ? -100 : -128, hi = variant == 1 ? 90 : 127;
      const int32_t* b = variant == 2 ? nullptr : bias.data();
      auto expected = naive_conv(c, k.batch, k.h, k.w, in, wt, b, q, lo, hi);
      for (Isa isa : kIsas) {
        if (!cpu::int8_isa_supported(isa)) continue;
        std::vector<int8_t> out;
        CHECK(run_conv(c, isa, ConvWeights::kOhwi, wt, b, q, k.batch, k.h, k.w, in, &out, lo, hi));
        CHECK(out == expected);
        if (out != expected) std::fprintf(stderr, "  isa %s variant %d\n", cpu::isa_name(isa), variant);
        if (c.group_in_channels == 1) {
          CHECK(run_conv(c, isa, ConvWeights::kHwo, to_hwo(c, wt), b, q, k.batch, k.h, k.w, in, &out, lo, hi));
          CHECK(out == expected);
        }
      }
    }
  }
}

KTEST(qs8_conv_is_bit_identical_for_any_thread_count) {
  const uint32_t before = static_cast<uint32_t>(get_threadpool()->get_thread_count());
  const Case bigs[] = {{1, 28, 28, geometry(1, 1, 0, 1, 1, 32, 96)},
                       {1, 30, 30, geometry(3, 1, 1, 1, 1, 16, 40)},
                       {1, 56, 56, geometry(3, 2, 1, 1, 144, 1, 1)},
                       {1, 7, 7, geometry(3, 1, 1, 1, 200, 1, 1)},  // depthwise, channel split
                       {1, 7, 7, geometry(1, 1, 0, 1, 1, 64, 330)}};  // column-block major
  for (const Case& k : bigs) {
    const int64_t red = k.c.group_in_channels * k.c.kernel_h * k.c.kernel_w;
    auto in = random_i8(k.batch * k.h * k.w * k.c.in_channels(), 1);
    auto wt = random_i8(k.c.out_channels() * red, 2, -127, 127);
    auto ws = weight_scales(k.c.out_channels(), red);
    cpu::Qs8ConvQuant q;
    q.in_zero_point = 5;
    q.weight_scales = ws.data();
    q.in_scale = 0.02f;
    q.out_scale = 0.05f;
    for (Isa isa : kIsas) {
      if (!cpu::int8_isa_supported(isa)) continue;
      std::vector<int8_t> first;
      for (uint32_t t : {1u, 2u, 3u}) {
        CHECK(get_threadpool()->_unsafe_reset_threadpool(t));
        std::vector<int8_t> out;
        CHECK(run_conv(k.c, isa, ConvWeights::kOhwi, wt, nullptr, q, k.batch, k.h, k.w, in, &out, -128, 127));
        if (first.empty()) first = out;
        CHECK(out == first);
      }
    }
  }
  get_threadpool()->_unsafe_reset_threadpool(before);
}

KTEST(qs8_fully_connected_matches_reference_exactly_on_every_isa) {
  struct Shape {
    int64_t m, n, k;
  };
  const Shape shapes[] = {{1, 1, 1}, {1, 1000, 300}, {3, 17, 9}, {8, 32, 64}, {9, 33, 17}, {50, 70, 130}, {5, 7, 3}};
  for (const Shape& s : shapes) {
    auto in = random_i8(s.m * (s.k + 3), 61);
    auto w = random_i8(s.n * s.k, 62, -127, 127);
    auto bias = random_i32(s.n, 63, 5000);
    auto ws = weight_scales(s.n, s.k);
    std::vector<int8_t> wt(s.k * s.n);
    for (int64_t i = 0; i < s.n; ++i)
      for (int64_t p = 0; p < s.k; ++p) wt[p * s.n + i] = w[i * s.k + p];
    cpu::Qs8ConvQuant q;
    q.in_scale = 0.03f;
    q.in_zero_point = -11;
    q.weight_scales = ws.data();
    q.out_scale = 0.04f;
    q.out_zero_point = 9;
    std::vector<int8_t> expected(s.m * s.n);
    for (int64_t r = 0; r < s.m; ++r)
      for (int64_t i = 0; i < s.n; ++i) {
        int64_t acc = bias[i];
        for (int64_t p = 0; p < s.k; ++p) acc += (int64_t(in[r * (s.k + 3) + p]) - q.in_zero_point) * w[i * s.k + p];
        expected[r * s.n + i] = requantize(acc, q.in_scale * ws[i] / q.out_scale, q.out_zero_point, -128, 127);
      }
    for (Isa isa : kIsas) {
      if (!cpu::int8_isa_supported(isa)) continue;
      for (bool k_major : {false, true}) {
        std::vector<unsigned char> packed(cpu::fully_connected_qs8_packed_bytes(s.n, s.k, isa));
        CHECK(cpu::fully_connected_qs8_pack(s.n, s.k, k_major ? wt.data() : w.data(), k_major, bias.data(), q, isa,
                                            packed.data()));
        std::vector<int8_t> out(s.m * s.n, 0x55);
        CHECK(cpu::fully_connected_qs8(packed.data(), s.m, in.data(), s.k + 3, out.data(), s.n, -128, 127));
        CHECK(out == expected);
      }
    }
  }
}

KTEST(qs8_add_matches_reference_exactly_on_every_isa) {
  const int64_t n = 1000 + 37;
  auto a = random_i8(n, 71), b = random_i8(n, 72);
  cpu::Qs8AddQuant q;
  q.a_scale = 0.05f;
  q.a_zero_point = -3;
  q.b_scale = 0.11f;
  q.b_zero_point = 20;
  q.out_scale = 0.09f;
  q.out_zero_point = -5;
  // The documented fixed-point form, and within one unit of the real-valued result.
  const float sa = q.a_scale / q.out_scale, sb = q.b_scale / q.out_scale;
  int exponent = 0;
  std::frexp(std::fmax(sa, sb), &exponent);
  const int shift = 21 - exponent;
  const int32_t am = int32_t(std::nearbyint(std::ldexp(double(sa), shift)));
  const int32_t bm = int32_t(std::nearbyint(std::ldexp(double(sb), shift)));
  CHECK(std::max(am, bm) >= (1 << 20) && std::max(am, bm) <= (1 << 21));
  std::vector<int8_t> expected(n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t acc = (int64_t(a[i]) - q.a_zero_point) * am + (int64_t(b[i]) - q.b_zero_point) * bm;
    const int64_t v = std::min<int64_t>(
        120, std::max<int64_t>(-120, ((acc + (int64_t(1) << (shift - 1))) >> shift) + q.out_zero_point));
    expected[i] = static_cast<int8_t>(v);
    const double real =
        ((a[i] - q.a_zero_point) * double(q.a_scale) + (b[i] - q.b_zero_point) * double(q.b_scale)) / q.out_scale +
        q.out_zero_point;
    CHECK(std::fabs(std::fmin(120.0, std::fmax(-120.0, real)) - v) <= 0.5 + 1e-3);
  }
  for (Isa isa : kIsas) {
    if (!cpu::int8_isa_supported(isa)) continue;
    std::vector<int8_t> out(n);
    CHECK(cpu::add_qs8(n, a.data(), b.data(), out.data(), q, -120, 120, isa));
    CHECK(out == expected);
  }
  q.out_scale = 0.f;
  std::vector<int8_t> out(n);
  CHECK(!cpu::add_qs8(n, a.data(), b.data(), out.data(), q, -128, 127, Isa::kBaseline));
}

namespace {

// Expected QD8 output from the documented formula, in double from exact integer group sums.
std::vector<float> qd8_reference(int64_t m, int64_t n, int64_t k, int64_t group, const std::vector<float>& in,
                                 const std::vector<int32_t>& w, const std::vector<float>& scales,
                                 const std::vector<float>& bias, float lo, float hi) {
  std::vector<float> out(m * n);
  std::vector<int8_t> q(k);
  for (int64_t r = 0; r < m; ++r) {
    float s;
    int32_t zp;
    cpu::quantize_row_qd8(in.data() + r * k, k, q.data(), &s, &zp);
    for (int64_t j = 0; j < n; ++j) {
      double y = 0;
      for (int64_t g = 0; g < k / group; ++g) {
        int64_t acc = 0;
        for (int64_t i = g * group; i < (g + 1) * group; ++i) acc += (int64_t(q[i]) - zp) * w[j * k + i];
        y += double(acc) * scales[j * (k / group) + g];
      }
      out[r * n + j] = static_cast<float>(std::fmin(hi, std::fmax(lo, y * s + bias[j])));
    }
  }
  return out;
}

}  // namespace

KTEST(qd8_row_quantization_round_trips_within_half_a_step) {
  auto x = ktest::random_floats(301, 81);
  x[7] = 3.f;  // a skewed range: the zero point moves off 0
  std::vector<int8_t> q(x.size());
  float s;
  int32_t zp;
  cpu::quantize_row_qd8(x.data(), x.size(), q.data(), &s, &zp);
  CHECK(s > 0.f && zp >= -128 && zp <= 127);
  for (size_t i = 0; i < x.size(); ++i) CHECK(std::fabs((q[i] - zp) * s - x[i]) <= 0.5f * s + 1e-6f);
  std::vector<float> zeros(9, 0.f);
  cpu::quantize_row_qd8(zeros.data(), 9, q.data(), &s, &zp);
  CHECK(s == 1.f && zp == 0 && q[0] == 0);
}

// quantize_row_qd8 runs vectorized where the CPU allows; it must give the documented formula's
// bytes, scale and zero point exactly (every ISA's QD8 kernels read the same rows).
KTEST(qd8_row_quantization_is_the_documented_formula_bit_for_bit) {
  for (int64_t k : {1, 2, 15, 16, 17, 31, 33, 64, 301, 768}) {
    for (int variant = 0; variant < 5; ++variant) {
      auto x = ktest::random_floats(k, 500 + k + variant);
      for (size_t i = 0; i < x.size(); ++i) {
        if (variant == 1) x[i] = std::fabs(x[i]) + 0.25f;  // all positive: lo stays 0
        if (variant == 2) x[i] = -std::fabs(x[i]) - 0.25f;  // all negative: hi stays 0
        if (variant == 3) x[i] = i % 3 == 0 ? -0.f : x[i] * 1000.f;
        if (variant == 4) x[i] = i % 2 ? -0.f : 0.f;  // signed zeros only: the zero row
      }
      float lo = 0.f, hi = 0.f;
      for (float v : x) {
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
      }
      std::vector<int8_t> want(k, 0), got(k, 99);
      float want_s = 1.f, got_s = 0.f;
      int32_t want_zp = 0, got_zp = 77;
      if (hi > lo) {
        const float inv = 255.f / (hi - lo);
        want_s = (hi - lo) / 255.f;
        want_zp = static_cast<int32_t>(std::min(127.f, std::max(-128.f, std::nearbyint(-128.f - lo * inv))));
        for (int64_t i = 0; i < k; ++i)
          want[i] = static_cast<int8_t>(
              std::min(127.f, std::max(-128.f, std::nearbyint(x[i] * inv) + static_cast<float>(want_zp))));
      }
      cpu::quantize_row_qd8(x.data(), k, got.data(), &got_s, &got_zp);
      CHECK(std::memcmp(&got_s, &want_s, 4) == 0 && got_zp == want_zp);
      CHECK(std::memcmp(got.data(), want.data(), k) == 0);
    }
  }
}

KTEST(qd8_fully_connected_matches_reference_on_every_isa) {
  struct Shape {
    int64_t m, n, k, group;  // group == k: per-channel weights (int8, or 4-bit with int4); else 4-bit groups
    bool int4 = false;
  };
  const Shape shapes[] = {{1, 1, 1, 1},          {1, 70, 300, 300},      {3, 33, 17, 17},   {9, 40, 64, 64},
                          {1, 96, 256, 32},      {5, 45, 256, 64},       {2, 17, 384, 128}, {1, 1000, 128, 32},
                          {3, 33, 64, 64, true}, {2, 17, 384, 384, true}};
  const uint32_t before = static_cast<uint32_t>(get_threadpool()->get_thread_count());
  for (const Shape& s : shapes) {
    auto in = ktest::random_floats(s.m * s.k, 91);
    for (size_t i = 0; i < in.size(); i += 5) in[i] *= 4.f;
    auto bias = ktest::random_floats(s.n, 92);
    const bool int4 = s.int4 || s.group != s.k;
    const int64_t groups = s.k / s.group;
    std::vector<float> scales(s.n * groups);
    std::vector<uint16_t> scales_bf16(scales.size());
    for (size_t i = 0; i < scales.size(); ++i) {
      // bfloat16-exact values, so both scale formats describe the same weights
      scales[i] = (0.5f + 0.0625f * float(i % 13)) / (int4 ? 8.f : 128.f);
      uint32_t bits;
      std::memcpy(&bits, &scales[i], 4);
      scales_bf16[i] = static_cast<uint16_t>(bits >> 16);
    }
    std::vector<int32_t> w(s.n * s.k);
    std::vector<int8_t> w8(w.size());
    std::vector<uint8_t> nib8(w.size() / 2 + 1), nib0(w.size() / 2 + 1);
    auto raw = random_i8(w.size(), 93, int4 ? -8 : -127, int4 ? 7 : 127);
    for (size_t i = 0; i < w.size(); ++i) {
      w[i] = raw[i];
      w8[i] = raw[i];
      const uint8_t u8 = static_cast<uint8_t>(raw[i] + 8), u0 = static_cast<uint8_t>(raw[i] & 0xf);
      nib8[i / 2] |= i % 2 ? uint8_t(u8 << 4) : u8;
      nib0[i / 2] |= i % 2 ? uint8_t(u0 << 4) : u0;
    }
    const float lo = -2.f, hi = 2.5f;
    auto expected = qd8_reference(s.m, s.n, s.k, s.group, in, w, scales, bias, lo, hi);
    for (Isa isa : kIsas) {
      if (!cpu::int8_isa_supported(isa)) continue;
      for (int variant = 0; variant < (int4 ? 3 : 1); ++variant) {
        std::vector<unsigned char> packed(cpu::fully_connected_qd8_packed_bytes(s.n, s.k, s.group, isa));
        CHECK(!packed.empty());
        const bool ok = int4 ? cpu::fully_connected_qd8_pack_qb4w(
                                   s.n, s.k, s.group, variant == 1 ? nib0.data() : nib8.data(), variant == 1 ? 0 : 8,
                                   variant == 2 ? static_cast<const void*>(scales_bf16.data()) : scales.data(),
                                   variant == 2, bias.data(), isa, packed.data())
                             : cpu::fully_connected_qd8_pack_qc8w(s.n, s.k, w8.data(), scales.data(), bias.data(), isa,
                                                                  packed.data());
        CHECK(ok);
        std::vector<unsigned char> scratch(cpu::fully_connected_qd8_scratch_bytes(s.m, s.k));
        std::vector<float> first;
        for (uint32_t t : {1u, 2u, 3u}) {
          CHECK(get_threadpool()->_unsafe_reset_threadpool(t));
          std::vector<float> out(s.m * s.n, std::nanf(""));
          CHECK(cpu::fully_connected_qd8(packed.data(), s.m, in.data(), s.k, out.data(), s.n, lo, hi, scratch.data()));
          CHECK_CLOSE(out.data(), expected.data(), out.size(), 1e-5);
          if (first.empty()) first = out;
          CHECK(std::memcmp(out.data(), first.data(), out.size() * sizeof(float)) == 0);
        }
      }
    }
  }
  get_threadpool()->_unsafe_reset_threadpool(before);
  std::vector<unsigned char> packed(4096);
  std::vector<uint8_t> nib(64);
  std::vector<float> sc(4, 1.f);
  // groups must divide k and be a multiple of 8
  CHECK(cpu::fully_connected_qd8_packed_bytes(2, 24, 12, Isa::kBaseline) == 0);
  CHECK(!cpu::fully_connected_qd8_pack_qb4w(2, 24, 12, nib.data(), 8, sc.data(), false, nullptr, Isa::kBaseline,
                                            packed.data()));
}

KTEST(qs8_dw_pw_gives_the_two_calls_bytes) {
  const uint32_t before = static_cast<uint32_t>(get_threadpool()->get_thread_count());
  struct Fused {
    int64_t batch, h, w;
    ConvNhwc dw;
    int64_t cout;
  };
  const Fused cases[] = {
      {1, 28, 28, geometry(3, 1, 1, 1, 144, 1, 1), 24},  // MobileNetV2 block
      {1, 29, 27, geometry(3, 2, 1, 1, 96, 1, 1), 32},  // stride 2, odd sizes
      {2, 14, 14, geometry(3, 1, 1, 1, 45, 1, 1), 70},  // channel and column tails, a batch
      {1, 16, 300, geometry(3, 1, 1, 1, 40, 1, 1), 9},  // a row over several runs
      {1, 7, 7, geometry(3, 1, 1, 1, 160, 1, 1), 40},  // 7 rows: two calls with a buffer
  };
  for (const Fused& f : cases) {
    const int64_t ch = f.dw.out_channels(), ks = f.dw.kernel_h * f.dw.kernel_w;
    const int64_t oh = f.dw.out_h(f.h), ow = f.dw.out_w(f.w);
    const ConvNhwc pw = geometry(1, 1, 0, 1, 1, ch, f.cout);
    auto in = random_i8(f.batch * f.h * f.w * ch, 21);
    auto wd = random_i8(ch * ks, 22, -127, 127);
    auto bd = random_i32(ch, 23, 2000);
    auto wp = random_i8(f.cout * ch, 24, -127, 127);
    auto bp = random_i32(f.cout, 25, 3000);
    auto sd = weight_scales(ch, ks), sp = weight_scales(f.cout, ch);
    cpu::Qs8ConvQuant qd, qp;
    qd.in_scale = 0.02f, qd.in_zero_point = -7, qd.weight_scales = sd.data();
    qd.out_scale = 0.05f, qd.out_zero_point = 3;
    qp.in_scale = 0.05f, qp.in_zero_point = 3, qp.weight_scales = sp.data();
    qp.out_scale = 0.07f, qp.out_zero_point = -11;
    for (Isa isa : kIsas) {
      if (!cpu::int8_isa_supported(isa)) continue;
      std::vector<unsigned char> pd(cpu::conv2d_nhwc_qs8_packed_bytes(f.dw, isa));
      std::vector<unsigned char> pp(cpu::conv2d_nhwc_qs8_packed_bytes(pw, isa));
      CHECK(cpu::conv2d_nhwc_qs8_pack(f.dw, ConvWeights::kOhwi, wd.data(), bd.data(), qd, isa, pd.data()));
      CHECK(cpu::conv2d_nhwc_qs8_pack(pw, ConvWeights::kOhwi, wp.data(), bp.data(), qp, isa, pp.data()));
      std::vector<int8_t> mid(f.batch * oh * ow * ch), two(f.batch * oh * ow * f.cout);
      CHECK(cpu::conv2d_nhwc_qs8(f.dw, pd.data(), f.batch, f.h, f.w, in.data(), mid.data(), -3, 120));
      CHECK(cpu::conv2d_nhwc_qs8(pw, pp.data(), f.batch, oh, ow, mid.data(), two.data(), -128, 100));
      for (uint32_t t : {1u, 2u, 3u}) {
        CHECK(get_threadpool()->_unsafe_reset_threadpool(t));
        for (bool with_mid : {true, false}) {
          std::vector<int8_t> scratch(mid.size(), 0x55), out(two.size(), 0x55);
          CHECK(cpu::conv2d_nhwc_qs8_dw_pw(f.dw, pd.data(), -3, 120, pw, pp.data(), f.batch, f.h, f.w, in.data(),
                                           with_mid ? scratch.data() : nullptr, out.data(), -128, 100));
          CHECK(out == two);
        }
      }
      // A pair whose channels do not chain is refused, nothing written.
      std::vector<int8_t> out(two.size(), 0x55), scratch(mid.size());
      ConvNhwc wrong = pw;
      wrong.group_in_channels = ch + 1;
      CHECK(!cpu::conv2d_nhwc_qs8_dw_pw(f.dw, pd.data(), -3, 120, wrong, pp.data(), f.batch, f.h, f.w, in.data(),
                                        scratch.data(), out.data(), -128, 100));
      CHECK(out[0] == 0x55 && out.back() == 0x55);
    }
  }
  get_threadpool()->_unsafe_reset_threadpool(before);
}
