// Goto-style blocked GEMM: pack panels of B (and of A unless the kernel reads it in place), then
// run a register-tiled micro-kernel: AVX2/FMA intrinsics on x86 (picked at run time, so the
// library targets the baseline ISA), NEON intrinsics on aarch64 (where NEON is the baseline, so
// chosen at build time), compiler-vectorized loops for the baseline and AVX-512 builds.
#include "kernels/cpu/gemm.h"

#include <algorithm>
#include <type_traits>

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#include <immintrin.h>
#endif
#if defined(__aarch64__) && defined(__ARM_NEON)
#define ET_GEMM_NEON 1
#include <arm_neon.h>
#endif

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vectorize.h"

namespace executorch {
namespace kernels {
namespace cpu {
namespace {

// Cache blocking: a KC x NR sliver of B stays in L1, an MC x KC block of A in L2,
// a KC x NC panel of B in L3.
constexpr int64_t kMC = 144;
constexpr int64_t kKC = 256;
constexpr int64_t kNC = 2048;
// Packed sizes round up to multiples every micro-kernel tile divides.
constexpr int64_t kRowQuantum = 24;
constexpr int64_t kColQuantum = 32;

// Rows of A packed at once: one such panel (x KC) is the A scratch, whatever m is.
constexpr int64_t kMP = 1536;
// Columns of one compute task before splitting for more threads.
constexpr int64_t kNB = 512;
// Below this many multiply-adds per k-block a product runs on one thread: waking the pool
// would cost more than it saves.
constexpr int64_t kParallelMacs = int64_t(1) << 18;

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }
int64_t ceil_div(int64_t x, int64_t y) { return (x + y - 1) / y; }

// Element (i, j) of `m`'s storage type T, widened to float.
template <typename T>
ET_ALWAYS_INLINE float at(const T* base, int64_t off) {
  return to_float(base[off]);
}

// `m` moved to start at element (i, j).
ConstMatrix sub(ConstMatrix m, int64_t i, int64_t j) {
  const int64_t off = i * m.row_stride + j * m.col_stride;
  const size_t es = m.elem == Elem::kF32 ? sizeof(float) : sizeof(uint16_t);
  m.data = static_cast<const char*>(m.data) + off * static_cast<int64_t>(es);
  return m;
}

// Packs A[0:mc, 0:kc] as MR-row slivers, each stored k-major; rows past mc are zero.
template <int MR, typename T>
void pack_a_as(int64_t mc, int64_t kc, ConstMatrix a, float* dst) {
  const T* base = static_cast<const T*>(a.data);
  for (int64_t i0 = 0; i0 < mc; i0 += MR) {
    const int64_t rows = std::min<int64_t>(MR, mc - i0);
    for (int64_t p = 0; p < kc; ++p) {
      const T* src = base + i0 * a.row_stride + p * a.col_stride;
      for (int64_t i = 0; i < rows; ++i) dst[i] = at(src, i * a.row_stride);
      for (int64_t i = rows; i < MR; ++i) dst[i] = 0.f;
      dst += MR;
    }
  }
}

// Packs B[0:kc, 0:nc] as NR-column slivers, each stored k-major; columns past nc are zero.
template <int NR, typename T>
void pack_b_as(int64_t kc, int64_t nc, ConstMatrix b, float* dst) {
  const T* base = static_cast<const T*>(b.data);
  for (int64_t j0 = 0; j0 < nc; j0 += NR) {
    const int64_t cols = std::min<int64_t>(NR, nc - j0);
    if (cols == NR && b.col_stride == 1) {
      for (int64_t p = 0; p < kc; ++p) {
        const T* src = base + p * b.row_stride + j0;
        for (int64_t j = 0; j < NR; ++j) dst[j] = at(src, j);
        dst += NR;
      }
      continue;
    }
    for (int64_t p = 0; p < kc; ++p) {
      const T* src = base + p * b.row_stride + j0 * b.col_stride;
      for (int64_t j = 0; j < cols; ++j) dst[j] = at(src, j * b.col_stride);
      for (int64_t j = cols; j < NR; ++j) dst[j] = 0.f;
      dst += NR;
    }
  }
}

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define ET_GEMM_X86_DISPATCH 1
#define ET_GEMM_PACK_AVX2 __attribute__((target("avx2,fma,f16c")))

// Eight floats of storage type T from p[0:8], widened exactly (F16C for Half, a shift for
// BFloat16), so a value packed here equals the scalar to_float() of it.
template <typename T>
ET_GEMM_PACK_AVX2 ET_ALWAYS_INLINE __m256 load8_widened(const T* p) {
  if constexpr (std::is_same<T, float>::value) {
    return _mm256_loadu_ps(p);
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if constexpr (std::is_same<T, Half>::value) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

// r[i][j] becomes r[j][i]: pairs interleave, then quads, then the 128-bit halves swap.
ET_GEMM_PACK_AVX2 ET_ALWAYS_INLINE void transpose8x8(__m256 (&r)[8]) {
  __m256 t[8], s[8];
  for (int q = 0; q < 8; q += 2) {
    t[q] = _mm256_unpacklo_ps(r[q], r[q + 1]);
    t[q + 1] = _mm256_unpackhi_ps(r[q], r[q + 1]);
  }
  for (int q = 0; q < 8; q += 4) {
    s[q] = _mm256_shuffle_ps(t[q], t[q + 2], 0x44);
    s[q + 1] = _mm256_shuffle_ps(t[q], t[q + 2], 0xEE);
    s[q + 2] = _mm256_shuffle_ps(t[q + 1], t[q + 3], 0x44);
    s[q + 3] = _mm256_shuffle_ps(t[q + 1], t[q + 3], 0xEE);
  }
  for (int q = 0; q < 4; ++q) {
    r[q] = _mm256_permute2f128_ps(s[q], s[q + 4], 0x20);
    r[q + 4] = _mm256_permute2f128_ps(s[q], s[q + 4], 0x31);
  }
}

// pack_b_as() for a B with unit row stride, i.e. a transposed weight W[n, k] seen as B = W^T:
// each column of B is a contiguous run of a W row, so eight runs are read eight values at a
// time and transposed in registers instead of gathering one value per row. Same layout and
// values as the scalar packing, so products stay bit-identical.
template <int NR, typename T>
ET_GEMM_PACK_AVX2 void pack_b_unit_rows_avx2(int64_t kc, int64_t nc, ConstMatrix b, float* dst) {
  static_assert(NR % 8 == 0, "slivers are whole groups of eight columns");
  const T* base = static_cast<const T*>(b.data);
  const int64_t k8 = kc / 8 * 8;
  for (int64_t j0 = 0; j0 < nc; j0 += NR) {
    const int64_t cols = std::min<int64_t>(NR, nc - j0);
    for (int64_t p = 0; p < k8; p += 8) {
      for (int h = 0; h < NR; h += 8) {
        __m256 r[8];
        for (int i = 0; i < 8; ++i)
          r[i] = h + i < cols ? load8_widened(base + (j0 + h + i) * b.col_stride + p) : _mm256_setzero_ps();
        transpose8x8(r);
        for (int i = 0; i < 8; ++i) _mm256_storeu_ps(dst + (p + i) * NR + h, r[i]);
      }
    }
    for (int64_t p = k8; p < kc; ++p) {
      for (int64_t j = 0; j < cols; ++j) dst[p * NR + j] = at(base, (j0 + j) * b.col_stride + p);
      for (int64_t j = cols; j < NR; ++j) dst[p * NR + j] = 0.f;
    }
    dst += NR * kc;
  }
}

// F16C from CPUID directly: not every compiler's __builtin_cpu_supports knows its name.
bool has_avx2_f16c() {
  static const bool supported = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __get_cpuid(1, &a, &b, &c, &d) != 0 &&
           (c & bit_F16C) != 0;
  }();
  return supported;
}
#endif

template <int MR>
void pack_a(int64_t mc, int64_t kc, ConstMatrix a, float* dst) {
  switch (a.elem) {
    case Elem::kF16: pack_a_as<MR, Half>(mc, kc, a, dst); return;
    case Elem::kBF16: pack_a_as<MR, BFloat16>(mc, kc, a, dst); return;
    default: pack_a_as<MR, float>(mc, kc, a, dst); return;
  }
}

// `simd` lets a path whose kernel already needs AVX2 pack a unit-row-stride B in registers.
template <int NR>
void pack_b(int64_t kc, int64_t nc, ConstMatrix b, float* dst, bool simd) {
#ifdef ET_GEMM_X86_DISPATCH
  if (simd && b.row_stride == 1 && b.col_stride != 1 && has_avx2_f16c()) {
    switch (b.elem) {
      case Elem::kF16: pack_b_unit_rows_avx2<NR, Half>(kc, nc, b, dst); return;
      case Elem::kBF16: pack_b_unit_rows_avx2<NR, BFloat16>(kc, nc, b, dst); return;
      default: pack_b_unit_rows_avx2<NR, float>(kc, nc, b, dst); return;
    }
  }
#else
  (void)simd;
#endif
  switch (b.elem) {
    case Elem::kF16: pack_b_as<NR, Half>(kc, nc, b, dst); return;
    case Elem::kBF16: pack_b_as<NR, BFloat16>(kc, nc, b, dst); return;
    default: pack_b_as<NR, float>(kc, nc, b, dst); return;
  }
}

// C[0:mr, 0:nr] = alpha * Apack * Bpack + beta * C (+ bias[i] on row i) over one MR x NR tile.
template <int MR, int NR>
ET_ALWAYS_INLINE void micro_kernel_body(int64_t kc, const float* a, const float* b, float alpha, float beta,
                                        const float* bias, float* c, int64_t ldc, int64_t mr, int64_t nr) {
  float acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = 0.f;
  for (int64_t p = 0; p < kc; ++p) {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const float ai = a[i];
#pragma GCC unroll 32
      for (int j = 0; j < NR; ++j) acc[i][j] += ai * b[j];
    }
    a += MR;
    b += NR;
  }
  if (mr == MR && nr == NR) {
    for (int i = 0; i < MR; ++i) {
      float* ci = c + i * ldc;
      const float bi = bias ? bias[i] : 0.f;
      if (beta == 0.f) {
        for (int j = 0; j < NR; ++j) ci[j] = alpha * acc[i][j] + bi;
      } else if (beta == 1.f) {
        for (int j = 0; j < NR; ++j) ci[j] += alpha * acc[i][j] + bi;
      } else {
        for (int j = 0; j < NR; ++j) ci[j] = alpha * acc[i][j] + beta * ci[j] + bi;
      }
    }
    return;
  }
  for (int64_t i = 0; i < mr; ++i) {
    float* ci = c + i * ldc;
    const float bi = bias ? bias[i] : 0.f;
    for (int64_t j = 0; j < nr; ++j) ci[j] = (beta == 0.f ? alpha * acc[i][j] : alpha * acc[i][j] + beta * ci[j]) + bi;
  }
}

// (kc, a, lda, b, alpha, beta, bias, c, ldc, mr, nr): lda is 0 for a packed A sliver, else the
// row stride of a row-major float32 A the kernel reads in place (only kernels that can).
using MicroKernel = void (*)(int64_t, const float*, int64_t, const float*, float, float, const float*, float*, int64_t,
                             int64_t, int64_t);

void micro_kernel_baseline(int64_t kc, const float* a, int64_t, const float* b, float alpha, float beta,
                           const float* bias, float* c, int64_t ldc, int64_t mr, int64_t nr) {
  micro_kernel_body<4, 8>(kc, a, b, alpha, beta, bias, c, ldc, mr, nr);
}

#ifdef ET_GEMM_X86_DISPATCH
// Applies alpha, beta and bias to one 6 x 16 tile of sums and stores rows [0, mr), columns
// [0, nr) of it; a partial tile goes through a stack copy so no load or store leaves the tile.
__attribute__((target("avx2,fma"))) ET_ALWAYS_INLINE void store_tile_avx2(const __m256 (&acc)[6][2], float alpha,
                                                                          float beta, const float* bias, float* c,
                                                                          int64_t ldc, int64_t mr, int64_t nr) {
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
  if (mr == 6 && nr == 16) {
    for (int i = 0; i < 6; ++i) {
      float* ci = c + i * ldc;
      const __m256 bi = _mm256_set1_ps(bias ? bias[i] : 0.f);
      for (int h = 0; h < 2; ++h) {
        __m256 v = _mm256_fmadd_ps(va, acc[i][h], bi);
        if (beta == 1.f) {
          v = _mm256_add_ps(v, _mm256_loadu_ps(ci + 8 * h));
        } else if (beta != 0.f) {
          v = _mm256_fmadd_ps(vb, _mm256_loadu_ps(ci + 8 * h), v);
        }
        _mm256_storeu_ps(ci + 8 * h, v);
      }
    }
    return;
  }
  alignas(32) float tile[16];
  for (int64_t i = 0; i < mr; ++i) {
    float* ci = c + i * ldc;
    const __m256 bi = _mm256_set1_ps(bias ? bias[i] : 0.f);
    _mm256_store_ps(tile, _mm256_fmadd_ps(va, acc[i][0], bi));
    _mm256_store_ps(tile + 8, _mm256_fmadd_ps(va, acc[i][1], bi));
    for (int64_t j = 0; j < nr; ++j) ci[j] = beta == 0.f ? tile[j] : tile[j] + beta * ci[j];
  }
}

// A 6 x 16 tile of sums over kc steps. A comes packed (six values per step, contiguous) or, with
// kRowsA, straight from six row pointers of a float32 row-major matrix: broadcasts read any
// address, so a unit-stride A needs no copy. Named accumulators: GCC keeps an array in memory.
// kHalf sums only the left 8 columns, for a last sliver of at most 8 (the packed sliver is
// still 16 wide; its right half is zero padding).
template <bool kRowsA, bool kHalf>
__attribute__((target("avx2,fma"))) ET_ALWAYS_INLINE void tile_avx2(int64_t kc, const float* a,
                                                                    const float* const* rows, const float* b,
                                                                    float alpha, float beta, const float* bias,
                                                                    float* c, int64_t ldc, int64_t mr, int64_t nr) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  const float *r0 = nullptr, *r1 = nullptr, *r2 = nullptr, *r3 = nullptr, *r4 = nullptr, *r5 = nullptr;
  if (kRowsA) r0 = rows[0], r1 = rows[1], r2 = rows[2], r3 = rows[3], r4 = rows[4], r5 = rows[5];
#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_loadu_ps(b), b1 = kHalf ? b0 : _mm256_loadu_ps(b + 8);
    __m256 ai = _mm256_broadcast_ss(kRowsA ? r0 + p : a);
    c00 = _mm256_fmadd_ps(ai, b0, c00);
    if (!kHalf) c01 = _mm256_fmadd_ps(ai, b1, c01);
    ai = _mm256_broadcast_ss(kRowsA ? r1 + p : a + 1);
    c10 = _mm256_fmadd_ps(ai, b0, c10);
    if (!kHalf) c11 = _mm256_fmadd_ps(ai, b1, c11);
    ai = _mm256_broadcast_ss(kRowsA ? r2 + p : a + 2);
    c20 = _mm256_fmadd_ps(ai, b0, c20);
    if (!kHalf) c21 = _mm256_fmadd_ps(ai, b1, c21);
    ai = _mm256_broadcast_ss(kRowsA ? r3 + p : a + 3);
    c30 = _mm256_fmadd_ps(ai, b0, c30);
    if (!kHalf) c31 = _mm256_fmadd_ps(ai, b1, c31);
    ai = _mm256_broadcast_ss(kRowsA ? r4 + p : a + 4);
    c40 = _mm256_fmadd_ps(ai, b0, c40);
    if (!kHalf) c41 = _mm256_fmadd_ps(ai, b1, c41);
    ai = _mm256_broadcast_ss(kRowsA ? r5 + p : a + 5);
    c50 = _mm256_fmadd_ps(ai, b0, c50);
    if (!kHalf) c51 = _mm256_fmadd_ps(ai, b1, c51);
    if (!kRowsA) a += 6;
    b += 16;
  }
  const __m256 acc[6][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  store_tile_avx2(acc, alpha, beta, bias, c, ldc, mr, nr);
}

// lda == 0: `a` is a packed sliver; otherwise `a` is row 0 of mr rows lda floats apart.
__attribute__((target("avx2,fma"))) void micro_kernel_avx2(int64_t kc, const float* a, int64_t lda, const float* b,
                                                           float alpha, float beta, const float* bias, float* c,
                                                           int64_t ldc, int64_t mr, int64_t nr) {
  const bool half = nr <= 8;
  if (lda == 0) {
    if (half) {
      tile_avx2<false, true>(kc, a, nullptr, b, alpha, beta, bias, c, ldc, mr, nr);
    } else {
      tile_avx2<false, false>(kc, a, nullptr, b, alpha, beta, bias, c, ldc, mr, nr);
    }
    return;
  }
  // Rows past mr repeat the last real one: read in bounds, summed, never stored.
  const float* rows[6];
  for (int64_t i = 0; i < 6; ++i) rows[i] = a + std::min<int64_t>(i, mr - 1) * lda;
  if (half) {
    tile_avx2<true, true>(kc, nullptr, rows, b, alpha, beta, bias, c, ldc, mr, nr);
  } else {
    tile_avx2<true, false>(kc, nullptr, rows, b, alpha, beta, bias, c, ldc, mr, nr);
  }
}
__attribute__((target("avx512f,avx2,fma"))) void micro_kernel_avx512(int64_t kc, const float* a, int64_t,
                                                                     const float* b, float alpha, float beta,
                                                                     const float* bias, float* c, int64_t ldc,
                                                                     int64_t mr, int64_t nr) {
  micro_kernel_body<8, 32>(kc, a, b, alpha, beta, bias, c, ldc, mr, nr);
}
#endif

#ifdef ET_GEMM_NEON
// Applies alpha, beta and bias to one 6 x 16 tile of sums and stores rows [0, mr), columns
// [0, nr) of it; a partial tile goes through a stack copy so no load or store leaves the tile.
ET_ALWAYS_INLINE void store_tile_neon(const float32x4_t (&acc)[6][4], float alpha, float beta, const float* bias,
                                      float* c, int64_t ldc, int64_t mr, int64_t nr) {
  if (mr == 6 && nr == 16) {
    for (int i = 0; i < 6; ++i) {
      float* ci = c + i * ldc;
      const float32x4_t bi = vdupq_n_f32(bias ? bias[i] : 0.f);
      for (int h = 0; h < 4; ++h) {
        float32x4_t v = vfmaq_n_f32(bi, acc[i][h], alpha);
        if (beta == 1.f) {
          v = vaddq_f32(v, vld1q_f32(ci + 4 * h));
        } else if (beta != 0.f) {
          v = vfmaq_n_f32(v, vld1q_f32(ci + 4 * h), beta);
        }
        vst1q_f32(ci + 4 * h, v);
      }
    }
    return;
  }
  float tile[16];
  for (int64_t i = 0; i < mr; ++i) {
    float* ci = c + i * ldc;
    const float32x4_t bi = vdupq_n_f32(bias ? bias[i] : 0.f);
    for (int h = 0; h < 4; ++h) vst1q_f32(tile + 4 * h, vfmaq_n_f32(bi, acc[i][h], alpha));
    for (int64_t j = 0; j < nr; ++j) ci[j] = beta == 0.f ? tile[j] : tile[j] + beta * ci[j];
  }
}

// A 6 x 16 tile over kc steps of a packed A sliver (six values per step) and a packed B sliver
// (sixteen per step): 24 accumulators, four B vectors and two A vectors fill the 32 registers.
// Named accumulators, as in the AVX2 kernel: GCC keeps an array of them in memory.
void micro_kernel_neon(int64_t kc, const float* a, int64_t, const float* b, float alpha, float beta, const float* bias,
                       float* c, int64_t ldc, int64_t mr, int64_t nr) {
  const float32x4_t z = vdupq_n_f32(0.f);
  float32x4_t c00 = z, c01 = z, c02 = z, c03 = z, c10 = z, c11 = z, c12 = z, c13 = z;
  float32x4_t c20 = z, c21 = z, c22 = z, c23 = z, c30 = z, c31 = z, c32 = z, c33 = z;
  float32x4_t c40 = z, c41 = z, c42 = z, c43 = z, c50 = z, c51 = z, c52 = z, c53 = z;
#pragma GCC unroll 2
  for (int64_t p = 0; p < kc; ++p) {
    const float32x4_t b0 = vld1q_f32(b), b1 = vld1q_f32(b + 4), b2 = vld1q_f32(b + 8), b3 = vld1q_f32(b + 12);
    const float32x4_t a03 = vld1q_f32(a);
    const float32x2_t a45 = vld1_f32(a + 4);
    c00 = vfmaq_laneq_f32(c00, b0, a03, 0), c01 = vfmaq_laneq_f32(c01, b1, a03, 0);
    c02 = vfmaq_laneq_f32(c02, b2, a03, 0), c03 = vfmaq_laneq_f32(c03, b3, a03, 0);
    c10 = vfmaq_laneq_f32(c10, b0, a03, 1), c11 = vfmaq_laneq_f32(c11, b1, a03, 1);
    c12 = vfmaq_laneq_f32(c12, b2, a03, 1), c13 = vfmaq_laneq_f32(c13, b3, a03, 1);
    c20 = vfmaq_laneq_f32(c20, b0, a03, 2), c21 = vfmaq_laneq_f32(c21, b1, a03, 2);
    c22 = vfmaq_laneq_f32(c22, b2, a03, 2), c23 = vfmaq_laneq_f32(c23, b3, a03, 2);
    c30 = vfmaq_laneq_f32(c30, b0, a03, 3), c31 = vfmaq_laneq_f32(c31, b1, a03, 3);
    c32 = vfmaq_laneq_f32(c32, b2, a03, 3), c33 = vfmaq_laneq_f32(c33, b3, a03, 3);
    c40 = vfmaq_lane_f32(c40, b0, a45, 0), c41 = vfmaq_lane_f32(c41, b1, a45, 0);
    c42 = vfmaq_lane_f32(c42, b2, a45, 0), c43 = vfmaq_lane_f32(c43, b3, a45, 0);
    c50 = vfmaq_lane_f32(c50, b0, a45, 1), c51 = vfmaq_lane_f32(c51, b1, a45, 1);
    c52 = vfmaq_lane_f32(c52, b2, a45, 1), c53 = vfmaq_lane_f32(c53, b3, a45, 1);
    a += 6;
    b += 16;
  }
  const float32x4_t acc[6][4] = {{c00, c01, c02, c03}, {c10, c11, c12, c13}, {c20, c21, c22, c23},
                                 {c30, c31, c32, c33}, {c40, c41, c42, c43}, {c50, c51, c52, c53}};
  store_tile_neon(acc, alpha, beta, bias, c, ldc, mr, nr);
}
#endif

// Splits `extent` into `parts` spans, each a multiple of `quantum` (the last may be shorter).
int64_t span_of(int64_t extent, int64_t parts, int64_t quantum) { return round_up(ceil_div(extent, parts), quantum); }

// The product runs as, per (NC, KC) block: pack the B panel and an A panel into the shared
// scratch (parallel over slivers), then compute output tiles (parallel over MC x NB tiles).
// A float32 A with unit column stride skips packing when the kernel `reads_rows`: a weight or
// activation matrix is then read in place instead of being copied on every call.
// Every output element is summed in the same order whichever thread computes its tile, so
// the result does not depend on the thread count. `simd_pack` (paths whose kernel needs AVX2
// anyway) packs a transposed B in registers.
template <int MR, int NR>
void blocked_sgemm(MicroKernel kernel, bool reads_rows, bool simd_pack, int64_t m, int64_t n, int64_t k, float alpha,
                   ConstMatrix a, ConstMatrix b, float beta, const float* bias, float* c, int64_t ldc,
                   float* workspace) {
  const bool direct_a = reads_rows && a.elem == Elem::kF32 && a.col_stride == 1 && a.row_stride > 0;
  const float* a_rows = static_cast<const float*>(a.data);
  float* a_pack = workspace;
  float* b_pack = workspace + round_up(std::min(m, kMP), kRowQuantum) * std::min(k, kKC);
  const int64_t threads = parallel_threads();
  for (int64_t jc = 0; jc < n; jc += kNC) {
    const int64_t nc = std::min(kNC, n - jc);
    for (int64_t pc = 0; pc < k; pc += kKC) {
      const int64_t kc = std::min(kKC, k - pc);
      // Only the first k-block applies the caller's beta and bias; later ones accumulate.
      const float beta_here = pc == 0 ? beta : 1.f;
      const float* bias_here = pc == 0 ? bias : nullptr;
      for (int64_t ip = 0; ip < m; ip += kMP) {
        const int64_t mp = std::min(kMP, m - ip);
        const bool parallel = mp * nc * kc >= kParallelMacs;
        // Packing tasks: A slivers, then (on the first row panel) B slivers, ~16 per task.
        const int64_t a_slivers = direct_a ? 0 : ceil_div(mp, MR);
        const int64_t b_slivers = ip == 0 ? ceil_div(nc, NR) : 0;
        const int64_t pack_grain = parallel ? 16 : std::max<int64_t>({a_slivers, b_slivers, 1});
        const int64_t a_tasks = ceil_div(a_slivers, pack_grain);
        const int64_t b_tasks = ceil_div(b_slivers, pack_grain);
        parallel_for(0, a_tasks + b_tasks, 1, [&](int64_t t0, int64_t t1) {
          for (int64_t t = t0; t < t1; ++t) {
            if (t < a_tasks) {
              const int64_t s0 = t * pack_grain, s1 = std::min(a_slivers, s0 + pack_grain);
              pack_a<MR>(std::min(mp, s1 * MR) - s0 * MR, kc, sub(a, ip + s0 * MR, pc), a_pack + s0 * MR * kc);
            } else {
              const int64_t s0 = (t - a_tasks) * pack_grain;
              const int64_t s1 = std::min(b_slivers, s0 + pack_grain);
              pack_b<NR>(kc, std::min(nc, s1 * NR) - s0 * NR, sub(b, pc, jc + s0 * NR), b_pack + s0 * NR * kc,
                         simd_pack);
            }
          }
        });
        // Compute tiles: rows in MC-sized spans, columns in NB-sized spans, split further
        // until every thread has a few tiles to balance with.
        int64_t row_tiles = ceil_div(mp, kMC), col_tiles = ceil_div(nc, kNB);
        if (parallel) {
          while (row_tiles * col_tiles < 4 * threads && span_of(nc, col_tiles, NR) > 4 * NR) col_tiles *= 2;
          while (row_tiles * col_tiles < 4 * threads && span_of(mp, row_tiles, MR) > 4 * MR) row_tiles *= 2;
        }
        const int64_t row_span = span_of(mp, row_tiles, MR);
        const int64_t col_span = span_of(nc, col_tiles, NR);
        row_tiles = ceil_div(mp, row_span);
        col_tiles = ceil_div(nc, col_span);
        const int64_t tiles = parallel ? row_tiles * col_tiles : 1;
        const int64_t per_task = parallel ? 1 : row_tiles * col_tiles;
        parallel_for(0, tiles, 1, [&](int64_t t0, int64_t t1) {
          for (int64_t t = t0 * per_task; t < t1 * per_task; ++t) {
            const int64_t i0 = (t / col_tiles) * row_span, i1 = std::min(mp, i0 + row_span);
            const int64_t j0 = (t % col_tiles) * col_span, j1 = std::min(nc, j0 + col_span);
            for (int64_t jr = j0; jr < j1; jr += NR) {
              const int64_t nr = std::min<int64_t>(NR, j1 - jr);
              for (int64_t ir = i0; ir < i1; ir += MR) {
                const int64_t mr = std::min<int64_t>(MR, i1 - ir);
                const float* a_tile = direct_a ? a_rows + (ip + ir) * a.row_stride + pc : a_pack + ir * kc;
                kernel(kc, a_tile, direct_a ? a.row_stride : 0, b_pack + jr * kc, alpha, beta_here,
                       bias_here ? bias_here + ip + ir : nullptr, c + (ip + ir) * ldc + jc + jr, ldc, mr, nr);
              }
            }
          }
        });
      }
    }
  }
}

// ci[0:n] += aip * row[0:n] for a B row of storage type T.
template <typename T>
void axpy_row(int64_t n, float aip, const T* bp, int64_t col_stride, float* ci) {
  if (col_stride == 1) {
    for (int64_t j = 0; j < n; ++j) ci[j] += aip * at(bp, j);
  } else {
    for (int64_t j = 0; j < n; ++j) ci[j] += aip * at(bp, j * col_stride);
  }
}

// Columns [j0, j1) of the no-scratch product, row by row in axpy form (vectorizable over n).
void unpacked_columns(int64_t m, int64_t j0, int64_t j1, int64_t k, float alpha, ConstMatrix a, ConstMatrix b,
                      float beta, const float* bias, float* c, int64_t ldc) {
  const int64_t n = j1 - j0;
  for (int64_t i = 0; i < m; ++i) {
    float* ci = c + i * ldc + j0;
    if (beta == 0.f) {
      std::fill(ci, ci + n, 0.f);
    } else if (beta != 1.f) {
      for (int64_t j = 0; j < n; ++j) ci[j] *= beta;
    }
    if (bias) {
      for (int64_t j = 0; j < n; ++j) ci[j] += bias[i];
    }
    for (int64_t p = 0; p < k; ++p) {
      const float aip = alpha * load_elem(a.data, a.elem, i * a.row_stride + p * a.col_stride);
      const ConstMatrix bp = sub(b, p, j0);
      switch (b.elem) {
        case Elem::kF16: axpy_row(n, aip, static_cast<const Half*>(bp.data), b.col_stride, ci); break;
        case Elem::kBF16: axpy_row(n, aip, static_cast<const BFloat16*>(bp.data), b.col_stride, ci); break;
        default: axpy_row(n, aip, static_cast<const float*>(bp.data), b.col_stride, ci); break;
      }
    }
  }
}

// No-scratch fallback (and the one-row product): column chunks in parallel, each a fixed
// number of columns so chunking never depends on the thread count.
void unpacked_sgemm(int64_t m, int64_t n, int64_t k, float alpha, ConstMatrix a, ConstMatrix b, float beta,
                    const float* bias, float* c, int64_t ldc) {
  const int64_t macs_per_column = std::max<int64_t>(1, m * k);
  const int64_t grain = round_up(std::max<int64_t>(64, (kParallelMacs / 4) / macs_per_column), 16);
  parallel_for(0, n, grain,
               [&](int64_t j0, int64_t j1) { unpacked_columns(m, j0, j1, k, alpha, a, b, beta, bias, c, ldc); });
}

#ifdef ET_GEMM_X86_DISPATCH
bool has_avx512() {
  static const bool supported = __builtin_cpu_supports("avx512f");
  return supported;
}

bool has_avx2_fma() {
  static const bool supported = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return supported;
}
#endif

}  // namespace

size_t sgemm_workspace_floats(int64_t m, int64_t n, int64_t k) {
  const int64_t kc = std::min(k, kKC);
  return static_cast<size_t>(round_up(std::min(m, kMP), kRowQuantum) * kc +
                             kc * round_up(std::min(n, kNC), kColQuantum));
}

bool sgemm_on_path(GemmPath path, int64_t m, int64_t n, int64_t k, float alpha, ConstMatrix a, ConstMatrix b,
                   float beta, const float* bias, float* c, int64_t ldc, float* workspace) {
  if (m <= 0 || n <= 0) return true;
  if (k <= 0 || alpha == 0.f) {
    unpacked_sgemm(m, n, 0, alpha, a, b, beta, bias, c, ldc);
    return true;
  }
  switch (path) {
    case GemmPath::kUnpacked: unpacked_sgemm(m, n, k, alpha, a, b, beta, bias, c, ldc); return true;
    case GemmPath::kBaseline:
      blocked_sgemm<4, 8>(micro_kernel_baseline, false, false, m, n, k, alpha, a, b, beta, bias, c, ldc, workspace);
      return true;
#ifdef ET_GEMM_X86_DISPATCH
    case GemmPath::kAvx2:
      if (!has_avx2_fma()) return false;
      blocked_sgemm<6, 16>(micro_kernel_avx2, true, true, m, n, k, alpha, a, b, beta, bias, c, ldc, workspace);
      return true;
    case GemmPath::kAvx512:
      if (!has_avx512()) return false;
      blocked_sgemm<8, 32>(micro_kernel_avx512, false, true, m, n, k, alpha, a, b, beta, bias, c, ldc, workspace);
      return true;
#endif
#ifdef ET_GEMM_NEON
    case GemmPath::kNeon:
      blocked_sgemm<6, 16>(micro_kernel_neon, false, false, m, n, k, alpha, a, b, beta, bias, c, ldc, workspace);
      return true;
#endif
    default: return false;
  }
}

void sgemm(int64_t m, int64_t n, int64_t k, float alpha, ConstMatrix a, ConstMatrix b, float beta, const float* bias,
           float* c, int64_t ldc, float* workspace) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0 || alpha == 0.f) {
    unpacked_sgemm(m, n, 0, alpha, a, b, beta, bias, c, ldc);
    return;
  }
  // One row times a row-major matrix streams B once either way; packing it only adds traffic.
  if (workspace == nullptr || (m == 1 && b.col_stride == 1)) {
    unpacked_sgemm(m, n, k, alpha, a, b, beta, bias, c, ldc);
    return;
  }
#ifdef ET_GEMM_X86_DISPATCH
  // AVX2 first even where AVX-512 exists: the AVX-512 kernel is still the loop-written tile that
  // ran at a quarter of the intrinsics kernel's speed in its AVX2 form, and no machine here can
  // time it; it stays reachable through sgemm_on_path() for its tests.
  if (has_avx2_fma()) {
    blocked_sgemm<6, 16>(micro_kernel_avx2, true, true, m, n, k, alpha, a, b, beta, bias, c, ldc, workspace);
    return;
  }
#endif
#ifdef ET_GEMM_NEON
  blocked_sgemm<6, 16>(micro_kernel_neon, false, false, m, n, k, alpha, a, b, beta, bias, c, ldc, workspace);
#else
  blocked_sgemm<4, 8>(micro_kernel_baseline, false, false, m, n, k, alpha, a, b, beta, bias, c, ldc, workspace);
#endif
}

}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
