// conv2d and conv_transpose2d against naive loops over strides, padding, dilation and groups.
#include <vector>

#include "kernels/cpu/conv.h"
#include "test/cpp/kernels/check.h"

using executorch::kernels::cpu::Conv2dShape;
using executorch::kernels::cpu::conv2d;
using executorch::kernels::cpu::conv2d_workspace_floats;
using executorch::kernels::cpu::conv_transpose2d;

namespace {

std::vector<float> naive_conv(const Conv2dShape& s, const std::vector<float>& in, const std::vector<float>& w,
                              const float* bias) {
  const int64_t oh_n = s.out_h(), ow_n = s.out_w(), cg = s.in_channels / s.groups, ocg = s.out_channels / s.groups;
  std::vector<float> out(s.batch * s.out_channels * oh_n * ow_n);
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t oc = 0; oc < s.out_channels; ++oc)
      for (int64_t oh = 0; oh < oh_n; ++oh)
        for (int64_t ow = 0; ow < ow_n; ++ow) {
          double acc = bias ? bias[oc] : 0.0;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t kh = 0; kh < s.kernel_h; ++kh)
              for (int64_t kw = 0; kw < s.kernel_w; ++kw) {
                const int64_t ih = oh * s.stride_h - s.pad_h + kh * s.dilation_h;
                const int64_t iw = ow * s.stride_w - s.pad_w + kw * s.dilation_w;
                if (ih < 0 || ih >= s.in_h || iw < 0 || iw >= s.in_w) continue;
                const int64_t ic = (oc / ocg) * cg + c;
                acc += static_cast<double>(in[((n * s.in_channels + ic) * s.in_h + ih) * s.in_w + iw]) *
                       w[((oc * cg + c) * s.kernel_h + kh) * s.kernel_w + kw];
              }
          out[((n * s.out_channels + oc) * oh_n + oh) * ow_n + ow] = static_cast<float>(acc);
        }
  return out;
}

void check_conv(const Conv2dShape& s, bool with_bias) {
  auto in = ktest::random_floats(s.batch * s.in_channels * s.in_h * s.in_w, 11);
  auto w = ktest::random_floats(s.out_channels * (s.in_channels / s.groups) * s.kernel_h * s.kernel_w, 12);
  auto b = ktest::random_floats(s.out_channels, 13);
  const float* bias = with_bias ? b.data() : nullptr;
  auto expected = naive_conv(s, in, w, bias);
  std::vector<float> ws(conv2d_workspace_floats(s));
  std::vector<float> out(expected.size(), 99.f);
  conv2d(s, in.data(), w.data(), bias, out.data(), ws.data());
  // float accumulation error grows with the reduction length
  const double tol = 1e-6 + 5e-8 * (s.in_channels / s.groups) * s.kernel_h * s.kernel_w;
  CHECK_CLOSE(out.data(), expected.data(), out.size(), tol);
  std::vector<float> direct(expected.size(), 99.f);
  conv2d(s, in.data(), w.data(), bias, direct.data(), nullptr);
  CHECK_CLOSE(direct.data(), expected.data(), direct.size(), tol);
}

// batch, C, H, W, OC, KH, KW, stride h/w, pad h/w, dilation h/w, groups
const Conv2dShape kShapes[] = {
    {1, 3, 9, 11, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1},  // plain 3x3, odd sizes
    {2, 3, 17, 15, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1},  // MobileNet stem, stride 2
    {1, 16, 7, 9, 24, 1, 1, 1, 1, 0, 0, 1, 1, 1},  // pointwise
    {2, 8, 6, 5, 12, 1, 1, 2, 2, 0, 0, 1, 1, 1},  // strided 1x1
    {1, 6, 13, 12, 6, 3, 3, 1, 1, 1, 1, 1, 1, 6},  // depthwise 3x3 s1
    {1, 6, 13, 12, 6, 3, 3, 2, 2, 1, 1, 1, 1, 6},  // depthwise 3x3 s2
    {1, 4, 8, 7, 4, 3, 3, 2, 1, 0, 2, 1, 1, 4},  // depthwise odd stride/pad mix
    {1, 4, 3, 2, 4, 3, 3, 1, 1, 1, 1, 1, 1, 4},  // depthwise, image smaller than filter
    {1, 4, 9, 9, 8, 3, 3, 1, 1, 1, 1, 1, 1, 4},  // depthwise, channel multiplier 2
    {1, 4, 10, 10, 6, 5, 5, 1, 1, 2, 2, 1, 1, 1},  // 5x5
    {1, 3, 12, 11, 4, 3, 3, 1, 1, 2, 2, 2, 2, 1},  // dilation
    {1, 5, 11, 11, 7, 3, 2, 3, 1, 2, 0, 2, 1, 1},  // depthwise 3x3 path must not take dilation
    {2, 6, 10, 8, 9, 3, 3, 1, 2, 1, 0, 1, 1, 3},  // grouped
    {1, 3, 19, 19, 8, 7, 7, 2, 2, 3, 3, 1, 1, 1},  // ResNet stem
    {1, 2, 1, 17, 3, 1, 3, 1, 2, 0, 1, 1, 1, 1},  // conv1d as H == 1
    {1, 3, 6, 6, 4, 3, 3, 3, 3, 0, 0, 1, 1, 1},  // stride 3 depthwise-like direct path
    {1, 5, 9, 10, 5, 3, 3, 3, 3, 1, 1, 1, 1, 5},  // depthwise with stride 3 (generic)
    {2, 40, 7, 7, 40, 3, 3, 1, 1, 1, 1, 1, 1, 40},  // depthwise s1 on a small plane (flat sweep)
    {1, 4, 6, 5, 4, 3, 3, 1, 1, 0, 0, 1, 1, 4},  // depthwise s1 without padding
    {1, 700, 5, 6, 700, 3, 3, 1, 1, 1, 1, 1, 1, 700},  // depthwise over several channel chunks
};

}  // namespace

