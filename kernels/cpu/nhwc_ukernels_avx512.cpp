// AVX-512 float micro-kernels (this file is compiled with AVX-512 F/BW/DQ/VL and FMA enabled; the
// callers reach it only after isa.h says the CPU has them). Tails use mask registers, so no load
// or store leaves the caller's rows.
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>

// GCC 12's AVX-512 headers start some intrinsics from an undefined vector and then warn about it.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "kernels/cpu/nhwc_ukernels.h"

namespace executorch {
namespace kernels {
namespace cpu {
namespace ukernel {
namespace {

inline __mmask16 lanes(int64_t n) {
  return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

// One column block of a tile. NV vectors of 16 columns per row (NV == 1 for a last block of at
// most 16 columns). FULL tiles (all NV * 16 columns) load and store without masks: masked stores
// cost more on some cores. The tile's fields come in as values so no store can alias them.
template <int MR, int NV, bool FULL>
__attribute__((always_inline)) inline void gemm_block(const float* const* pa, const float* w, const float* init,
                                                      float* c, int64_t c_stride, int64_t nr, int64_t kc, int64_t ks,
                                                      __m512 lo, __m512 hi) {
  constexpr int NR = kF32Avx512.nr;
  const __mmask16 m[2] = {lanes(nr), lanes(nr - 16)};
  __m512 acc[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v)
      acc[i][v] = init   ? _mm512_loadu_ps(init + 16 * v)
                  : FULL ? _mm512_loadu_ps(c + i * c_stride + 16 * v)
                         : _mm512_maskz_loadu_ps(m[v], c + i * c_stride + 16 * v);
  for (int64_t t = 0; t < ks; ++t) {
    const float* a[MR];
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) a[i] = pa[t * kMaxMR + i];
    for (int64_t k = 0; k < kc; ++k, w += NR) {
      const __m512 b0 = _mm512_loadu_ps(w);
      const __m512 b1 = NV > 1 ? _mm512_loadu_ps(w + 16) : b0;
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) {
        const __m512 ai = _mm512_set1_ps(a[i][k]);
        acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
        if (NV > 1) acc[i][NV - 1] = _mm512_fmadd_ps(ai, b1, acc[i][NV - 1]);
      }
    }
  }
  // Without this the compiler keeps the rows' output addresses (also read above, when init is
  // null) live across the loop, spilling the weight vectors: 1.7x slower tiles.
  asm("" : "+r"(c), "+r"(c_stride));
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      const __m512 r = _mm512_min_ps(_mm512_max_ps(acc[i][v], lo), hi);
      if (FULL) {
        _mm512_storeu_ps(c + i * c_stride + 16 * v, r);
      } else {
        _mm512_mask_storeu_ps(c + i * c_stride + 16 * v, m[v], r);
      }
    }
}

// MR rows over `blocks` consecutive column blocks, one after the other with the same row
// pointers (one call per tile instead of one per block: with a short reduction, the call and
// the tile's set-up cost as much as its FMAs).
// One block as its own function, for single-block calls: they skip the larger prologues of
// gemm_rows and f32_gemm_blocks_avx512 (MobileNetV2's 32 -> 16 pointwise layer 0.150 -> 0.133 ms).
template <int MR, int NV, bool FULL>
void gemm_tile(const F32GemmTile& p) {
  gemm_block<MR, NV, FULL>(p.a, p.w, p.init, p.c, p.c_stride, p.nr, p.kc, p.ks, _mm512_set1_ps(p.min),
                           _mm512_set1_ps(p.max));
}

template <int MR>
void gemm_one(const F32GemmTile& p) {
  if (p.nr >= kF32Avx512.nr) return gemm_tile<MR, 2, true>(p);
  if (p.nr > 16) return gemm_tile<MR, 2, false>(p);
  if (p.nr == 16) return gemm_tile<MR, 1, true>(p);
  gemm_tile<MR, 1, false>(p);
}

template <int MR>
void gemm_rows(const F32GemmTile& p, int64_t blocks, int64_t block_floats) {
  constexpr int NR = kF32Avx512.nr;
  const float* const* a = p.a;
  const int64_t kc = p.kc, ks = p.ks, c_stride = p.c_stride;
  const __m512 lo = _mm512_set1_ps(p.min), hi = _mm512_set1_ps(p.max);
  const float* w = p.w;
  const float* init = p.init;
  float* c = p.c;
  for (int64_t b = 0; b < blocks; ++b, w += block_floats, c += NR) {
    const int64_t nr = p.nr - b * NR;
    if (nr >= NR) {
      gemm_block<MR, 2, true>(a, w, init, c, c_stride, nr, kc, ks, lo, hi);
    } else if (nr > 16) {
      gemm_block<MR, 2, false>(a, w, init, c, c_stride, nr, kc, ks, lo, hi);
    } else if (nr == 16) {
      gemm_block<MR, 1, true>(a, w, init, c, c_stride, nr, kc, ks, lo, hi);
    } else {
      gemm_block<MR, 1, false>(a, w, init, c, c_stride, nr, kc, ks, lo, hi);
    }
    if (init) init += block_floats;
  }
}

// NB column blocks of one row at once: 2 * NB independent FMA chains instead of 2.
template <int NB>
void gemm_row_group(const F32GemmTile& p, int64_t block_floats) {
  constexpr int NR = kF32Avx512.nr;
  __mmask16 m[NB][2];
  __m512 acc[NB][2];
#pragma GCC unroll 4
  for (int j = 0; j < NB; ++j)
#pragma GCC unroll 2
    for (int v = 0; v < 2; ++v) {
      m[j][v] = lanes(p.nr - NR * j - 16 * v);
      acc[j][v] = p.init ? _mm512_loadu_ps(p.init + j * block_floats + 16 * v)
                         : _mm512_maskz_loadu_ps(m[j][v], p.c + NR * j + 16 * v);
    }
  int64_t off = 0;  // weights of block j for step (t, k) at p.w + j * block_floats + off
  for (int64_t t = 0; t < p.ks; ++t) {
    const float* a = p.a[t * kMaxMR];
    for (int64_t k = 0; k < p.kc; ++k, off += NR) {
      const __m512 x = _mm512_set1_ps(a[k]);
#pragma GCC unroll 4
      for (int j = 0; j < NB; ++j) {
        const float* w = p.w + j * block_floats + off;
        acc[j][0] = _mm512_fmadd_ps(x, _mm512_loadu_ps(w), acc[j][0]);
        acc[j][1] = _mm512_fmadd_ps(x, _mm512_loadu_ps(w + 16), acc[j][1]);
      }
    }
  }
  const __m512 lo = _mm512_set1_ps(p.min), hi = _mm512_set1_ps(p.max);
  const bool full = p.nr >= NR * NB;
#pragma GCC unroll 4
  for (int j = 0; j < NB; ++j)
#pragma GCC unroll 2
    for (int v = 0; v < 2; ++v) {
      const __m512 r = _mm512_min_ps(_mm512_max_ps(acc[j][v], lo), hi);
      if (full) {
        _mm512_storeu_ps(p.c + NR * j + 16 * v, r);
      } else {
        _mm512_mask_storeu_ps(p.c + NR * j + 16 * v, m[j][v], r);
      }
    }
}

// KS taps known at compile time keep the block's weights in registers across pixels. P pixels
// go at once so their FMA chains overlap (each pixel still sums its taps in order).
// An input vector of a block: FULL blocks load without a mask.
template <bool FULL>
inline __m512 dw_load(__mmask16 m, const float* p) {
  return FULL ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(m, p);
}

template <int KS, int P, bool FULL>
void dw_block(const F32DwTile& t, int64_t c0, __mmask16 m, const float* block) {
  const int64_t ks = KS > 0 ? KS : t.ks;
  const __m512 lo = _mm512_set1_ps(t.min), hi = _mm512_set1_ps(t.max);
  const __m512 bias = _mm512_loadu_ps(block);
  __m512 w[KS > 0 ? KS : 1];
  if (KS > 0)
    for (int k = 0; k < KS; ++k) w[k] = _mm512_loadu_ps(block + 16 * (k + 1));
  int64_t px = 0;
  for (; px + P <= t.pixels; px += P) {
    const float* const* in = t.in + (t.in_step ? 0 : px * ks);
    const int64_t qs = t.in_step ? 0 : ks, off = px * t.in_step;
    __m512 acc[P];
#pragma GCC unroll 4
    for (int q = 0; q < P; ++q) acc[q] = bias;
#pragma GCC unroll 32
    for (int64_t k = 0; k < ks; ++k) {
      const __m512 wk = KS > 0 ? w[KS > 0 ? k : 0] : _mm512_loadu_ps(block + 16 * (k + 1));
#pragma GCC unroll 4
      for (int q = 0; q < P; ++q)
        acc[q] = _mm512_fmadd_ps(dw_load<FULL>(m, in[q * qs + k] + off + q * t.in_step + c0), wk, acc[q]);
    }
#pragma GCC unroll 4
    for (int q = 0; q < P; ++q) {
      const __m512 r = _mm512_min_ps(_mm512_max_ps(acc[q], lo), hi);
      if (FULL) {
        _mm512_storeu_ps(t.out + (px + q) * t.out_stride + c0, r);
      } else {
        _mm512_mask_storeu_ps(t.out + (px + q) * t.out_stride + c0, m, r);
      }
    }
  }
  for (; px < t.pixels; ++px) {
    const float* const* in = t.in + (t.in_step ? 0 : px * ks);
    const int64_t off = px * t.in_step;
    __m512 acc = bias;
    for (int64_t k = 0; k < ks; ++k)
      acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, in[k] + off + c0), _mm512_loadu_ps(block + 16 * (k + 1)), acc);
    _mm512_mask_storeu_ps(t.out + px * t.out_stride + c0, m, _mm512_min_ps(_mm512_max_ps(acc, lo), hi));
  }
}

// Pixel-major order for rows of several channel blocks: P pixels at a time go through every
// block (the weights, reloaded per group, come from L1), so the input rows and the output are
// read and written in address order, which the hardware prefetchers follow; the block-major
// order above strides by the pixel size and, on layers whose input comes from L3, waits on it.
// Each output element is summed exactly as in dw_block (bias, then taps in order).
// Channels [c0, c0 + 16) of pixels [px, px + P): FULL blocks load and store without a mask.
template <int KS, int P, bool FULL>
__attribute__((always_inline)) inline void dw_group_block(const float* (&in)[P][KS], float* out, int64_t out_stride,
                                                          const float* block, int64_t c0, __mmask16 m, __m512 lo,
                                                          __m512 hi) {
  __m512 acc[P];
  const __m512 bias = _mm512_loadu_ps(block);
#pragma GCC unroll 4
  for (int q = 0; q < P; ++q) acc[q] = bias;
#pragma GCC unroll 9
  for (int k = 0; k < KS; ++k) {
    const __m512 wk = _mm512_loadu_ps(block + 16 * (k + 1));
#pragma GCC unroll 4
    for (int q = 0; q < P; ++q) acc[q] = _mm512_fmadd_ps(dw_load<FULL>(m, in[q][k] + c0), wk, acc[q]);
  }
#pragma GCC unroll 4
  for (int q = 0; q < P; ++q) {
    const __m512 r = _mm512_min_ps(_mm512_max_ps(acc[q], lo), hi);
    if (FULL) {
      _mm512_storeu_ps(out + q * out_stride + c0, r);
    } else {
      _mm512_mask_storeu_ps(out + q * out_stride + c0, m, r);
    }
  }
}

// Pixels [px, px + P) through every block.
template <int KS, int P>
__attribute__((always_inline)) inline void dw_group(const F32DwTile& t, int64_t px, __m512 lo, __m512 hi) {
  const int64_t full = t.channels / 16 * 16, step = t.in_step;
  const float* in[P][KS];
#pragma GCC unroll 4
  for (int q = 0; q < P; ++q)
#pragma GCC unroll 9
    for (int k = 0; k < KS; ++k) in[q][k] = step ? t.in[k] + (px + q) * step : t.in[(px + q) * KS + k];
  float* out = t.out + px * t.out_stride;
  const float* block = t.w;
  int64_t c0 = 0;
  for (; c0 < full; c0 += 16, block += 16 * (KS + 1))
    dw_group_block<KS, P, true>(in, out, t.out_stride, block, c0, 0xffff, lo, hi);
  if (c0 < t.channels) dw_group_block<KS, P, false>(in, out, t.out_stride, block, c0, lanes(t.channels - c0), lo, hi);
}

template <int KS, int P>
void dw_pixels(const F32DwTile& t) {
  const __m512 lo = _mm512_set1_ps(t.min), hi = _mm512_set1_ps(t.max);
  int64_t px = 0;
  for (; px + P <= t.pixels; px += P) dw_group<KS, P>(t, px, lo, hi);
  for (; px < t.pixels; ++px) dw_group<KS, 1>(t, px, lo, hi);
}

// Four input bytes from p (fewer at a row's end: the rest read as zero, times zero weights).
inline int32_t load4(const int8_t* p, int64_t n) {
  if (n >= 4) {
    int32_t v;
    __builtin_memcpy(&v, p, 4);
    return v;
  }
  // A masked load: bytes past n are neither read (no fault) nor kept.
  return _mm_cvtsi128_si32(_mm_maskz_loadu_epi8(static_cast<__mmask16>((1u << n) - 1), p));
}

// Requantizes 16 int32 sums to int8 (see Qs8Requant); cvtps rounds to nearest-even.
inline __m128i requantize16(__m512i acc, __m512 scale, const Qs8Requant& rq) {
  __m512 y = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), scale);
  y = _mm512_min_ps(_mm512_max_ps(y, _mm512_set1_ps(rq.lo)), _mm512_set1_ps(rq.hi));
  const __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(y), _mm512_set1_epi32(rq.zero_point));
  return _mm512_cvtepi32_epi8(q);
}

