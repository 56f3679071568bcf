// Few-row matrix products straight from B's storage: float32 or 16-bit weights, widened in
// registers (AVX2/F16C picked at run time on x86, a scalar loop elsewhere), float32 sums.
#include "kernels/cpu/gemv.h"

#include <algorithm>

#include "kernels/cpu/parallel.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define ET_GEMV_X86_DISPATCH 1
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace executorch {
namespace kernels {
namespace cpu {
namespace {

// Columns the row-update layout handles at once: one tile of sums per row stays in L1.
constexpr int64_t kTile = 64;
// Multiply-adds a parallel chunk should at least hold, so waking a thread pays off.
constexpr int64_t kChunkMacs = int64_t(1) << 16;

int64_t elem_bytes(Elem e) { return e == Elem::kF32 ? 4 : 2; }

// One product's operands after A was widened: A rows are m x k floats, B is strided storage.
struct Operands {
  int64_t m, k;
  float alpha, beta;
  const float* a;
  const char* b;
  int64_t b_rs, b_cs;  // B strides in bytes
  float* c;
  int64_t ldc;
};

void store(const Operands& o, int64_t i, int64_t j, float sum) {
  float* p = o.c + i * o.ldc + j;
  *p = o.beta == 0.f ? o.alpha * sum : o.alpha * sum + o.beta * *p;
}

template <Elem E>
float load(const char* p, int64_t i) {
  return load_elem(p, E, i);
}

// c[:, j0:j1] for B(p, j) at b + j * b_cs + p elements (a transposed row-major weight).
template <Elem E>
void dot_columns_scalar(const Operands& o, int64_t j0, int64_t j1) {
  for (int64_t j = j0; j < j1; ++j) {
    const char* w = o.b + j * o.b_cs;
    for (int64_t i = 0; i < o.m; ++i) {
      const float* a = o.a + i * o.k;
      float s[4] = {0.f, 0.f, 0.f, 0.f};
      int64_t p = 0;
      for (; p + 4 <= o.k; p += 4)
        for (int t = 0; t < 4; ++t) s[t] += a[p + t] * load<E>(w, p + t);
      for (; p < o.k; ++p) s[0] += a[p] * load<E>(w, p);
      store(o, i, j, (s[0] + s[1]) + (s[2] + s[3]));
    }
  }
}

// c[:, j0:j1] for B(p, j) at b + p * b_rs + j elements (row-major), kTile columns at a time.
template <Elem E>
void row_columns_scalar(const Operands& o, int64_t j0, int64_t j1) {
  float acc[kGemvMaxRows][kTile];
  for (int64_t t0 = j0; t0 < j1; t0 += kTile) {
    const int64_t w = std::min(kTile, j1 - t0);
    for (int64_t i = 0; i < o.m; ++i) std::fill(acc[i], acc[i] + w, 0.f);
    for (int64_t p = 0; p < o.k; ++p) {
      const char* row = o.b + p * o.b_rs;
      for (int64_t i = 0; i < o.m; ++i) {
        const float ai = o.a[i * o.k + p];
        for (int64_t t = 0; t < w; ++t) acc[i][t] += ai * load<E>(row, t0 + t);
      }
    }
    for (int64_t i = 0; i < o.m; ++i)
      for (int64_t t = 0; t < w; ++t) store(o, i, t0 + t, acc[i][t]);
  }
}

#ifdef ET_GEMV_X86_DISPATCH
#define ET_GEMV_AVX2 __attribute__((target("avx2,fma,f16c")))

template <Elem E>
ET_GEMV_AVX2 inline __m256 load8(const char* p, int64_t i) {
  if (E == Elem::kF32) return _mm256_loadu_ps(reinterpret_cast<const float*>(p) + i);
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(p) + i));
  if (E == Elem::kF16) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

ET_GEMV_AVX2 inline float hsum(__m256 v) {
  const __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 d = _mm_add_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_add_ss(d, _mm_movehdup_ps(d)));
}

template <Elem E>
ET_GEMV_AVX2 void dot_columns_avx2(const Operands& o, int64_t j0, int64_t j1) {
  for (int64_t j = j0; j < j1; ++j) {
    const char* w = o.b + j * o.b_cs;
    for (int64_t i = 0; i < o.m; ++i) {
      const float* a = o.a + i * o.k;
      // Four chains hide the multiply-add latency; the weight stream is the real limit.
      __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
      int64_t p = 0;
      for (; p + 32 <= o.k; p += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + p), load8<E>(w, p), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + p + 8), load8<E>(w, p + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + p + 16), load8<E>(w, p + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + p + 24), load8<E>(w, p + 24), s3);
      }
      for (; p + 8 <= o.k; p += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + p), load8<E>(w, p), s0);
      float s = hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
      for (; p < o.k; ++p) s += a[p] * load<E>(w, p);
      store(o, i, j, s);
    }
  }
}

