// Float32 convolution (grouped, depthwise, 1x1) and fully connected layers over channels-last
// (NHWC) buffers, with weights packed once for the micro-kernels and an output clamp fused.
//
// Contract shared by every function here:
// - Activations are dense NHWC: element (n, y, x, c) of an [N, H, W, C] tensor is at
//   ((n * H + y) * W + x) * C + c. The input has groups * group_in_channels channels, the output
//   groups * group_out_channels; channel g * group_in_channels + i belongs to group g.
// - `*_pack` runs once (at init) into a caller-owned buffer of `*_packed_bytes` bytes (64-byte
//   alignment recommended, not required). The packed buffer holds the weights, the bias and the
//   ISA it was packed for; it is read-only afterwards and may be shared by concurrent runs.
//   Packing for an ISA this CPU lacks returns false.
// - Runs allocate nothing and need no scratch; they split work over the kernel thread pool in
//   chunks fixed by the shape alone, and sum every output element in one fixed order, so results
//   are bit-identical for any thread count (they differ across ISAs only by FMA rounding).
// - Outputs are clamped to [out_min, out_max] (use -inf/+inf for none; NaN sums stay NaN).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/isa.h"

namespace executorch {
namespace kernels {
namespace cpu {

// Geometry of a 2-D convolution; padding may differ on each side (as XNNPACK's).
struct ConvNhwc {
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  int64_t groups = 1;
  int64_t group_in_channels = 0, group_out_channels = 0;

  int64_t in_channels() const { return groups * group_in_channels; }
  int64_t out_channels() const { return groups * group_out_channels; }
  // 0 when the padded input is smaller than the dilated kernel.
  int64_t out_h(int64_t in_h) const { return out_len(in_h + pad_top + pad_bottom, kernel_h, stride_h, dilation_h); }
  int64_t out_w(int64_t in_w) const { return out_len(in_w + pad_left + pad_right, kernel_w, stride_w, dilation_w); }
  // A 1x1 kernel at stride 1 without padding: output pixel r reads input pixel r (a matrix product).
  bool pointwise() const {
    return kernel_h == 1 && kernel_w == 1 && stride_h == 1 && stride_w == 1 && pad_top == 0 && pad_left == 0 &&
           pad_bottom == 0 && pad_right == 0;
  }
  // Sizes positive, pads non-negative, and every product the kernels form fits in int64_t:
  // each field, the channel and tap counts and the reduction per output (taps x group_in) at
  // most 2^24, the weight count at most 2^40.
  bool valid() const;

  static int64_t out_len(int64_t padded, int64_t kernel, int64_t stride, int64_t dilation) {
    const int64_t span = padded - dilation * (kernel - 1) - 1;
    return span < 0 || stride <= 0 ? 0 : span / stride + 1;
  }
};

// How a convolution's weights are laid out in memory.
enum class ConvWeights {
  kOhwi,  // [groups * group_out_channels, kernel_h, kernel_w, group_in_channels] (any conv)
  kHwo,  // [kernel_h, kernel_w, groups * group_out_channels]: depthwise only (group_in == 1)
};

// Bytes conv2d_nhwc_f32_pack() writes for `c` on `isa` (0 when !c.valid()).
size_t conv2d_nhwc_f32_packed_bytes(const ConvNhwc& c, Isa isa);

// Packs `weight` (laid out as `layout` says) and `bias` (out_channels floats, or null for zero)
// for conv2d_nhwc_f32(). Depthwise convolutions (group_in == group_out == 1) get the depthwise
// kernel; dense 3x3 ones at stride 1 without dilation, with 16 or more input and output channels
// and at most 256 x 256, Winograd F(2x2, 3x3) (2.25 times fewer multiply-adds; its sums round
// differently from the direct ones, well inside float tolerance); everything else (1x1
// included) the GEMM kernel, reading the input rows in place.
bool conv2d_nhwc_f32_pack(const ConvNhwc& c, ConvWeights layout, const float* weight, const float* bias, Isa isa,
                          void* packed);

// out[batch, out_h, out_w, out_channels] = clamp(conv(in[batch, in_h, in_w, in_channels])).
// `c` must be the geometry `packed` was made for; false (nothing written) when it is not, or
// when the output would be empty.
bool conv2d_nhwc_f32(const ConvNhwc& c, const void* packed, int64_t batch, int64_t in_h, int64_t in_w, const float* in,
                     float* out, float out_min, float out_max);

// A depthwise convolution whose output only feeds a pointwise (1x1) one, as in MobileNet's
// blocks: out = clamp(pw(clamp(dw(in), dw_min, dw_max)), out_min, out_max). Each task runs the
// depthwise kernel over a run of output pixels into a buffer on its stack and the pointwise GEMM
// from there, so the depthwise output (the block's widest tensor) is never written to memory and
// read back. The same bits for any thread count; on x86, bit for bit what conv2d_nhwc_f32()
// gives for the two in turn (where the compiler fuses multiply-adds, aarch64, whether it does can
// depend on a tile's row count, which differs between the two: within float rounding there).
// `mid` ([batch, dw out_h, dw out_w, channels]) is where the depthwise output goes when the
// layer runs as two calls instead: with fewer than kDwPwMinRows output rows (7x7 maps: two
// threads would share 7 tasks unevenly). With `mid` null it always runs as one. False (nothing
// written) when a packed buffer does not match its geometry, `pw` is not pointwise, its input
// channels are not dw's output channels, or there are more than kDwPwMaxChannels of them.
constexpr int64_t kDwPwMaxChannels = 8192, kDwPwMinRows = 14;
bool conv2d_nhwc_f32_dw_pw(const ConvNhwc& dw, const void* dw_packed, float dw_min, float dw_max, const ConvNhwc& pw,
                           const void* pw_packed, int64_t batch, int64_t in_h, int64_t in_w, const float* in,
                           float* mid, float* out, float out_min, float out_max);

// Fully connected: out[m, n] = clamp(sum_k in[m, k] * W[n, k] + bias[n]).
size_t fully_connected_f32_packed_bytes(int64_t n, int64_t k, Isa isa);
// `weight` is [n, k] (torch's Linear), or [k, n] with `weight_k_major`; bias may be null.
bool fully_connected_f32_pack(int64_t n, int64_t k, const float* weight, bool weight_k_major, const float* bias,
                              Isa isa, void* packed);
// Row i of the input starts at in + i * in_stride, of the output at out + i * out_stride.
bool fully_connected_f32(const void* packed, int64_t m, const float* in, int64_t in_stride, float* out,
                         int64_t out_stride, float out_min, float out_max);

}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