// vpdpbusd over k steps of four channels: the input bytes (flipped to unsigned by adding 128,
// which the packed bias undoes) broadcast against 16 output channels x 4 weights per vector.
// Sixteen int8 outputs; FULL stores without a mask (see gemm_block).
template <bool FULL>
inline void store16(int8_t* c, __mmask16 m, __m128i q) {
  if (FULL) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(c), q);
  } else {
    _mm_mask_storeu_epi8(c, m, q);
  }
}

template <int MR, int NV, bool FULL>
void qs8_gemm_tile(const Qs8GemmTile& p) {
  constexpr int NR = kQs8Avx512.nr;
  const int32_t* bias = static_cast<const int32_t*>(p.w);
  const float* scale = reinterpret_cast<const float*>(bias + NR);
  const int8_t* w = reinterpret_cast<const int8_t*>(scale + NR);
  const __mmask16 m[2] = {lanes(p.nr), lanes(p.nr - 16)};
  __m512i acc[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_loadu_si512(bias + 16 * v);
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const int64_t steps = p.kc / 4, rem = p.kc % 4;
  for (int64_t t = 0; t < p.ks; ++t) {
    const int8_t* a[MR];
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) a[i] = p.a[t * kMaxMR + i];
    for (int64_t s = 0; s < steps; ++s, w += 4 * NR) {
      const __m512i b0 = _mm512_loadu_si512(w);
      const __m512i b1 = NV > 1 ? _mm512_loadu_si512(w + 64) : b0;
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) {
        int32_t v;
        __builtin_memcpy(&v, a[i] + 4 * s, 4);
        const __m512i ai = _mm512_xor_si512(_mm512_set1_epi32(v), flip);
        acc[i][0] = _mm512_dpbusd_epi32(acc[i][0], ai, b0);
        if (NV > 1) acc[i][NV - 1] = _mm512_dpbusd_epi32(acc[i][NV - 1], ai, b1);
      }
    }
    if (rem != 0) {
      const __m512i b0 = _mm512_loadu_si512(w);
      const __m512i b1 = NV > 1 ? _mm512_loadu_si512(w + 64) : b0;
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) {
        const __m512i ai = _mm512_xor_si512(_mm512_set1_epi32(load4(a[i] + 4 * steps, rem)), flip);
        acc[i][0] = _mm512_dpbusd_epi32(acc[i][0], ai, b0);
        if (NV > 1) acc[i][NV - 1] = _mm512_dpbusd_epi32(acc[i][NV - 1], ai, b1);
      }
      w += 4 * NR;
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v)
      store16<FULL>(p.c + i * p.c_stride + 16 * v, m[v],
                    requantize16(acc[i][v], _mm512_loadu_ps(scale + 16 * v), p.rq));
}

