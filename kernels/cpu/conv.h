// 2-D convolution over contiguous NCHW float32 buffers (conv1d is the H == 1 case).
#pragma once

#include <cstddef>
#include <cstdint>

namespace executorch {
namespace kernels {
namespace cpu {

struct Conv2dShape {
  int64_t batch, in_channels, in_h, in_w;
  int64_t out_channels, kernel_h, kernel_w;
  int64_t stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
  int64_t groups;

  // 0 when the padded input is smaller than the dilated kernel: C++ division truncates toward
  // zero, so a span of -1 with stride 2 would otherwise give 1 output and reads past the input.
  int64_t out_h() const { return out_len(in_h, pad_h, dilation_h, kernel_h, stride_h); }
  int64_t out_w() const { return out_len(in_w, pad_w, dilation_w, kernel_w, stride_w); }
  static int64_t out_len(int64_t in, int64_t pad, int64_t dilation, int64_t kernel, int64_t stride) {
    const int64_t span = in + 2 * pad - dilation * (kernel - 1) - 1;
    return span < 0 ? 0 : span / stride + 1;
  }
};

// Floats of scratch conv2d() wants for `s` (0 when its algorithm needs none).
size_t conv2d_workspace_floats(const Conv2dShape& s);

// out[N, OC, OH, OW] = conv(in[N, C, H, W], weight[OC, C / groups, KH, KW]) + bias[OC].
// `bias` may be null. With a null `workspace` a direct (slower) algorithm runs.
void conv2d(const Conv2dShape& s, const float* in, const float* weight, const float* bias, float* out,
            float* workspace);

// Transposed convolution of in[N, C, H, W] (C = s.in_channels) with weight[C, OC / groups, KH, KW]
// into out[N, OC, out_h, out_w] (OC = s.out_channels), which is overwritten; stride, padding and
// dilation are those of the forward convolution this one is the gradient of.
void conv_transpose2d(const Conv2dShape& s, int64_t out_h, int64_t out_w, const float* in, const float* weight,
                      const float* bias, float* out);

}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
