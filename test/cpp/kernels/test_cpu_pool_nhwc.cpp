// NHWC pooling (max, average, global average; float32 and QS8) against direct loops, including
// padding, dilation, a NaN, and thread counts 1..3 giving the same bits.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/pool_nhwc.h"
#include "kernels/cpu/threadpool.h"
#include "test/cpp/kernels/check.h"

namespace cpu = executorch::kernels::cpu;
using cpu::PoolNhwc;
using executorch::extension::threadpool::get_threadpool;

namespace {

PoolNhwc window(int64_t k, int64_t stride, int64_t pad, int64_t dil) {
  PoolNhwc p;
  p.kernel_h = p.kernel_w = k;
  p.stride_h = p.stride_w = stride;
  p.dilation_h = p.dilation_w = dil;
  p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = pad;
  return p;
}

// max (kind 0) or average with (1) / without (2) the padding in the divisor. A max over a window
// wholly in the padding is the lower bound; such an average is 0.
std::vector<float> naive_pool(const PoolNhwc& p, int kind, int64_t n_, int64_t h, int64_t w, int64_t c_,
                              const std::vector<float>& in, float lo, float hi) {
  const int64_t oh = p.out_h(h), ow = p.out_w(w);
  std::vector<float> out(n_ * oh * ow * c_);
  for (int64_t n = 0; n < n_; ++n)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t x = 0; x < ow; ++x)
        for (int64_t c = 0; c < c_; ++c) {
          double acc = kind == 0 ? -INFINITY : 0.0;
          int64_t count = 0;
          bool nan = false;
          for (int64_t kh = 0; kh < p.kernel_h; ++kh)
            for (int64_t kw = 0; kw < p.kernel_w; ++kw) {
              const int64_t ih = y * p.stride_h - p.pad_top + kh * p.dilation_h;
              const int64_t iw = x * p.stride_w - p.pad_left + kw * p.dilation_w;
              if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
              const float v = in[((n * h + ih) * w + iw) * c_ + c];
              // Max: the first in-image tap, then each later one where greater (a NaN only as the first).
              if (kind == 0) {
                if (count == 0) nan = v != v;
                if (count == 0 || (!nan && v > acc)) acc = v;
              } else {
                nan = nan || v != v;
                acc += v;
              }
              ++count;
            }
          if (kind == 1) acc /= double(p.kernel_h * p.kernel_w);
          if (kind == 2) acc = count ? acc / double(count) : 0.0;  // a window wholly in padding: 0
          out[((n * oh + y) * ow + x) * c_ + c] =
              nan && kind == 0 ? NAN : static_cast<float>(std::fmin(std::fmax(acc, lo), hi));
        }
  return out;
}

}  // namespace

