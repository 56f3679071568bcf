// Micro-kernels behind conv_nhwc.h and quantized.h, one set per ISA level (internal header).
// Each ISA's set lives in its own file compiled for that ISA (nhwc_ukernels_<isa>.cpp), with every
// helper at internal linkage so no inline function built for a wider ISA leaks into baseline code.
#pragma once

#include <cstdint>

namespace executorch {
namespace kernels {
namespace cpu {
namespace ukernel {

// Row pointers of one tile are laid out as a[tap * kMaxMR + row].
constexpr int kMaxMR = 8;
// Taps whose row pointers one tile call gets at most (longer filters run in chunks).
constexpr int kTapChunk = 32;

// Tile sizes of the float GEMM per ISA: MR rows of output pixels x NR output channels, and the
// channel block of the depthwise kernel.
struct F32Geometry {
  int mr, nr, dw_cb;
};

// c[i][j] (i < mr, j < nr) = clamp(start + sum over taps t < ks, k < kc of a[t][i][k] * w[t][k][j])
// where start is init[j] or, with init null, c[i][j] itself (a later chunk of taps). `w` holds
// ks * kc rows of NR floats. Every element is summed in this order on every ISA.
struct F32GemmTile {
  int64_t mr, nr, kc, ks;
  const float* const* a;
  const float* w;
  const float* init;
  float* c;
  int64_t c_stride;
  float min, max;
};

// A tile over `blocks` consecutive NR-column blocks (p.nr columns in all): block j's weights and
// init start block_floats after block j-1's, its columns NR after. Sums as F32GemmTile does (so
// bit for bit the same as one call per block). One call per tile saves the per-block call and
// set-up (short reductions); a one-row tile runs several blocks at once, as its FMA chains would
// otherwise run back to back, latency-bound (decode-style fully connected, 1x1 images).
using F32GemmBlocksFn = void (*)(const F32GemmTile& t, int64_t blocks, int64_t block_floats);

// out[p][c] = clamp(bias[c] + sum_t in[p][t][c] * w[t][c]) for pixels p < pixels and channels
// c < channels; `in` holds pixels * ks pointers, or with in_step != 0 (a run of pixels whose taps
// are all inside the image) ks pointers for pixel 0, pixel p's tap t being in[t] + p * in_step.
// `w` is per block of CB channels: CB biases, then ks rows of CB weights.
struct F32DwTile {
  int64_t pixels, channels, ks, in_step;
  const float* const* in;
  const float* w;
  float* out;
  int64_t out_stride;
  float min, max;
};

// Int8 (QS8) tiles: accumulate in int32, then requantize each output channel j as
//   q = clamp(float(acc) * scale[j], lo, hi) rounded to nearest-even, plus zero_point
// with lo/hi the output bounds minus the zero point (so clamping before rounding is exact).
// `w` points at a block: NR int32 biases (already corrected for the input zero point as the
// ISA's kernel reads the input), NR float scales, then the packed int8 weights.
struct Qs8Requant {
  float lo, hi;
  int32_t zero_point;
};

// kr: input channels one packed weight step covers (the reduction is padded to it per tap).
struct Qs8Geometry {
  int mr, nr, kr, dw_cb;
};

struct Qs8GemmTile {
  int64_t mr, nr, kc, ks;
  const int8_t* const* a;
  const void* w;
  int8_t* c;
  int64_t c_stride;
  Qs8Requant rq;
};

// Depthwise: `w` per block of CB channels: CB int32 biases, CB float scales, ks rows of CB int32
// weights (baseline: the value; SIMD: the value's 16 bits zero-extended, for vpmaddwd).
struct Qs8DwTile {
  int64_t pixels, channels, ks, in_step;  // in / in_step as for F32DwTile
  const int8_t* const* in;
  const void* w;
  int8_t* out;
  int64_t out_stride;
  Qs8Requant rq;
};

// Elementwise QS8 add: out = clamp(((a - a_zp) * a_mul + (b - b_zp) * b_mul + 2^(shift-1)) >> shift
// + out_zp), all in int32 (|terms| < 2^30 by construction of the multipliers).
struct Qs8AddParams {
  int32_t a_zero_point, b_zero_point, a_mul, b_mul, shift, out_zero_point, out_min, out_max;
};

// QD8 (dynamically quantized input) fully connected tile: the input rows are int8 with a scale
// and zero point each; the weights come in groups of `group` reduction steps with a float scale
// each per output column. For column j of row i, with o the ISA's input offset:
//   acc_g = sum_{k in g} (a[i][k] + o) * w[k][j]      (exact, int32)
//   y = (sum_g float(acc_g) * scale_g[j] - (a_zp[i] + o) * zsum[j]) * a_scale[i] + bias[j]
// clamped to [min, max], where zsum[j] = sum_g float(sum_{k in g} w[k][j]) * scale_g[j].
// `w` per block of NR columns: per group, its packed int8 steps (laid out as the QS8 kernel of
// the ISA reads them) and NR float scales; then NR float biases and NR float zsums.
struct Qd8GemmTile {
  int64_t mr, nr, kc, group;
  const int8_t* const* a;
  const float* a_scale;
  const int32_t* a_zero_point;
  const void* w;
  float* c;
  int64_t c_stride;
  float min, max;
};

// The AVX-512 QD8 kernel also reads 4-bit groupwise weights kept as nibbles (half the bytes of
// the int8 layout, which is what a decode step's time goes to): per group, group / 4 steps of
// 64 bytes, byte 4 * j + r of a step holding reduction step r of column j in its low nibble and
// of column j + 16 in its high nibble, as 4-bit two's complement; then NR float scales, as in
// the int8 layout. The kernel multiplies 16 * w (the nibble moved to a byte's top), so each
// group's int32 sum is 16 times the int8 layout's, exactly; an arithmetic shift by 4 gives the
// same sum back (groups of at most kQd8NibbleMaxGroup steps keep 16 times it inside int32).
constexpr int64_t kQd8NibbleMaxGroup = int64_t(1) << 16;

// Winograd F(2x2, 3x3) transforms (nhwc_winograd.h): the 16 transformed values of a 4x4 input
// patch, kc channels, from src[16] (pixel pointers) to v + pos * pos_stride; and a 2x2 output
// tile, nc channels, from m + pos * pos_stride to dst[4] (null: outside the image), clamped.
using F32WinoInFn = void (*)(const float* const* src, int64_t kc, float* v, int64_t pos_stride);
using F32WinoOutFn = void (*)(const float* m, int64_t pos_stride, int64_t nc, float* const* dst, float lo, float hi);

constexpr Qs8Geometry kQd8Baseline{4, 8, 1, 0};
constexpr Qs8Geometry kQd8Avx2{2, 8, 8, 0};
constexpr Qs8Geometry kQd8Avx512{4, 32, 4, 0};

constexpr F32Geometry kF32Baseline{4, 8, 8};
constexpr F32Geometry kF32Avx2{6, 16, 8};
constexpr F32Geometry kF32Avx512{8, 32, 16};

constexpr Qs8Geometry kQs8Baseline{4, 8, 1, 8};
constexpr Qs8Geometry kQs8Avx2{3, 8, 8, 8};
constexpr Qs8Geometry kQs8Avx512{8, 32, 4, 16};

// What the int8 kernels of an ISA add to each input value before the products (the packer
// folds -(in_zero_point + offset) * sum(w) into the bias): vpdpbusd reads its input unsigned.
constexpr int32_t kQs8Avx512InputOffset = 128;

void f32_gemm_baseline(const F32GemmTile& t);
void f32_dw_baseline(const F32DwTile& t);
void f32_wino_in_baseline(const float* const* src, int64_t kc, float* v, int64_t pos_stride);
void f32_wino_out_baseline(const float* m, int64_t pos_stride, int64_t nc, float* const* dst, float lo, float hi);
void qs8_gemm_baseline(const Qs8GemmTile& t);
void qs8_dw_baseline(const Qs8DwTile& t);
void qs8_add_baseline(int64_t n, const int8_t* a, const int8_t* b, int8_t* out, const Qs8AddParams& p);
void qd8_gemm_baseline(const Qd8GemmTile& t);
#if defined(__GNUC__) && defined(__x86_64__)
#define ET_NHWC_X86 1
void f32_gemm_avx2(const F32GemmTile& t);
void f32_dw_avx2(const F32DwTile& t);
void f32_wino_in_avx2(const float* const* src, int64_t kc, float* v, int64_t pos_stride);
void f32_wino_out_avx2(const float* m, int64_t pos_stride, int64_t nc, float* const* dst, float lo, float hi);
void qs8_gemm_avx2(const Qs8GemmTile& t);
void qs8_dw_avx2(const Qs8DwTile& t);
void qs8_add_avx2(int64_t n, const int8_t* a, const int8_t* b, int8_t* out, const Qs8AddParams& p);
void qd8_gemm_avx2(const Qd8GemmTile& t);
void f32_gemm_avx512(const F32GemmTile& t);
void f32_gemm_blocks_avx512(const F32GemmTile& t, int64_t blocks, int64_t block_floats);
void f32_dw_avx512(const F32DwTile& t);
void f32_wino_in_avx512(const float* const* src, int64_t kc, float* v, int64_t pos_stride);
void f32_wino_out_avx512(const float* m, int64_t pos_stride, int64_t nc, float* const* dst, float lo, float hi);
void qs8_gemm_avx512(const Qs8GemmTile& t);
void qs8_dw_avx512(const Qs8DwTile& t);
void qs8_add_avx512(int64_t n, const int8_t* a, const int8_t* b, int8_t* out, const Qs8AddParams& p);
void qd8_gemm_avx512(const Qd8GemmTile& t);
void qd8_gemm_nibbles_avx512(const Qd8GemmTile& t);
// The two passes of quantize_row_qd8 (quantized.h) on AVX-512 F/BW, giving the scalar loops'
// bits: min(0, min x) and max(0, max x) of x[0:k] (zeros unsigned); then
// q = clamp(rne(x * inv) + zp, -128, 127).
void qd8_row_range_avx512(const float* x, int64_t k, float* lo, float* hi);
void qd8_row_quantize_avx512(const float* x, int64_t k, float inv, int32_t zero_point, int8_t* q);
#endif

}  // namespace ukernel
}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
