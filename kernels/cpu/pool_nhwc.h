// Pooling over channels-last (NHWC) buffers: max and average pooling windows and global average
// pooling, float32 and int8, with the output clamp fused; the one pooling implementation, used by
// the portable kernels' NHWC chains and by the XnnpackBackend. Element (n, y, x, c) of an
// [N, H, W, C] tensor is at ((n * H + y) * W + x) * C + c. Loops run over channels (vectorized per
// ISA at build time by multiversioning) and visit only a window's in-image taps, so the work
// follows the input whatever the window size; each output is reduced in one fixed window order, so
// results are identical on every ISA and for any thread count. No packing, no scratch.
#pragma once

#include <cstdint>

#include "kernels/cpu/conv_nhwc.h"

namespace executorch {
namespace kernels {
namespace cpu {

// Window geometry: ConvNhwc's kernel/stride/dilation/padding fields (channel and group fields
// are ignored); out_h()/out_w() give the output size.
using PoolNhwc = ConvNhwc;

// out = clamp(max over the window's in-image elements): padding never wins, and a window wholly
// in padding gives out_min. A NaN wins only as the window's first in-image tap (a later tap wins
// where it is greater, which a NaN never is), as this backend has always computed it (torch gives
// NaN for any NaN in the window; XNNPACK's result depends on its tap order). False when the geometry is invalid
// (a size, stride or dilation below 1, a negative pad), out_min > out_max or the output empty.
bool max_pool2d_nhwc_f32(const PoolNhwc& p, int64_t batch, int64_t in_h, int64_t in_w, int64_t channels,
                         const float* in, float* out, float out_min, float out_max);

// out = clamp(sum over the window's in-image elements / divisor), the divisor being the window
// size with count_include_pad, else the number of in-image elements.
bool avg_pool2d_nhwc_f32(const PoolNhwc& p, int64_t batch, int64_t in_h, int64_t in_w, int64_t channels,
                         bool count_include_pad, const float* in, float* out, float out_min, float out_max);

// out[n, c] = clamp(mean over the `pixels` = H * W positions of in[n, :, c]).
bool global_avg_pool_nhwc_f32(int64_t batch, int64_t pixels, int64_t channels, const float* in, float* out,
                              float out_min, float out_max);

// QS8 global average pooling: acc = sum_p (x - in_zp) in int32, then, in float32, as XNNPACK's
// quantized mean: out = rne(clamp(acc * scale + out_zp)) with scale = (in_scale / out_scale) / pixels
// (the zero point added before rounding: a tie goes to the even output integer).
bool global_avg_pool_nhwc_qs8(int64_t batch, int64_t pixels, int64_t channels, const int8_t* in, float in_scale,
                              int32_t in_zero_point, int8_t* out, float out_scale, int32_t out_zero_point,
                              int8_t out_min, int8_t out_max);

// Quantized max pooling (input and output share scale and zero point: the order of the integers is
// the order of the values): clamp(max over the window), a window wholly in padding giving out_min.
bool max_pool2d_nhwc_qs8(const PoolNhwc& p, int64_t batch, int64_t in_h, int64_t in_w, int64_t channels,
                         const int8_t* in, int8_t* out, int8_t out_min, int8_t out_max);
bool max_pool2d_nhwc_qu8(const PoolNhwc& p, int64_t batch, int64_t in_h, int64_t in_w, int64_t channels,
                         const uint8_t* in, uint8_t* out, uint8_t out_min, uint8_t out_max);

}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
