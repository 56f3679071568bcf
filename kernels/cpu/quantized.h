// Int8 kernels over NHWC buffers, with XNNPACK's QS8 conventions: activations int8 with a scale
// and zero point per tensor, weights int8 symmetric with one scale per output channel, bias int32
// (at scale in_scale * weight_scale[oc], zero point 0).
//
// Requantization, bit-exact on every ISA: with acc the int32 sum bias[oc] + sum (x - in_zp) * w,
//   scale[oc] = in_scale * weight_scale[oc] / out_scale      (float32, in that order)
//   y = float(acc) * scale[oc], clamped to [out_min - out_zp, out_max - out_zp]
//   out = round_to_nearest_even(y) + out_zp
// Every ISA (baseline, AVX2 via vpmovsxbw + vpmaddwd, AVX-512 VNNI via vpdpbusd) returns the same
// bytes. (vpmaddubsw is not used: its int16 pair sums saturate for full-range int8 operands.)
//
// Layouts, packing, threads and clamping follow conv_nhwc.h: pack once into a caller-owned buffer
// of *_packed_bytes bytes (weights, corrected bias, scales, the zero row, and the ISA); runs
// allocate nothing and are bit-identical for any thread count. Padding reads as in_zero_point.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/conv_nhwc.h"
#include "kernels/cpu/isa.h"

