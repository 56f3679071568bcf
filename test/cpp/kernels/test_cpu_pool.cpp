// Pooling against direct window definitions, including ceil mode and padding rules.
#include <cmath>
#include <vector>

#include "kernels/cpu/pool.h"
#include "test/cpp/kernels/check.h"

using executorch::kernels::cpu::Pool2dShape;
namespace cpu = executorch::kernels::cpu;

KTEST(pool_output_size_follows_ceil_mode_rules) {
  CHECK(cpu::pool_output_size(8, 3, 2, 1, 1, false) == 4);
  CHECK(cpu::pool_output_size(112, 3, 2, 1, 1, false) == 56);
  CHECK(cpu::pool_output_size(5, 2, 2, 0, 1, false) == 2);
  CHECK(cpu::pool_output_size(5, 2, 2, 0, 1, true) == 3);
  // ceil mode may not start a window in the right padding: 6 with k2 s2 p1 stays 4
  CHECK(cpu::pool_output_size(6, 2, 2, 1, 1, true) == 4);
  CHECK(cpu::pool_output_size(2, 5, 1, 0, 1, false) == 0);
}

KTEST(max_pool2d_matches_windows) {
  // 2 planes of 7x9, kernel 3x2, stride 2x3, pad 1x1, dilation 1x2.
  Pool2dShape s{2, 7, 9, 0, 0, 3, 2, 2, 3, 1, 1, 1, 2};
  s.out_h = cpu::pool_output_size(7, 3, 2, 1, 1, true);
  s.out_w = cpu::pool_output_size(9, 2, 3, 1, 2, true);
  auto in = ktest::random_floats(2 * 7 * 9, 31);
  std::vector<float> out(2 * s.out_h * s.out_w);
  std::vector<int64_t> idx(out.size());
  cpu::max_pool2d(s, in.data(), out.data(), idx.data());
  for (int64_t p = 0; p < 2; ++p)
    for (int64_t oh = 0; oh < s.out_h; ++oh)
      for (int64_t ow = 0; ow < s.out_w; ++ow) {
        float best = -INFINITY;
        for (int64_t kh = 0; kh < 3; ++kh)
          for (int64_t kw = 0; kw < 2; ++kw) {
            const int64_t ih = oh * 2 - 1 + kh, iw = ow * 3 - 1 + kw * 2;
            if (ih >= 0 && ih < 7 && iw >= 0 && iw < 9) best = std::fmax(best, in[p * 63 + ih * 9 + iw]);
          }
        const int64_t o = (p * s.out_h + oh) * s.out_w + ow;
        CHECK(out[o] == best);
        CHECK(in[p * 63 + idx[o]] == best);
      }
}

KTEST(avg_pool2d_divisors) {
  Pool2dShape s{1, 5, 5, 3, 3, 3, 3, 2, 2, 1, 1, 1, 1};
  std::vector<float> in(25, 1.f);
  std::vector<float> out(9);
  cpu::avg_pool2d(s, in.data(), out.data(), true, 0);
  CHECK(std::fabs(out[0] - 4.f / 9.f) < 1e-6);  // corner: 4 real cells over a 9-cell window
  CHECK(std::fabs(out[4] - 1.f) < 1e-6);
  cpu::avg_pool2d(s, in.data(), out.data(), false, 0);
  CHECK(std::fabs(out[0] - 1.f) < 1e-6);
  cpu::avg_pool2d(s, in.data(), out.data(), false, 2);
  CHECK(std::fabs(out[0] - 2.f) < 1e-6);
}

KTEST(adaptive_avg_pool2d_uneven_windows) {
  std::vector<float> in(2 * 5 * 7);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 11);
  std::vector<float> out(2 * 3 * 2);
  cpu::adaptive_avg_pool2d(2, 5, 7, 3, 2, in.data(), out.data());
  for (int64_t p = 0; p < 2; ++p)
    for (int64_t oh = 0; oh < 3; ++oh)
      for (int64_t ow = 0; ow < 2; ++ow) {
        const int64_t h0 = oh * 5 / 3, h1 = ((oh + 1) * 5 + 2) / 3, w0 = ow * 7 / 2, w1 = ((ow + 1) * 7 + 1) / 2;
        double sum = 0;
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w) sum += in[p * 35 + h * 7 + w];
        CHECK(std::fabs(out[(p * 3 + oh) * 2 + ow] - sum / ((h1 - h0) * (w1 - w0))) < 1e-5);
      }
}