template <int MR>
void qs8_gemm_rows(const Qs8GemmTile& p) {
  if (p.nr == 32) return qs8_gemm_tile<MR, 2, true>(p);
  if (p.nr > 16) return qs8_gemm_tile<MR, 2, false>(p);
  if (p.nr == 16) return qs8_gemm_tile<MR, 1, true>(p);
  qs8_gemm_tile<MR, 1, false>(p);
}

#include "kernels/cpu/qs8_add_impl.h"
#include "kernels/cpu/nhwc_winograd.h"

template <int MR, int NV>
void qd8_gemm_tile(const Qd8GemmTile& p) {
  constexpr int NR = kQd8Avx512.nr;
  const char* blk = static_cast<const char*>(p.w);
  const __mmask16 m[2] = {lanes(p.nr), lanes(p.nr - 16)};
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512 facc[MR][NV];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) facc[i][v] = _mm512_setzero_ps();
  for (int64_t k0 = 0; k0 < p.kc; k0 += p.group) {
    const int64_t gk = p.kc - k0 < p.group ? p.kc - k0 : p.group;
    const int64_t steps = gk / 4, rem = gk % 4;
    const int8_t* w = reinterpret_cast<const int8_t*>(blk);
    const float* scale = reinterpret_cast<const float*>(blk + (steps + (rem != 0)) * 4 * NR);
    blk = reinterpret_cast<const char*>(scale + NR);
    __m512i acc[MR][NV];
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_si512();
    for (int64_t s = 0; s < steps; ++s, w += 4 * NR) {
      const __m512i b0 = _mm512_loadu_si512(w);
      const __m512i b1 = NV > 1 ? _mm512_loadu_si512(w + 64) : b0;
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) {
        int32_t v;
        __builtin_memcpy(&v, p.a[i] + k0 + 4 * s, 4);
        const __m512i ai = _mm512_xor_si512(_mm512_set1_epi32(v), flip);
        acc[i][0] = _mm512_dpbusd_epi32(acc[i][0], ai, b0);
        if (NV > 1) acc[i][NV - 1] = _mm512_dpbusd_epi32(acc[i][NV - 1], ai, b1);
      }
    }
    if (rem != 0) {
      const __m512i b0 = _mm512_loadu_si512(w);
      const __m512i b1 = NV > 1 ? _mm512_loadu_si512(w + 64) : b0;
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) {
        const __m512i ai = _mm512_xor_si512(_mm512_set1_epi32(load4(p.a[i] + k0 + 4 * steps, rem)), flip);
        acc[i][0] = _mm512_dpbusd_epi32(acc[i][0], ai, b0);
        if (NV > 1) acc[i][NV - 1] = _mm512_dpbusd_epi32(acc[i][NV - 1], ai, b1);
      }
    }
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      const __m512 sc = _mm512_loadu_ps(scale + 16 * v);
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) facc[i][v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[i][v]), sc, facc[i][v]);
    }
  }
  const float* bias = reinterpret_cast<const float*>(blk);
  const float* zsum = bias + NR;
  const __m512 lo = _mm512_set1_ps(p.min), hi = _mm512_set1_ps(p.max);
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
    // The kernel read a + 128, so the zero point to remove is zp + 128.
    const __m512 zp = _mm512_set1_ps(static_cast<float>(p.a_zero_point[i] + kQs8Avx512InputOffset));
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      const __m512 x = _mm512_fnmadd_ps(zp, _mm512_loadu_ps(zsum + 16 * v), facc[i][v]);
      const __m512 y = _mm512_fmadd_ps(x, _mm512_set1_ps(p.a_scale[i]), _mm512_loadu_ps(bias + 16 * v));
      _mm512_mask_storeu_ps(p.c + i * p.c_stride + 16 * v, m[v], _mm512_min_ps(_mm512_max_ps(y, lo), hi));
    }
  }
}

