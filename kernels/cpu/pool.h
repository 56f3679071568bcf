// 2-D pooling over contiguous NCHW float32 planes.
#pragma once

#include <cstdint>

namespace executorch {
namespace kernels {
namespace cpu {

struct Pool2dShape {
  int64_t planes;  // batch * channels
  int64_t in_h, in_w, out_h, out_w;
  int64_t kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
};

// Output length of a pooling window sweep, as torch computes it (ceil_mode drops a last
// window that would start inside the right padding). <= 0 when the input is too small.
int64_t pool_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation, bool ceil_mode);

// Max over each window (padding never wins; NaN propagates); `indices` (may be null) gets the
// flat h * in_w + w position of the winner within its plane.
void max_pool2d(const Pool2dShape& s, const float* in, float* out, int64_t* indices);

// Mean over each window: divisor_override if > 0, else the window size clipped to the padded
// input (count_include_pad) or to the input itself.
void avg_pool2d(const Pool2dShape& s, const float* in, float* out, bool count_include_pad, int64_t divisor_override);

// Mean over the adaptive windows [floor(i * in / out), ceil((i + 1) * in / out)).
void adaptive_avg_pool2d(int64_t planes, int64_t in_h, int64_t in_w, int64_t out_h, int64_t out_w, const float* in,
                         float* out);

}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