KTEST(pool_nhwc_f32_matches_reference) {
  struct Case {
    PoolNhwc p;
    int64_t n, h, w, c;
  };
  const Case cases[] = {{window(3, 2, 1, 1), 2, 9, 8, 19},
                        {window(2, 2, 0, 1), 1, 8, 8, 64},
                        {window(3, 1, 1, 2), 1, 7, 9, 5},
                        {window(5, 3, 2, 1), 1, 11, 10, 33},
                        {window(1, 1, 0, 1), 1, 3, 3, 7},
                        // 121 taps (two chunks and a remainder of taps per call), 70 channels (a
                        // vector line and a tail); 1,600 taps; windows wholly in the padding.
                        {window(11, 3, 5, 1), 1, 23, 21, 70},
                        {window(40, 5, 0, 1), 1, 45, 45, 3},
                        {window(2, 1, 2, 1), 1, 4, 5, 3}};
  const uint32_t before = static_cast<uint32_t>(get_threadpool()->get_thread_count());
  for (const Case& k : cases) {
    auto in = ktest::random_floats(k.n * k.h * k.w * k.c, 201);
    in[5] = NAN;
    in[k.c * 2 + 3] = NAN;  // pixel (0, 2): a later tap of some windows
    for (int kind = 0; kind < 3; ++kind) {
      const float lo = kind == 0 ? -0.5f : -std::numeric_limits<float>::infinity();
      const float hi = 0.75f;
      auto expected = naive_pool(k.p, kind, k.n, k.h, k.w, k.c, in, lo, hi);
      std::vector<bool> nan(expected.size());
      for (size_t i = 0; i < expected.size(); ++i) {
        nan[i] = std::isnan(expected[i]);
        if (nan[i]) expected[i] = 0.f;
      }
      std::vector<float> first;
      for (uint32_t t : {1u, 2u, 3u}) {
        CHECK(get_threadpool()->_unsafe_reset_threadpool(t));
        std::vector<float> out(expected.size(), 99.f);
        CHECK(kind == 0 ? cpu::max_pool2d_nhwc_f32(k.p, k.n, k.h, k.w, k.c, in.data(), out.data(), lo, hi)
                        : cpu::avg_pool2d_nhwc_f32(k.p, k.n, k.h, k.w, k.c, kind == 1, in.data(), out.data(), lo, hi));
        for (size_t i = 0; i < out.size(); ++i) {
          if (nan[i]) {
            CHECK(std::isnan(out[i]));
            out[i] = 0.f;
          }
        }
        CHECK_CLOSE(out.data(), expected.data(), out.size(), 1e-6);
        if (first.empty()) first = out;
        CHECK(std::memcmp(first.data(), out.data(), out.size() * sizeof(float)) == 0);
      }
    }
  }
  get_threadpool()->_unsafe_reset_threadpool(before);
  std::vector<float> in(9), out(9);
  PoolNhwc bad = window(3, 0, 0, 1);
  CHECK(!cpu::max_pool2d_nhwc_f32(bad, 1, 3, 3, 1, in.data(), out.data(), -1, 1));
}

namespace {

// Float and QS8 global average pools of 2 images of 49 pixels and c channels against sums.
void global_avg_pool_case(int64_t c) {
  const int64_t n = 2, pixels = 49;
  auto in = ktest::random_floats(n * pixels * c, 211);
  std::vector<float> out(n * c), expected(n * c);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch) {
      double s = 0;
      for (int64_t p = 0; p < pixels; ++p) s += in[(b * pixels + p) * c + ch];
      expected[b * c + ch] = static_cast<float>(std::fmin(s / pixels, 0.1));
    }
  CHECK(cpu::global_avg_pool_nhwc_f32(n, pixels, c, in.data(), out.data(), -1.f, 0.1f));
  CHECK_CLOSE(out.data(), expected.data(), out.size(), 1e-6);

  // Scales 5x apart; then equal scales over 8 pixels with an odd output zero point, where an eighth
  // of the means are ties (x.5) and XNNPACK rounds acc * scale + zp, not acc * scale, to even.
  struct Quant {
    float in_scale, out_scale;
    int32_t in_zp, out_zp;
    int64_t pixels;
  };
  for (const Quant qp : {Quant{0.1f, 0.02f, -4, 6, pixels}, Quant{0.5f, 0.5f, -15, 11, 8}}) {
    std::vector<int8_t> q(n * qp.pixels * c), qout(n * c), qexp(n * c);
    for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<int8_t>((i * 37) % 256 - 128);
    const float scale = qp.in_scale / qp.out_scale / float(qp.pixels);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t ch = 0; ch < c; ++ch) {
        int32_t acc = 0;
        for (int64_t p = 0; p < qp.pixels; ++p) acc += q[(b * qp.pixels + p) * c + ch] - qp.in_zp;
        const float y = std::fmin(std::fmax(float(acc) * scale + float(qp.out_zp), -128.f), 127.f);
        qexp[b * c + ch] = static_cast<int8_t>(std::nearbyint(y));
      }
    CHECK(cpu::global_avg_pool_nhwc_qs8(n, qp.pixels, c, q.data(), qp.in_scale, qp.in_zp, qout.data(), qp.out_scale,
                                        qp.out_zp, -128, 127));
    CHECK(qout == qexp);
  }
}

}  // namespace

