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

// out[p][c] = clamp(bias[c] + sum_t in[p][t][c] * w[t][c]) for pixels p < pixels and channels
// c < channels; `in` holds pixels * ks pointers, `w` is per block of CB channels: CB biases,
// then ks rows of CB weights.
struct F32DwTile {
  int64_t pixels, channels, ks;
  const float* const* in;
  const float* w;
  float* out;
  int64_t out_stride;
  float min, max;
};

constexpr F32Geometry kF32Baseline{4, 8, 8};
constexpr F32Geometry kF32Avx2{6, 16, 8};
constexpr F32Geometry kF32Avx512{8, 32, 16};

void f32_gemm_baseline(const F32GemmTile& t);
void f32_dw_baseline(const F32DwTile& t);
#if defined(__GNUC__) && defined(__x86_64__)
#define ET_NHWC_X86 1
void f32_gemm_avx2(const F32GemmTile& t);
void f32_dw_avx2(const F32DwTile& t);
void f32_gemm_avx512(const F32GemmTile& t);
void f32_dw_avx512(const F32DwTile& t);
#endif

}  // namespace ukernel
}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