template <Elem E>
ET_GEMV_AVX2 void row_columns_avx2(const Operands& o, int64_t j0, int64_t j1) {
  alignas(32) float acc[kGemvMaxRows][kTile];
  for (int64_t t0 = j0; t0 < j1; t0 += kTile) {
    const int64_t w = std::min(kTile, j1 - t0);
    const int64_t w8 = w / 8 * 8;
    for (int64_t i = 0; i < o.m; ++i) std::fill(acc[i], acc[i] + w, 0.f);
    for (int64_t p = 0; p < o.k; ++p) {
      const char* row = o.b + p * o.b_rs;
      for (int64_t i = 0; i < o.m; ++i) {
        const float ai = o.a[i * o.k + p];
        const __m256 av = _mm256_set1_ps(ai);
        for (int64_t t = 0; t < w8; t += 8)
          _mm256_store_ps(acc[i] + t, _mm256_fmadd_ps(av, load8<E>(row, t0 + t), _mm256_load_ps(acc[i] + t)));
        for (int64_t t = w8; t < w; ++t) acc[i][t] += ai * load<E>(row, t0 + t);
      }
    }
    for (int64_t i = 0; i < o.m; ++i)
      for (int64_t t = 0; t < w; ++t) store(o, i, t0 + t, acc[i][t]);
  }
}

// F16C from CPUID directly: not every compiler's __builtin_cpu_supports knows its name.
bool has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & bit_F16C) != 0;
}

bool has_avx2_f16c() {
  static const bool supported = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
  return supported;
}
#endif

using Columns = void (*)(const Operands&, int64_t, int64_t);

// Indexed by [dot layout][Elem]: the instantiations of one path.
constexpr Columns kScalar[2][3] = {
    {row_columns_scalar<Elem::kF32>, row_columns_scalar<Elem::kF16>, row_columns_scalar<Elem::kBF16>},
    {dot_columns_scalar<Elem::kF32>, dot_columns_scalar<Elem::kF16>, dot_columns_scalar<Elem::kBF16>}};
#ifdef ET_GEMV_X86_DISPATCH
constexpr Columns kAvx2[2][3] = {
    {row_columns_avx2<Elem::kF32>, row_columns_avx2<Elem::kF16>, row_columns_avx2<Elem::kBF16>},
    {dot_columns_avx2<Elem::kF32>, dot_columns_avx2<Elem::kF16>, dot_columns_avx2<Elem::kBF16>}};
#endif

void run(Columns columns, int64_t m, int64_t n, int64_t k, float alpha, ConstMatrix a, ConstMatrix b, float beta,
         float* c, int64_t ldc, float* a_rows) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p) a_rows[i * k + p] = load_elem(a.data, a.elem, i * a.row_stride + p * a.col_stride);
  const int64_t eb = elem_bytes(b.elem);
  const Operands o{m, k,  alpha, beta, a_rows, static_cast<const char*>(b.data), b.row_stride * eb, b.col_stride * eb,
                   c, ldc};
  // The chunking depends on the sizes only; each column's sums never cross chunks anyway.
  const int64_t grain =
      std::max<int64_t>(kTile, (kChunkMacs / std::max<int64_t>(1, m * k) + kTile - 1) / kTile * kTile);
  parallel_for(0, n, grain, [&](int64_t j0, int64_t j1) { columns(o, j0, j1); });
}

}  // namespace

bool gemv_supports(int64_t m, ConstMatrix b) {
  return m >= 1 && m <= kGemvMaxRows && (b.row_stride == 1 || b.col_stride == 1);
}

bool gemv_on_path(GemvPath path, int64_t m, int64_t n, int64_t k, float alpha, ConstMatrix a, ConstMatrix b, float beta,
                  float* c, int64_t ldc, float* a_rows) {
  if (!gemv_supports(m, b)) return false;
  // Transposed storage (row stride 1) is read as dot products, row-major as row updates.
  const int dot = b.row_stride == 1 ? 1 : 0;
  const int e = static_cast<int>(b.elem);
  Columns columns = kScalar[dot][e];
  if (path == GemvPath::kAvx2) {
#ifdef ET_GEMV_X86_DISPATCH
    if (!has_avx2_f16c()) return false;
    columns = kAvx2[dot][e];
#else
    return false;
#endif
  }
  run(columns, m, n, k, alpha, a, b, beta, c, ldc, a_rows);
  return true;
}

void gemv(int64_t m, int64_t n, int64_t k, float alpha, ConstMatrix a, ConstMatrix b, float beta, float* c, int64_t ldc,
          float* a_rows) {
  if (!gemv_on_path(GemvPath::kAvx2, m, n, k, alpha, a, b, beta, c, ldc, a_rows))
    gemv_on_path(GemvPath::kScalar, m, n, k, alpha, a, b, beta, c, ldc, a_rows);
}

}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