KTEST(global_avg_pool_nhwc_matches_reference) {
  for (const int64_t c : {37, 300})  // one channel chunk; three, the last short
    global_avg_pool_case(c);
}

KTEST(global_avg_pool_nhwc_is_bit_identical_for_any_thread_count) {
  const uint32_t before = static_cast<uint32_t>(get_threadpool()->get_thread_count());
  const int64_t n = 1, pixels = 49, c = 1280;
  auto in = ktest::random_floats(n * pixels * c, 212);
  std::vector<float> first;
  for (uint32_t t : {1u, 2u, 3u}) {
    CHECK(get_threadpool()->_unsafe_reset_threadpool(t));
    std::vector<float> out(n * c);
    CHECK(cpu::global_avg_pool_nhwc_f32(n, pixels, c, in.data(), out.data(), -1e30f, 1e30f));
    if (first.empty()) first = out;
    CHECK(std::memcmp(out.data(), first.data(), out.size() * sizeof(float)) == 0);
  }
  get_threadpool()->_unsafe_reset_threadpool(before);
}

KTEST(max_pool_nhwc_qs8_matches_reference) {
  const PoolNhwc p = window(3, 2, 1, 1);
  const int64_t h = 9, w = 7, c = 21;
  std::vector<int8_t> in(h * w * c);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int8_t>((i * 91) % 256 - 128);
  const int64_t oh = p.out_h(h), ow = p.out_w(w);
  std::vector<int8_t> out(oh * ow * c), expected(out.size());
  for (int64_t y = 0; y < oh; ++y)
    for (int64_t x = 0; x < ow; ++x)
      for (int64_t ch = 0; ch < c; ++ch) {
        int best = -128;
        for (int64_t kh = 0; kh < 3; ++kh)
          for (int64_t kw = 0; kw < 3; ++kw) {
            const int64_t ih = y * 2 - 1 + kh, iw = x * 2 - 1 + kw;
            if (ih >= 0 && ih < h && iw >= 0 && iw < w) best = std::max<int>(best, in[(ih * w + iw) * c + ch]);
          }
        expected[(y * ow + x) * c + ch] = static_cast<int8_t>(std::min(best, 100));
      }
  CHECK(cpu::max_pool2d_nhwc_qs8(p, 1, h, w, c, in.data(), out.data(), -128, 100));
  CHECK(out == expected);
}

KTEST(max_pool_nhwc_qu8_matches_reference) {
  // A 9x9 window (81 taps: two calls per pixel), padding, 67 channels (a vector line and a tail),
  // both bounds active.
  const PoolNhwc p = window(9, 2, 4, 1);
  const int64_t h = 12, w = 10, c = 67;
  std::vector<uint8_t> in(h * w * c);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>((i * 53 + 7) % 256);
  const int64_t oh = p.out_h(h), ow = p.out_w(w);
  std::vector<uint8_t> out(oh * ow * c), expected(out.size());
  for (int64_t y = 0; y < oh; ++y)
    for (int64_t x = 0; x < ow; ++x)
      for (int64_t ch = 0; ch < c; ++ch) {
        int best = 0;
        for (int64_t kh = 0; kh < 9; ++kh)
          for (int64_t kw = 0; kw < 9; ++kw) {
            const int64_t ih = y * 2 - 4 + kh, iw = x * 2 - 4 + kw;
            if (ih >= 0 && ih < h && iw >= 0 && iw < w) best = std::max<int>(best, in[(ih * w + iw) * c + ch]);
          }
        expected[(y * ow + x) * c + ch] = static_cast<uint8_t>(std::min(std::max(best, 30), 240));
      }
  CHECK(cpu::max_pool2d_nhwc_qu8(p, 1, h, w, c, in.data(), out.data(), 30, 240));
  CHECK(out == expected);
  CHECK(!cpu::max_pool2d_nhwc_qu8(p, 1, h, w, c, in.data(), out.data(), 241, 240));  // bounds crossed
}