template <int MR>
void qd8_gemm_rows(const Qd8GemmTile& p) {
  if (p.nr > 16) return qd8_gemm_tile<MR, 2>(p);
  qd8_gemm_tile<MR, 1>(p);
}

// The nibble layout (see kQd8NibbleMaxGroup): one 64-byte load holds a step of both halves of the
// block. The low nibbles shifted up and the high nibbles masked in place are bytes of 16 * w,
// signed as vpdpbusd reads its second operand. With few rows, U sets of accumulators take
// alternate steps so more vpdpbusd chains overlap; integer sums are exact, so this changes no bit.
template <int MR, int NV>
void qd8_gemm_nibble_tile(const Qd8GemmTile& p) {
  constexpr int NR = kQd8Avx512.nr;
  constexpr int U = MR <= 2 ? 2 : 1;
  const char* blk = static_cast<const char*>(p.w);
  const __mmask16 m[2] = {lanes(p.nr), lanes(p.nr - 16)};
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i top = _mm512_set1_epi8(static_cast<char>(0xf0));
  __m512 facc[MR][NV];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) facc[i][v] = _mm512_setzero_ps();
  for (int64_t k0 = 0; k0 < p.kc; k0 += p.group) {
    const int64_t steps = p.group / 4;  // the packer takes this layout only for whole steps
    const uint8_t* w = reinterpret_cast<const uint8_t*>(blk);
    const float* scale = reinterpret_cast<const float*>(blk + steps * 64);
    blk = reinterpret_cast<const char*>(scale + NR);
    __m512i acc[U][MR][NV];
#pragma GCC unroll 2
    for (int u = 0; u < U; ++u)
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
        for (int v = 0; v < NV; ++v) acc[u][i][v] = _mm512_setzero_si512();
    int64_t s = 0;
    for (; s + U <= steps; s += U) {
#pragma GCC unroll 2
      for (int u = 0; u < U; ++u) {
        const __m512i raw = _mm512_loadu_si512(w + 64 * (s + u));
        const __m512i b0 = _mm512_and_si512(_mm512_slli_epi16(raw, 4), top);
        const __m512i b1 = _mm512_and_si512(raw, top);
#pragma GCC unroll 4
        for (int i = 0; i < MR; ++i) {
          int32_t x;
          __builtin_memcpy(&x, p.a[i] + k0 + 4 * (s + u), 4);
          const __m512i ai = _mm512_xor_si512(_mm512_set1_epi32(x), flip);
          acc[u][i][0] = _mm512_dpbusd_epi32(acc[u][i][0], ai, b0);
          if (NV > 1) acc[u][i][NV - 1] = _mm512_dpbusd_epi32(acc[u][i][NV - 1], ai, b1);
        }
      }
    }
    for (; s < steps; ++s) {
      const __m512i raw = _mm512_loadu_si512(w + 64 * s);
      const __m512i b0 = _mm512_and_si512(_mm512_slli_epi16(raw, 4), top);
      const __m512i b1 = _mm512_and_si512(raw, top);
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) {
        int32_t x;
        __builtin_memcpy(&x, p.a[i] + k0 + 4 * s, 4);
        const __m512i ai = _mm512_xor_si512(_mm512_set1_epi32(x), flip);
        acc[0][i][0] = _mm512_dpbusd_epi32(acc[0][i][0], ai, b0);
        if (NV > 1) acc[0][i][NV - 1] = _mm512_dpbusd_epi32(acc[0][i][NV - 1], ai, b1);
      }
    }
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      const __m512 sc = _mm512_loadu_ps(scale + 16 * v);
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) {
        __m512i sum = acc[0][i][v];
        if (U > 1) sum = _mm512_add_epi32(sum, acc[U - 1][i][v]);
        sum = _mm512_srai_epi32(sum, 4);  // exact: every product was a multiple of 16
        facc[i][v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), sc, facc[i][v]);
      }
    }
  }
  const float* bias = reinterpret_cast<const float*>(blk);
  const float* zsum = bias + NR;
  const __m512 lo = _mm512_set1_ps(p.min), hi = _mm512_set1_ps(p.max);
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
    const __m512 zp = _mm512_set1_ps(static_cast<float>(p.a_zero_point[i] + kQs8Avx512InputOffset));
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      const __m512 x = _mm512_fnmadd_ps(zp, _mm512_loadu_ps(zsum + 16 * v), facc[i][v]);
      const __m512 y = _mm512_fmadd_ps(x, _mm512_set1_ps(p.a_scale[i]), _mm512_loadu_ps(bias + 16 * v));
      _mm512_mask_storeu_ps(p.c + i * p.c_stride + 16 * v, m[v], _mm512_min_ps(_mm512_max_ps(y, lo), hi));
    }
  }
}

