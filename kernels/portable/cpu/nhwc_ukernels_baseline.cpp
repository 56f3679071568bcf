// Baseline float micro-kernels: plain loops over fixed-size tiles the compiler vectorizes for the
// build's target ISA (and the reference the SIMD kernels' summation order follows).
#include "kernels/portable/cpu/nhwc_ukernels.h"

namespace executorch {
namespace kernels {
namespace cpu {
namespace ukernel {
namespace {

inline float clampf(float v, float lo, float hi) {
  v = v < lo ? lo : v;
  return v > hi ? hi : v;
}

template <int MR>
void gemm_tile(const F32GemmTile& p) {
  constexpr int NR = kF32Baseline.nr;
  float acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j)
      acc[i][j] = p.init ? p.init[j] : (j < p.nr ? p.c[i * p.c_stride + j] : 0.f);
  const float* w = p.w;
  for (int64_t t = 0; t < p.ks; ++t) {
    const float* a[MR];
    for (int i = 0; i < MR; ++i) a[i] = p.a[t * kMaxMR + i];
    for (int64_t k = 0; k < p.kc; ++k, w += NR) {
      for (int i = 0; i < MR; ++i) {
        const float ai = a[i][k];
        for (int j = 0; j < NR; ++j) acc[i][j] += ai * w[j];
      }
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int64_t j = 0; j < p.nr; ++j) p.c[i * p.c_stride + j] = clampf(acc[i][j], p.min, p.max);
}

}  // namespace

void f32_gemm_baseline(const F32GemmTile& t) {
  switch (t.mr) {
    case 1: return gemm_tile<1>(t);
    case 2: return gemm_tile<2>(t);
    case 3: return gemm_tile<3>(t);
    default: return gemm_tile<4>(t);
  }
}

void f32_dw_baseline(const F32DwTile& t) {
  constexpr int CB = kF32Baseline.dw_cb;
  const float* block = t.w;
  for (int64_t c0 = 0; c0 < t.channels; c0 += CB, block += CB * (t.ks + 1)) {
    const int64_t cn = t.channels - c0 < CB ? t.channels - c0 : CB;
    for (int64_t px = 0; px < t.pixels; ++px) {
      float acc[CB];
      for (int c = 0; c < CB; ++c) acc[c] = block[c];
      const float* const* in = t.in + px * t.ks;
      if (cn == CB) {
        for (int64_t k = 0; k < t.ks; ++k) {
          const float* x = in[k] + c0;
          const float* w = block + CB * (k + 1);
          for (int c = 0; c < CB; ++c) acc[c] += x[c] * w[c];
        }
      } else {
        for (int64_t k = 0; k < t.ks; ++k) {
          const float* x = in[k] + c0;
          const float* w = block + CB * (k + 1);
          for (int64_t c = 0; c < cn; ++c) acc[c] += x[c] * w[c];
        }
      }
      float* o = t.out + px * t.out_stride + c0;
      for (int64_t c = 0; c < cn; ++c) o[c] = clampf(acc[c], t.min, t.max);
    }
  }
}

}  // namespace ukernel
}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