KTEST(conv2d_matches_naive) {
  for (const Conv2dShape& s : kShapes) {
    check_conv(s, true);
    check_conv(s, false);
  }
}

KTEST(conv_output_is_empty_when_the_kernel_overhangs_the_input) {
  // (2 - 3) / 2 truncates to 0 in C++: without the guard this claimed one output row.
  const Conv2dShape s{1, 1, 2, 2, 1, 3, 3, 2, 2, 0, 0, 1, 1, 1};
  CHECK(s.out_h() == 0 && s.out_w() == 0);
  const Conv2dShape fits{1, 1, 3, 3, 1, 3, 3, 2, 2, 0, 0, 1, 1, 1};
  CHECK(fits.out_h() == 1 && fits.out_w() == 1);
}

KTEST(conv_transpose2d_matches_scatter_definition) {
  // in[1, 4, 5, 6] -> out[1, 6, H, W] with groups 2, stride 2, padding 1, output_padding 1.
  Conv2dShape s{1, 4, 5, 6, 6, 3, 3, 2, 2, 1, 1, 1, 1, 2};
  const int64_t out_h = (5 - 1) * 2 - 2 + 2 + 1 + 1, out_w = (6 - 1) * 2 - 2 + 2 + 1 + 1;
  auto in = ktest::random_floats(4 * 5 * 6, 21);
  auto w = ktest::random_floats(4 * 3 * 9, 22);
  auto b = ktest::random_floats(6, 23);
  // Transposed conv is the adjoint of conv: <convT(x), y> == <x, conv(y)> (bias aside).
  Conv2dShape fwd{1, 6, out_h, out_w, 4, 3, 3, 2, 2, 1, 1, 1, 1, 2};
  CHECK(fwd.out_h() == 5 && fwd.out_w() == 6);
  auto y = ktest::random_floats(6 * out_h * out_w, 24);
  std::vector<float> zt(6 * out_h * out_w);
  conv_transpose2d(s, out_h, out_w, in.data(), w.data(), nullptr, zt.data());
  std::vector<float> cy(4 * 5 * 6);
  conv2d(fwd, y.data(), w.data(), nullptr, cy.data(), nullptr);
  double lhs = 0, rhs = 0;
  for (size_t i = 0; i < zt.size(); ++i) lhs += static_cast<double>(zt[i]) * y[i];
  for (size_t i = 0; i < cy.size(); ++i) rhs += static_cast<double>(in[i]) * cy[i];
  CHECK(std::fabs(lhs - rhs) < 1e-4 * (1 + std::fabs(rhs)));
  std::vector<float> with_bias(zt.size());
  conv_transpose2d(s, out_h, out_w, in.data(), w.data(), b.data(), with_bias.data());
  for (size_t i = 0; i < zt.size(); ++i) zt[i] += b[i / (out_h * out_w)];
  CHECK_CLOSE(with_bias.data(), zt.data(), zt.size(), 1e-6);
}

KTEST(conv2d_large_image_runs_in_bands_with_bounded_scratch) {
  // 3x3 over 64 channels of 130x130: one full im2col would need 9.7M floats.
  Conv2dShape s{1, 64, 130, 130, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1};
  CHECK(conv2d_workspace_floats(s) < (size_t(3) << 20));
  check_conv(s, true);
}