template <int MR>
void qd8_gemm_nibble_rows(const Qd8GemmTile& p) {
  if (p.nr > 16) return qd8_gemm_nibble_tile<MR, 2>(p);
  qd8_gemm_nibble_tile<MR, 1>(p);
}

}  // namespace

void qd8_gemm_avx512(const Qd8GemmTile& t) {
  switch (t.mr) {
    case 1: return qd8_gemm_rows<1>(t);
    case 2: return qd8_gemm_rows<2>(t);
    case 3: return qd8_gemm_rows<3>(t);
    default: return qd8_gemm_rows<4>(t);
  }
}

void qd8_gemm_nibbles_avx512(const Qd8GemmTile& t) {
  switch (t.mr) {
    case 1: return qd8_gemm_nibble_rows<1>(t);
    case 2: return qd8_gemm_nibble_rows<2>(t);
    case 3: return qd8_gemm_nibble_rows<3>(t);
    default: return qd8_gemm_nibble_rows<4>(t);
  }
}

void qd8_row_range_avx512(const float* x, int64_t k, float* lo, float* hi) {
  __m512 vlo = _mm512_setzero_ps(), vhi = _mm512_setzero_ps();
  for (int64_t i = 0; i < k; i += 16) {
    const __m512 v = _mm512_maskz_loadu_ps(lanes(k - i), x + i);  // masked-off lanes read 0
    vlo = _mm512_min_ps(vlo, v);
    vhi = _mm512_max_ps(vhi, v);
  }
  // + 0 turns a -0 the vector min/max may keep into the +0 the scalar loop starts from.
  *lo = _mm512_reduce_min_ps(vlo) + 0.f;
  *hi = _mm512_reduce_max_ps(vhi) + 0.f;
}

