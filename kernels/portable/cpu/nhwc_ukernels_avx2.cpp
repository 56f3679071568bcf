// AVX2 float micro-kernels (this file is compiled with AVX2 and FMA enabled; the callers reach it
// only after isa.h says the CPU has them). Tails use masked loads and stores, so no access leaves
// the caller's rows.
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>

#include "kernels/portable/cpu/nhwc_ukernels.h"

namespace executorch {
namespace kernels {
namespace cpu {
namespace ukernel {
namespace {

// All-ones in the first n of eight int lanes (n clipped to [0, 8]).
inline __m256i lanes(int64_t n) {
  const int c = n < 0 ? 0 : n > 8 ? 8 : static_cast<int>(n);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// NV vectors of 8 columns per row (NV == 1 for a last block of at most 8 columns).
template <int MR, int NV>
void gemm_tile(const F32GemmTile& p) {
  constexpr int NR = kF32Avx2.nr;
  const __m256i m[2] = {lanes(p.nr), lanes(p.nr - 8)};
  const bool full = p.nr == 8 * NV;
  __m256 acc[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v)
      acc[i][v] = p.init ? _mm256_loadu_ps(p.init + 8 * v)
                         : _mm256_maskload_ps(p.c + i * p.c_stride + 8 * v, m[v]);
  const float* w = p.w;
  for (int64_t t = 0; t < p.ks; ++t) {
    const float* a[MR];
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) a[i] = p.a[t * kMaxMR + i];
    for (int64_t k = 0; k < p.kc; ++k, w += NR) {
      const __m256 b0 = _mm256_loadu_ps(w);
      const __m256 b1 = NV > 1 ? _mm256_loadu_ps(w + 8) : b0;
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) {
        const __m256 ai = _mm256_broadcast_ss(a[i] + k);
        acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
        if (NV > 1) acc[i][NV - 1] = _mm256_fmadd_ps(ai, b1, acc[i][NV - 1]);
      }
    }
  }
  const __m256 lo = _mm256_set1_ps(p.min), hi = _mm256_set1_ps(p.max);
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      const __m256 r = _mm256_min_ps(_mm256_max_ps(acc[i][v], lo), hi);
      float* c = p.c + i * p.c_stride + 8 * v;
      if (full) {
        _mm256_storeu_ps(c, r);
      } else {
        _mm256_maskstore_ps(c, m[v], r);
      }
    }
}

template <int MR>
void gemm_rows(const F32GemmTile& p) {
  if (p.nr > 8) return gemm_tile<MR, 2>(p);
  gemm_tile<MR, 1>(p);
}

template <int KS>
void dw_block(const F32DwTile& t, int64_t c0, const float* block) {
  const int64_t ks = KS > 0 ? KS : t.ks;
  const __m256i m = lanes(t.channels - c0);
  const bool full = t.channels - c0 >= 8;
  const __m256 lo = _mm256_set1_ps(t.min), hi = _mm256_set1_ps(t.max);
  const __m256 bias = _mm256_loadu_ps(block);
  __m256 w[KS > 0 ? KS : 1];
  if (KS > 0)
    for (int k = 0; k < KS; ++k) w[k] = _mm256_loadu_ps(block + 8 * (k + 1));
  for (int64_t px = 0; px < t.pixels; ++px) {
    const float* const* in = t.in + px * ks;
    __m256 acc = bias;
    if (KS > 0 && full) {
#pragma GCC unroll 16
      for (int k = 0; k < KS; ++k) acc = _mm256_fmadd_ps(_mm256_loadu_ps(in[k] + c0), w[k], acc);
    } else {
      for (int64_t k = 0; k < ks; ++k)
        acc = _mm256_fmadd_ps(_mm256_maskload_ps(in[k] + c0, m),
                              _mm256_loadu_ps(block + 8 * (k + 1)), acc);
    }
    const __m256 r = _mm256_min_ps(_mm256_max_ps(acc, lo), hi);
    float* o = t.out + px * t.out_stride + c0;
    if (full) {
      _mm256_storeu_ps(o, r);
    } else {
      _mm256_maskstore_ps(o, m, r);
    }
  }
}

}  // namespace

void f32_gemm_avx2(const F32GemmTile& t) {
  switch (t.mr) {
    case 1: return gemm_rows<1>(t);
    case 2: return gemm_rows<2>(t);
    case 3: return gemm_rows<3>(t);
    case 4: return gemm_rows<4>(t);
    case 5: return gemm_rows<5>(t);
    default: return gemm_rows<6>(t);
  }
}

void f32_dw_avx2(const F32DwTile& t) {
  const float* block = t.w;
  for (int64_t c0 = 0; c0 < t.channels; c0 += 8, block += 8 * (t.ks + 1)) {
    if (t.ks == 9) {
      dw_block<9>(t, c0, block);
    } else {
      dw_block<0>(t, c0, block);
    }
  }
}

}  // namespace ukernel
}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
#endif
