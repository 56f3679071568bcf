// The XnnpackBackend's kernels on raw buffers (NHWC activations): what the portable CPU kernels do
// not offer in this layout, and the glue (bias, fused clamp, broadcasting, quantization) around them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/xnnpack/runtime/plan.h"
#include "kernels/portable/cpu/conv_nhwc.h"
#include "kernels/portable/cpu/pool_nhwc.h"
#include "kernels/portable/cpu/quantized.h"

namespace executorch {
namespace backends {
namespace xnnpack {

// The micro-kernels' description of a convolution.
kernels::cpu::ConvNhwc to_conv_nhwc(const ConvParams& p);

// Output length of a window sweep (convolution or pooling); < 1 when the input is too small.
int64_t window_out(int64_t in, int64_t pad_before, int64_t pad_after, int64_t kernel, int64_t dilation, int64_t stride);

// out[N, OH, OW, OC] = transposed conv(in[N, H, W, groups * group_in], weights[OC, KH, KW, group_in]) + bias:
// each input pixel scatters its kernel-sized patch to stride-spaced output positions.
int64_t transposed_out(int64_t in, int64_t pad_before, int64_t pad_after, int64_t kernel, int64_t dilation,
                       int64_t stride, int64_t adjustment);
void conv_transpose_nhwc(const ConvParams& p, int64_t n, int64_t h, int64_t w, int64_t oh, int64_t ow, const float* in,
                         const float* weights, const float* bias, float* out, float lo, float hi);

// Floats of scratch conv_nhwc needs.
size_t conv_scratch_floats(const ConvParams& p, int64_t n, int64_t h, int64_t w, int64_t oh, int64_t ow);
// out[N, OH, OW, OC] = conv(in[N, H, W, groups * group_in], weights[OC, KH, KW, group_in]) + bias.
void conv_nhwc(const ConvParams& p, int64_t n, int64_t h, int64_t w, int64_t oh, int64_t ow, const float* in,
               const float* weights, const float* bias, float* out, float lo, float hi, float* scratch);
// Depthwise: weights[KH, KW, OC] with OC = C * multiplier.
void depthwise_nhwc(const ConvParams& p, int64_t n, int64_t h, int64_t w, int64_t oh, int64_t ow, const float* in,
                    const float* weights, const float* bias, float* out, float lo, float hi);

size_t fc_scratch_floats(int64_t rows, int64_t in, int64_t out);
// out[rows, oc] = in[rows, ic] * W^T + bias, W [oc, ic] (or [ic, oc] when `transposed`).
void fully_connected(int64_t rows, int64_t ic, int64_t oc, const float* in, const float* weights, bool transposed,
                     const float* bias, float* out, float lo, float hi, float* scratch);

// Batched A[.., m, k] x B[.., k, n] (B[.., n, k] when `transpose_b`), batch dims broadcast.
size_t bmm_scratch_floats(int64_t m, int64_t n, int64_t k);
void batch_matmul(int rank, const int64_t* a_dims, const int64_t* b_dims, const int64_t* out_dims, const float* a,
                  const float* b, bool transpose_b, float* out, float* scratch);

// Elementwise with numpy broadcasting; dims are right-aligned to `rank` (the output's).
void binary(BinaryKind kind, int rank, const int64_t* a_dims, const float* a, const int64_t* b_dims, const float* b,
            const int64_t* out_dims, float* out, float lo, float hi);
void unary(UnaryKind kind, const float* x, float* y, int64_t n, float alpha, float lo, float hi);

// Data movement on elements of `elem` bytes.
void transpose(size_t elem, int rank, const int64_t* in_dims, const int64_t* perm, const void* in, void* out);
void slice(size_t elem, int rank, const int64_t* in_dims, const int64_t* offsets, const int64_t* out_dims,
           const void* in, void* out);
void pad(size_t elem, int rank, const int64_t* in_dims, const int64_t* before, const int64_t* out_dims,
         const void* value, const void* in, void* out);
// Concatenates `count` inputs along `axis`.
void concat(size_t elem, int rank, int64_t axis, int count, const int64_t* const* in_dims, const void* const* in,
            void* out);

// NHWC pooling; max on float or int8/uint8 (order-preserving in quantized form).
template <typename T>
void max_pool_nhwc(const ConvParams& p, int64_t n, int64_t h, int64_t w, int64_t c, int64_t oh, int64_t ow, const T* in,
                   T* out, float lo, float hi);
// Average over the window's in-bounds elements (padding is not counted).
void avg_pool_nhwc(const ConvParams& p, int64_t n, int64_t h, int64_t w, int64_t c, int64_t oh, int64_t ow,
                   const float* in, float* out, float lo, float hi);
void global_avg_pool_nhwc(int64_t n, int64_t hw, int64_t c, const float* in, float* out, float lo, float hi);

// XNNPACK's QS8 elementwise arithmetic with broadcasting. Add / subtract: fixed point, multipliers
// of 20 bits for the input/output scale ratios (b's negated to subtract), a shift and a bias
// holding the zero points and the rounding. Multiply: the centred integers' exact product times
// a_scale * b_scale / out_scale in float32, rounded half to even. `ok` is false for scale ratios
// XNNPACK refuses.
struct Qs8BinaryParams {
  bool ok = false;
  int32_t a_mul = 0, b_mul = 0, shift = 0, bias = 0;
  float scale = 0.f;
};
Qs8BinaryParams qs8_binary_params(BinaryKind kind, const Value& a, const Value& b, const Value& y);
void qs8_binary(BinaryKind kind, const Qs8BinaryParams& p, int rank, const int64_t* a_dims, const int8_t* a,
                const int64_t* b_dims, const int8_t* b, const int64_t* out_dims, int8_t* out, int32_t a_zp,
                int32_t b_zp, int32_t out_zp, int8_t qmin, int8_t qmax);

// The QS8 add's parameters: its two inputs' and its output's scales and zero points.
kernels::cpu::Qs8AddQuant add_quant(const Op& op, const Plan& plan);

// Quantization: round half to even, saturating to [qmin, qmax].
void quantize(const float* x, int64_t n, float scale, int32_t zero_point, int32_t qmin, int32_t qmax, void* out,
              bool is_signed);
void dequantize(const void* q, int64_t n, float scale, int32_t zero_point, bool is_signed, float* out);
// Per-row asymmetric int8 with the row's range widened to include 0.
void quantize_rows(const float* x, int64_t rows, int64_t cols, int8_t* out, float* scale, int32_t* zero_point);
void dequantize_rows(const int8_t* q, int64_t rows, int64_t cols, const float* scale, const int32_t* zero_point,
                     float* out);

}  // namespace xnnpack
}  // namespace backends
}  // namespace executorch