void qd8_row_quantize_avx512(const float* x, int64_t k, float inv, int32_t zero_point, int8_t* q) {
  const __m512 vinv = _mm512_set1_ps(inv), vzp = _mm512_set1_ps(static_cast<float>(zero_point));
  const __m512 qlo = _mm512_set1_ps(-128.f), qhi = _mm512_set1_ps(127.f);
  for (int64_t i = 0; i < k; i += 16) {
    const __mmask16 m = lanes(k - i);
    const __m512 y = _mm512_roundscale_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vinv),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 c = _mm512_min_ps(qhi, _mm512_max_ps(qlo, _mm512_add_ps(y, vzp)));
    _mm_mask_storeu_epi8(q + i, m, _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(c)));
  }
}

void qs8_gemm_avx512(const Qs8GemmTile& t) {
  switch (t.mr) {
    case 1: return qs8_gemm_rows<1>(t);
    case 2: return qs8_gemm_rows<2>(t);
    case 3: return qs8_gemm_rows<3>(t);
    case 4: return qs8_gemm_rows<4>(t);
    case 5: return qs8_gemm_rows<5>(t);
    case 6: return qs8_gemm_rows<6>(t);
    case 7: return qs8_gemm_rows<7>(t);
    default: return qs8_gemm_rows<8>(t);
  }
}

