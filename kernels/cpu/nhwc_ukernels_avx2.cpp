// AVX2 float micro-kernels (this file is compiled with AVX2 and FMA enabled; the callers reach it
// only after isa.h says the CPU has them). Tails use masked loads and stores, so no access leaves
// the caller's rows.
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>

#include "kernels/cpu/nhwc_ukernels.h"

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
      acc[i][v] = p.init ? _mm256_loadu_ps(p.init + 8 * v) : _mm256_maskload_ps(p.c + i * p.c_stride + 8 * v, m[v]);
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
    const float* const* in = t.in + (t.in_step ? 0 : px * ks);
    const int64_t off = px * t.in_step;
    __m256 acc = bias;
    if (KS > 0 && full) {
#pragma GCC unroll 16
      for (int k = 0; k < KS; ++k) acc = _mm256_fmadd_ps(_mm256_loadu_ps(in[k] + off + c0), w[k], acc);
    } else {
      for (int64_t k = 0; k < ks; ++k)
        acc = _mm256_fmadd_ps(_mm256_maskload_ps(in[k] + off + c0, m), _mm256_loadu_ps(block + 8 * (k + 1)), acc);
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

// Eight input bytes from p (fewer at a row's end: the rest read as zero, times zero weights).
inline int64_t load8(const int8_t* p, int64_t n) {
  int64_t v = 0;
  if (n >= 8) {
    __builtin_memcpy(&v, p, 8);
  } else {
    for (int64_t r = 0; r < n; ++r) reinterpret_cast<int8_t*>(&v)[r] = p[r];
  }
  return v;
}

// Requantizes 8 int32 sums (see Qs8Requant) and stores the first n as bytes.
inline void requantize8(__m256i acc, __m256 scale, const Qs8Requant& rq, int8_t* out, int64_t n) {
  __m256 y = _mm256_mul_ps(_mm256_cvtepi32_ps(acc), scale);
  y = _mm256_min_ps(_mm256_max_ps(y, _mm256_set1_ps(rq.lo)), _mm256_set1_ps(rq.hi));
  const __m256i q = _mm256_add_epi32(_mm256_cvtps_epi32(y), _mm256_set1_epi32(rq.zero_point));
  const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
  const __m128i b8 = _mm_packs_epi16(w16, w16);
  if (n >= 8) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out), b8);
    return;
  }
  int8_t tmp[16];
  _mm_storeu_si128(reinterpret_cast<__m128i*>(tmp), b8);
  for (int64_t j = 0; j < n; ++j) out[j] = tmp[j];
}

// k steps of eight channels: the input's eight bytes widened to int16 in both 128-bit halves,
// against weight vectors holding channels (j, j + 4) x 8 weights; vpmaddwd leaves four partial
// sums per channel, reduced by three horizontal adds at the end.
template <int MR>
void qs8_gemm_tile(const Qs8GemmTile& p) {
  constexpr int NR = kQs8Avx2.nr;
  const int32_t* bias = static_cast<const int32_t*>(p.w);
  const float* scale = reinterpret_cast<const float*>(bias + NR);
  const int8_t* w = reinterpret_cast<const int8_t*>(scale + NR);
  __m256i acc[MR][4];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) acc[i][j] = _mm256_setzero_si256();
  for (int64_t t = 0; t < p.ks; ++t) {
    const int8_t* a[MR];
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) a[i] = p.a[t * kMaxMR + i];
    for (int64_t k = 0; k < p.kc; k += 8, w += 8 * NR) {
      const int64_t n = p.kc - k;
      __m256i va[MR];
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i)
        va[i] = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_cvtsi64_si128(load8(a[i] + k, n))));
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const __m256i vw = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 16 * j)));
#pragma GCC unroll 4
        for (int i = 0; i < MR; ++i) acc[i][j] = _mm256_add_epi32(acc[i][j], _mm256_madd_epi16(va[i], vw));
      }
    }
  }
  const __m256i vb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bias));
  const __m256 vs = _mm256_loadu_ps(scale);
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
    const __m256i s =
        _mm256_hadd_epi32(_mm256_hadd_epi32(acc[i][0], acc[i][1]), _mm256_hadd_epi32(acc[i][2], acc[i][3]));
    requantize8(_mm256_add_epi32(s, vb), vs, p.rq, p.c + i * p.c_stride, p.nr);
  }
}

#include "kernels/cpu/qs8_add_impl.h"
#include "kernels/cpu/nhwc_winograd.h"

