// Baseline float micro-kernels: plain loops over fixed-size tiles the compiler vectorizes for the
// build's target ISA (and the reference the SIMD kernels' summation order follows).
#include "kernels/cpu/nhwc_ukernels.h"

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
    for (int j = 0; j < NR; ++j) acc[i][j] = p.init ? p.init[j] : (j < p.nr ? p.c[i * p.c_stride + j] : 0.f);
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

// The requantization every int8 path performs (see Qs8Requant); adding and subtracting
// 1.5 * 2^23 rounds a float of magnitude below 2^22 to the nearest integer, ties to even, as
// the SIMD paths' conversions do.
inline int8_t requantize(int32_t acc, float scale, const Qs8Requant& rq) {
  float y = static_cast<float>(acc) * scale;
  y = y < rq.lo ? rq.lo : y;
  y = y > rq.hi ? rq.hi : y;
  const float r = (y + 12582912.f) - 12582912.f;
  return static_cast<int8_t>(static_cast<int32_t>(r) + rq.zero_point);
}

template <int MR>
void qs8_gemm_tile(const Qs8GemmTile& p) {
  constexpr int NR = kQs8Baseline.nr;
  const int32_t* bias = static_cast<const int32_t*>(p.w);
  const float* scale = reinterpret_cast<const float*>(bias + NR);
  const int8_t* w = reinterpret_cast<const int8_t*>(scale + NR);
  int32_t acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = bias[j];
  for (int64_t t = 0; t < p.ks; ++t) {
    const int8_t* a[MR];
    for (int i = 0; i < MR; ++i) a[i] = p.a[t * kMaxMR + i];
    for (int64_t k = 0; k < p.kc; ++k, w += NR) {
      for (int i = 0; i < MR; ++i) {
        const int32_t ai = a[i][k];
        for (int j = 0; j < NR; ++j) acc[i][j] += ai * int32_t(w[j]);
      }
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int64_t j = 0; j < p.nr; ++j) p.c[i * p.c_stride + j] = requantize(acc[i][j], scale[j], p.rq);
}

#include "kernels/cpu/qs8_add_impl.h"
#include "kernels/cpu/nhwc_winograd.h"

template <int MR>
void qd8_gemm_tile(const Qd8GemmTile& p) {
  constexpr int NR = kQd8Baseline.nr;
  const char* blk = static_cast<const char*>(p.w);
  float facc[MR][NR] = {};
  for (int64_t k0 = 0; k0 < p.kc; k0 += p.group) {
    const int64_t gk = p.kc - k0 < p.group ? p.kc - k0 : p.group;
    const int8_t* w = reinterpret_cast<const int8_t*>(blk);
    const float* scale = reinterpret_cast<const float*>(blk + gk * NR);
    blk = reinterpret_cast<const char*>(scale + NR);
    for (int i = 0; i < MR; ++i) {
      int32_t acc[NR] = {};
      const int8_t* a = p.a[i] + k0;
      for (int64_t k = 0; k < gk; ++k)
        for (int j = 0; j < NR; ++j) acc[j] += int32_t(a[k]) * w[k * NR + j];
      for (int j = 0; j < NR; ++j) facc[i][j] += static_cast<float>(acc[j]) * scale[j];
    }
  }
  const float* bias = reinterpret_cast<const float*>(blk);
  const float* zsum = bias + NR;
  for (int i = 0; i < MR; ++i) {
    const float zp = static_cast<float>(p.a_zero_point[i]);
    for (int64_t j = 0; j < p.nr; ++j)
      p.c[i * p.c_stride + j] = clampf((facc[i][j] - zp * zsum[j]) * p.a_scale[i] + bias[j], p.min, p.max);
  }
}

}  // namespace

void qd8_gemm_baseline(const Qd8GemmTile& t) {
  switch (t.mr) {
    case 1: return qd8_gemm_tile<1>(t);
    case 2: return qd8_gemm_tile<2>(t);
    case 3: return qd8_gemm_tile<3>(t);
    default: return qd8_gemm_tile<4>(t);
  }
}

void qs8_gemm_baseline(const Qs8GemmTile& t) {
  switch (t.mr) {
    case 1: return qs8_gemm_tile<1>(t);
    case 2: return qs8_gemm_tile<2>(t);
    case 3: return qs8_gemm_tile<3>(t);
    default: return qs8_gemm_tile<4>(t);
  }
}

void qs8_dw_baseline(const Qs8DwTile& t) {
  constexpr int CB = kQs8Baseline.dw_cb;
  const char* block = static_cast<const char*>(t.w);
  const int64_t block_bytes = CB * 4 * (t.ks + 2);
  for (int64_t c0 = 0; c0 < t.channels; c0 += CB, block += block_bytes) {
    const int64_t cn = t.channels - c0 < CB ? t.channels - c0 : CB;
    const int32_t* bias = reinterpret_cast<const int32_t*>(block);
    const float* scale = reinterpret_cast<const float*>(bias + CB);
    const int32_t* w = reinterpret_cast<const int32_t*>(scale + CB);
    for (int64_t px = 0; px < t.pixels; ++px) {
      int32_t acc[CB];
      for (int c = 0; c < CB; ++c) acc[c] = bias[c];
      const int8_t* const* in = t.in + (t.in_step ? 0 : px * t.ks);
      const int64_t off = px * t.in_step;
      for (int64_t k = 0; k < t.ks; ++k) {
        const int8_t* x = in[k] + off + c0;
        for (int64_t c = 0; c < cn; ++c) acc[c] += int32_t(x[c]) * w[k * CB + c];
      }
      int8_t* o = t.out + px * t.out_stride + c0;
      for (int64_t c = 0; c < cn; ++c) o[c] = requantize(acc[c], scale[c], t.rq);
    }
  }
}

void qs8_add_baseline(int64_t n, const int8_t* a, const int8_t* b, int8_t* out, const Qs8AddParams& p) {
  qs8_add_loop(n, a, b, out, p);
}

void f32_wino_in_baseline(const float* const* src, int64_t kc, float* v, int64_t pos_stride) {
  wino_f23_input<4>(src, kc, v, pos_stride);
}

void f32_wino_out_baseline(const float* m, int64_t pos_stride, int64_t nc, float* const* dst, float lo, float hi) {
  wino_f23_output<4>(m, pos_stride, nc, dst, lo, hi);
}

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
      const float* const* in = t.in + (t.in_step ? 0 : px * t.ks);
      const int64_t off = px * t.in_step;
      if (cn == CB) {
        for (int64_t k = 0; k < t.ks; ++k) {
          const float* x = in[k] + off + c0;
          const float* w = block + CB * (k + 1);
          for (int c = 0; c < CB; ++c) acc[c] += x[c] * w[c];
        }
      } else {
        for (int64_t k = 0; k < t.ks; ++k) {
          const float* x = in[k] + off + c0;
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