namespace executorch {
namespace kernels {
namespace cpu {

struct Qs8ConvQuant {
  float in_scale = 1.f;
  int32_t in_zero_point = 0;  // -128..127
  const float* weight_scales = nullptr;  // out_channels positive scales
  float out_scale = 1.f;
  int32_t out_zero_point = 0;  // -128..127
};

// QS8 convolution: any geometry conv_nhwc.h takes with at most 256 taps (kernel_h * kernel_w);
// depthwise ones (group_in == group_out == 1) take a depthwise kernel. 0 / false when refused
// (invalid geometry, too many taps, a scale that is not positive and finite, ISA missing).
size_t conv2d_nhwc_qs8_packed_bytes(const ConvNhwc& c, Isa isa);
bool conv2d_nhwc_qs8_pack(const ConvNhwc& c, ConvWeights layout, const int8_t* weight, const int32_t* bias,
                          const Qs8ConvQuant& q, Isa isa, void* packed);
// out[batch, out_h, out_w, out_channels] from in[batch, in_h, in_w, in_channels], both int8.
bool conv2d_nhwc_qs8(const ConvNhwc& c, const void* packed, int64_t batch, int64_t in_h, int64_t in_w, const int8_t* in,
                     int8_t* out, int8_t out_min, int8_t out_max);

// A QS8 depthwise convolution whose output only feeds a pointwise QS8 convolution, in one call,
// as conv2d_nhwc_f32_dw_pw() (conv_nhwc.h) does in float: the same bytes as the two calls in
// turn, for any thread count; `mid` (the depthwise output, int8) is used on maps of fewer than
// kDwPwMinRows output rows, and may be null (always one pass). False when refused.
bool conv2d_nhwc_qs8_dw_pw(const ConvNhwc& dw, const void* dw_packed, int8_t dw_min, int8_t dw_max, const ConvNhwc& pw,
                           const void* pw_packed, int64_t batch, int64_t in_h, int64_t in_w, const int8_t* in,
                           int8_t* mid, int8_t* out, int8_t out_min, int8_t out_max);

// QS8 fully connected: out[m, n] from in[m, k]; weight [n, k], or [k, n] with weight_k_major.
size_t fully_connected_qs8_packed_bytes(int64_t n, int64_t k, Isa isa);
bool fully_connected_qs8_pack(int64_t n, int64_t k, const int8_t* weight, bool weight_k_major, const int32_t* bias,
                              const Qs8ConvQuant& q, Isa isa, void* packed);
bool fully_connected_qs8(const void* packed, int64_t m, const int8_t* in, int64_t in_stride, int8_t* out,
                         int64_t out_stride, int8_t out_min, int8_t out_max);

// QS8 elementwise add of two same-shape tensors of n elements:
//   out = clamp(((a - a_zp) * a_mul + (b - b_zp) * b_mul + 2^(shift-1)) >> shift + out_zp)
// in int32 (XNNPACK's fixed-point add): with the ratios a_scale / out_scale and b_scale / out_scale
// in float32, shift = 20 - floor(log2(larger ratio)) (kept within 1..30), a_mul =
// round_half_even(ratio_a * 2^shift), b_mul likewise (so the larger is in [2^20, 2^21]). False
// when a ratio is not positive and finite or reaches 2^20, or `isa` is missing. out may alias a
// or b.
struct Qs8AddQuant {
  float a_scale = 1.f;
  int32_t a_zero_point = 0;
  float b_scale = 1.f;
  int32_t b_zero_point = 0;
  float out_scale = 1.f;
  int32_t out_zero_point = 0;
};
bool add_qs8(int64_t n, const int8_t* a, const int8_t* b, int8_t* out, const Qs8AddQuant& q, int8_t out_min,
             int8_t out_max, Isa isa);

// QD8 fully connected (XNNPACK's qdint8 activations): float input rows quantized at run time, one
// scale and zero point per row, against int8 weights; float output.
//
// Row quantization (one routine for every ISA, so the int8 rows are identical everywhere; the
// input must be finite): lo = min(0, min x), hi = max(0, max x); with hi == lo the row is all
// zeros (scale 1, zero point 0); else inv = 255 / (hi - lo), scale = (hi - lo) / 255,
// zp = clamp(rne(-128 - lo * inv), -128, 127), q = clamp(rne(x * inv) + zp, -128, 127).
// Output: out[m, n] = clamp(sum_g float(sum_{k in g} (q - zp) * w[n, k]) * wscale[n, g]
//                           * scale_m + bias[n])
// where g runs over the weight groups (one group of k for per-channel weights). The kernels sum
// each group's q * w exactly in int32 and take the zero point off once per output in float, as
// zp * sum_g float(sum_{k in g} w[n, k]) * wscale[n, g] (precomputed at packing), so results
// agree with the formula to float rounding and may differ across ISAs by it (FMA), as float
// GEMMs do; for one ISA they are bit-identical for any thread count.
//
// Weights, packed once:
// - qc8w: int8 [n, k] with one float scale per output channel;
// - qb4w: 4-bit, groups of `group_size` input channels (a multiple of 8 dividing k) with one
//   scale per (n, group), given as float or as bfloat16 (raw uint16 bits): [n, k / group_size].
//   Two weights per byte, [n, k / 2] bytes, element k in the low nibble when k is even. Nibble
//   value v means v - 8 with `nibble_zero_point` 8 (XNNPACK's usual), or the signed 4-bit value
//   (v ^ 8) - 8 with 0. On AVX-512 groupwise weights stay 4-bit in the packed buffer (half
//   the memory traffic of int8); elsewhere, and for one group of k, packing widens them to int8.
// Scratch: fully_connected_qd8_scratch_bytes(m, k) bytes (the quantized rows), caller-owned.
size_t fully_connected_qd8_packed_bytes(int64_t n, int64_t k, int64_t group_size, Isa isa);
bool fully_connected_qd8_pack_qc8w(int64_t n, int64_t k, const int8_t* weight, const float* weight_scales,
                                   const float* bias, Isa isa, void* packed);
bool fully_connected_qd8_pack_qb4w(int64_t n, int64_t k, int64_t group_size, const uint8_t* weight,
                                   int32_t nibble_zero_point, const void* scales, bool scales_bf16, const float* bias,
                                   Isa isa, void* packed);
size_t fully_connected_qd8_scratch_bytes(int64_t m, int64_t k);
bool fully_connected_qd8(const void* packed, int64_t m, const float* in, int64_t in_stride, float* out,
                         int64_t out_stride, float out_min, float out_max, void* scratch);

// The row quantization fully_connected_qd8() applies (exposed for tests and for callers that
// want the int8 rows): q[0:k], *scale, *zero_point from x[0:k].
void quantize_row_qd8(const float* x, int64_t k, int8_t* q, float* scale, int32_t* zero_point);

}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