// Per tap, 16 channels' input bytes sign-extended to int32 lanes times their weights' 16 bits
// zero-extended: vpdpwssd then adds exactly x * w per lane (the high halves multiply zero).
// As for floats, KS known at compile time keeps the weights in registers, and P pixels overlap.
// Sixteen input bytes of a depthwise block; FULL loads without a mask.
template <bool FULL>
inline __m128i load16(__mmask16 m, const int8_t* p) {
  return FULL ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)) : _mm_maskz_loadu_epi8(m, p);
}

template <int KS, int P, bool FULL>
static void qs8_dw_block(const Qs8DwTile& t, int64_t c0, __mmask16 m, const int32_t* bias) {
  constexpr int CB = kQs8Avx512.dw_cb;
  const int64_t ks = KS > 0 ? KS : t.ks;
  const __m512 scale = _mm512_loadu_ps(reinterpret_cast<const float*>(bias + CB));
  const int32_t* wp = bias + 2 * CB;
  const __m512i vb = _mm512_loadu_si512(bias);
  __m512i w[KS > 0 ? KS : 1];
  if (KS > 0)
    for (int k = 0; k < KS; ++k) w[k] = _mm512_loadu_si512(wp + k * CB);
  int64_t px = 0;
  for (; px + P <= t.pixels; px += P) {
    const int8_t* const* in = t.in + (t.in_step ? 0 : px * ks);
    const int64_t qs = t.in_step ? 0 : ks, off = px * t.in_step;
    __m512i acc[P];
#pragma GCC unroll 4
    for (int q = 0; q < P; ++q) acc[q] = vb;
#pragma GCC unroll 32
    for (int64_t k = 0; k < ks; ++k) {
      const __m512i wk = KS > 0 ? w[KS > 0 ? k : 0] : _mm512_loadu_si512(wp + k * CB);
#pragma GCC unroll 4
      for (int q = 0; q < P; ++q)
        acc[q] = _mm512_dpwssd_epi32(
            acc[q], _mm512_cvtepi8_epi32(load16<FULL>(m, in[q * qs + k] + off + q * t.in_step + c0)), wk);
    }
#pragma GCC unroll 4
    for (int q = 0; q < P; ++q)
      store16<FULL>(t.out + (px + q) * t.out_stride + c0, m, requantize16(acc[q], scale, t.rq));
  }
  for (; px < t.pixels; ++px) {
    const int8_t* const* in = t.in + (t.in_step ? 0 : px * ks);
    const int64_t off = px * t.in_step;
    __m512i acc = vb;
    for (int64_t k = 0; k < ks; ++k)
      acc = _mm512_dpwssd_epi32(acc, _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, in[k] + off + c0)),
                                _mm512_loadu_si512(wp + k * CB));
    _mm_mask_storeu_epi8(t.out + px * t.out_stride + c0, m, requantize16(acc, scale, t.rq));
  }
}