template <int MR>
void qd8_gemm_tile(const Qd8GemmTile& p) {
  constexpr int NR = kQd8Avx2.nr;
  const char* blk = static_cast<const char*>(p.w);
  __m256 facc[MR];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) facc[i] = _mm256_setzero_ps();
  for (int64_t k0 = 0; k0 < p.kc; k0 += p.group) {
    const int64_t gk = p.kc - k0 < p.group ? p.kc - k0 : p.group;
    const int8_t* w = reinterpret_cast<const int8_t*>(blk);
    const float* scale = reinterpret_cast<const float*>(blk + (gk + 7) / 8 * 8 * NR);
    blk = reinterpret_cast<const char*>(scale + NR);
    __m256i acc[MR][4];
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) acc[i][j] = _mm256_setzero_si256();
    for (int64_t k = 0; k < gk; k += 8, w += 8 * NR) {
      __m256i va[MR];
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i)
        va[i] = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_cvtsi64_si128(load8(p.a[i] + k0 + k, gk - k))));
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const __m256i vw = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 16 * j)));
#pragma GCC unroll 4
        for (int i = 0; i < MR; ++i) acc[i][j] = _mm256_add_epi32(acc[i][j], _mm256_madd_epi16(va[i], vw));
      }
    }
    const __m256 sc = _mm256_loadu_ps(scale);
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) {
      const __m256i s =
          _mm256_hadd_epi32(_mm256_hadd_epi32(acc[i][0], acc[i][1]), _mm256_hadd_epi32(acc[i][2], acc[i][3]));
      facc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), sc, facc[i]);
    }
  }
  const __m256 bias = _mm256_loadu_ps(reinterpret_cast<const float*>(blk));
  const __m256 zsum = _mm256_loadu_ps(reinterpret_cast<const float*>(blk) + NR);
  const __m256 lo = _mm256_set1_ps(p.min), hi = _mm256_set1_ps(p.max);
  const __m256i m = lanes(p.nr);
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
    const __m256 x = _mm256_fnmadd_ps(_mm256_set1_ps(static_cast<float>(p.a_zero_point[i])), zsum, facc[i]);
    const __m256 y = _mm256_fmadd_ps(x, _mm256_set1_ps(p.a_scale[i]), bias);
    _mm256_maskstore_ps(p.c + i * p.c_stride, m, _mm256_min_ps(_mm256_max_ps(y, lo), hi));
  }
}

}  // namespace

void qd8_gemm_avx2(const Qd8GemmTile& t) {
  if (t.mr == 1) return qd8_gemm_tile<1>(t);
  qd8_gemm_tile<2>(t);
}

void qs8_gemm_avx2(const Qs8GemmTile& t) {
  switch (t.mr) {
    case 1: return qs8_gemm_tile<1>(t);
    case 2: return qs8_gemm_tile<2>(t);
    default: return qs8_gemm_tile<3>(t);
  }
}

// Per tap, eight channels' input bytes sign-extended to int32 lanes times their weights' 16 bits
// zero-extended: vpmaddwd then forms exactly x * w per lane (the high halves multiply zero).
void qs8_dw_avx2(const Qs8DwTile& t) {
  constexpr int CB = kQs8Avx2.dw_cb;
  const char* block = static_cast<const char*>(t.w);
  const int64_t block_bytes = CB * 4 * (t.ks + 2);
  for (int64_t c0 = 0; c0 < t.channels; c0 += CB, block += block_bytes) {
    const int64_t cn = t.channels - c0 < CB ? t.channels - c0 : CB;
    const int32_t* bias = reinterpret_cast<const int32_t*>(block);
    const __m256 scale = _mm256_loadu_ps(reinterpret_cast<const float*>(bias + CB));
    const int32_t* w = bias + 2 * CB;
    const __m256i vb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bias));
    for (int64_t px = 0; px < t.pixels; ++px) {
      const int8_t* const* in = t.in + (t.in_step ? 0 : px * t.ks);
      const int64_t off = px * t.in_step;
      __m256i acc = vb;
      for (int64_t k = 0; k < t.ks; ++k) {
        const __m256i x = _mm256_cvtepi8_epi32(_mm_cvtsi64_si128(load8(in[k] + off + c0, cn)));
        acc = _mm256_add_epi32(acc,
                               _mm256_madd_epi16(x, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + k * CB))));
      }
      requantize8(acc, scale, t.rq, t.out + px * t.out_stride + c0, cn);
    }
  }
}

void qs8_add_avx2(int64_t n, const int8_t* a, const int8_t* b, int8_t* out, const Qs8AddParams& p) {
  qs8_add_loop(n, a, b, out, p);
}

void f32_wino_in_avx2(const float* const* src, int64_t kc, float* v, int64_t pos_stride) {
  wino_f23_input<8>(src, kc, v, pos_stride);
}

void f32_wino_out_avx2(const float* m, int64_t pos_stride, int64_t nc, float* const* dst, float lo, float hi) {
  wino_f23_output<8>(m, pos_stride, nc, dst, lo, hi);
}

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