void qs8_dw_avx512(const Qs8DwTile& t) {
  constexpr int CB = kQs8Avx512.dw_cb;
  const char* block = static_cast<const char*>(t.w);
  const int64_t block_bytes = CB * 4 * (t.ks + 2);
  for (int64_t c0 = 0; c0 < t.channels; c0 += CB, block += block_bytes) {
    const __mmask16 m = lanes(t.channels - c0);
    const int32_t* bias = reinterpret_cast<const int32_t*>(block);
    if (t.channels - c0 >= CB) {
      switch (t.ks) {
        case 9: qs8_dw_block<9, 4, true>(t, c0, m, bias); break;
        case 25: qs8_dw_block<25, 2, true>(t, c0, m, bias); break;
        default: qs8_dw_block<0, 4, true>(t, c0, m, bias); break;
      }
    } else {
      switch (t.ks) {
        case 9: qs8_dw_block<9, 4, false>(t, c0, m, bias); break;
        case 25: qs8_dw_block<25, 2, false>(t, c0, m, bias); break;
        default: qs8_dw_block<0, 4, false>(t, c0, m, bias); break;
      }
    }
  }
}

void qs8_add_avx512(int64_t n, const int8_t* a, const int8_t* b, int8_t* out, const Qs8AddParams& p) {
  qs8_add_loop(n, a, b, out, p);
}

void f32_wino_in_avx512(const float* const* src, int64_t kc, float* v, int64_t pos_stride) {
  wino_f23_input<16>(src, kc, v, pos_stride);
}

void f32_wino_out_avx512(const float* m, int64_t pos_stride, int64_t nc, float* const* dst, float lo, float hi) {
  wino_f23_output<16>(m, pos_stride, nc, dst, lo, hi);
}

void f32_gemm_avx512(const F32GemmTile& t) {
  switch (t.mr) {
    case 1: return f32_gemm_blocks_avx512(t, 1, 0);
    case 2: return gemm_one<2>(t);
    case 3: return gemm_one<3>(t);
    case 4: return gemm_one<4>(t);
    case 5: return gemm_one<5>(t);
    case 6: return gemm_one<6>(t);
    case 7: return gemm_one<7>(t);
    default: return gemm_one<8>(t);
  }
}

void f32_gemm_blocks_avx512(const F32GemmTile& t, int64_t blocks, int64_t block_floats) {
  constexpr int NR = kF32Avx512.nr;
  switch (t.mr) {
    case 1: break;
    case 2: return gemm_rows<2>(t, blocks, block_floats);
    case 3: return gemm_rows<3>(t, blocks, block_floats);
    case 4: return gemm_rows<4>(t, blocks, block_floats);
    case 5: return gemm_rows<5>(t, blocks, block_floats);
    case 6: return gemm_rows<6>(t, blocks, block_floats);
    case 7: return gemm_rows<7>(t, blocks, block_floats);
    default: return gemm_rows<8>(t, blocks, block_floats);
  }
  for (int64_t b = 0; b < blocks; b += 4) {
    F32GemmTile p = t;
    p.w += b * block_floats;
    if (p.init) p.init += b * block_floats;
    p.c += b * NR;
    p.nr -= b * NR;
    switch (blocks - b) {
      case 1: gemm_row_group<1>(p, block_floats); break;
      case 2: gemm_row_group<2>(p, block_floats); break;
      case 3: gemm_row_group<3>(p, block_floats); break;
      default: gemm_row_group<4>(p, block_floats); break;
    }
  }
}

void f32_dw_avx512(const F32DwTile& t) {
  if (t.ks == 9 && t.channels > 16) return dw_pixels<9, 4>(t);
  const float* block = t.w;
  for (int64_t c0 = 0; c0 < t.channels; c0 += 16, block += 16 * (t.ks + 1)) {
    const __mmask16 m = lanes(t.channels - c0);
    if (t.channels - c0 >= 16) {
      switch (t.ks) {
        case 9: dw_block<9, 4, true>(t, c0, m, block); break;
        case 25: dw_block<25, 2, true>(t, c0, m, block); break;
        default: dw_block<0, 4, true>(t, c0, m, block); break;
      }
    } else {
      switch (t.ks) {
        case 9: dw_block<9, 4, false>(t, c0, m, block); break;
        case 25: dw_block<25, 2, false>(t, c0, m, block); break;
        default: dw_block<0, 4, false>(t, c0, m, block); break;
      }
    }
  }
}

}  // namespace ukernel
}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
#endif
