// Convolution algorithms: 1x1 as one GEMM, depthwise as direct row sweeps (3x3 fused; NEON
// intrinsics on aarch64), the rest as im2col + GEMM, with a direct fallback when no scratch
// memory is available.
#include "kernels/cpu/conv.h"

#include <algorithm>

#if defined(__aarch64__) && defined(__ARM_NEON)
#define ET_CONV_NEON 1
#include <arm_neon.h>
#endif

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vectorize.h"

namespace executorch {
namespace kernels {
namespace cpu {
namespace {

// Output columns [lo, hi) whose input column ow * stride + offset lies in [0, width).
void valid_range(int64_t out_w, int64_t width, int64_t stride, int64_t offset, int64_t* lo, int64_t* hi) {
  int64_t first = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  int64_t last = width - 1 - offset < 0 ? -1 : (width - 1 - offset) / stride;
  *lo = std::min(first, out_w);
  *hi = std::max(*lo, std::min(last + 1, out_w));
}

// out_plane += correlation of one input plane with one KH x KW filter.
ET_MULTIVERSION void accumulate_plane(const Conv2dShape& s, int64_t oh_count, int64_t ow_count, const float* in,
                                      const float* w, float* out) {
  for (int64_t oh = 0; oh < oh_count; ++oh) {
    float* orow = out + oh * ow_count;
    for (int64_t kh = 0; kh < s.kernel_h; ++kh) {
      const int64_t ih = oh * s.stride_h - s.pad_h + kh * s.dilation_h;
      if (ih < 0 || ih >= s.in_h) continue;
      const float* irow = in + ih * s.in_w;
      for (int64_t kw = 0; kw < s.kernel_w; ++kw) {
        const int64_t off = kw * s.dilation_w - s.pad_w;
        int64_t lo, hi;
        valid_range(ow_count, s.in_w, s.stride_w, off, &lo, &hi);
        const float wv = w[kh * s.kernel_w + kw];
        if (s.stride_w == 1) {
          for (int64_t ow = lo; ow < hi; ++ow) orow[ow] += wv * irow[ow + off];
        } else {
          for (int64_t ow = lo; ow < hi; ++ow) orow[ow] += wv * irow[ow * s.stride_w + off];
        }
      }
    }
  }
}

// One output of a 3x3 filter with bounds checks, for border pixels.
float depthwise3x3_point(const Conv2dShape& s, const float* in, const float* w, float acc, int64_t oh, int64_t ow) {
  for (int64_t kh = 0; kh < 3; ++kh) {
    const int64_t ih = oh * s.stride_h - s.pad_h + kh;
    if (ih < 0 || ih >= s.in_h) continue;
    for (int64_t kw = 0; kw < 3; ++kw) {
      const int64_t iw = ow * s.stride_w - s.pad_w + kw;
      if (iw >= 0 && iw < s.in_w) acc += w[kh * 3 + kw] * in[ih * s.in_w + iw];
    }
  }
  return acc;
}

// Interior of one output row of a 3x3 filter: all nine taps in one pass, no bounds checks.
template <int kStride>
ET_MULTIVERSION void depthwise3x3_row(const float* r0, const float* r1, const float* r2, int64_t pad, const float* w,
                                      float bias, float* orow, int64_t lo, int64_t hi) {
  const float w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3], w4 = w[4], w5 = w[5], w6 = w[6], w7 = w[7], w8 = w[8];
  for (int64_t ow = lo; ow < hi; ++ow) {
    const int64_t i = ow * kStride - pad;
    orow[ow] = bias + w0 * r0[i] + w1 * r0[i + 1] + w2 * r0[i + 2] + w3 * r1[i] + w4 * r1[i + 1] + w5 * r1[i + 2] +
               w6 * r2[i] + w7 * r2[i + 1] + w8 * r2[i + 2];
  }
}

void depthwise3x3_plane(const Conv2dShape& s, int64_t oh_count, int64_t ow_count, const float* in, const float* w,
                        float bias, float* out) {
  int64_t lo, hi;  // columns whose three taps are all inside the row
  valid_range(ow_count, s.in_w - 2, s.stride_w, -s.pad_w, &lo, &hi);
  for (int64_t oh = 0; oh < oh_count; ++oh) {
    float* orow = out + oh * ow_count;
    const int64_t ih = oh * s.stride_h - s.pad_h;
    const bool rows_inside = ih >= 0 && ih + 2 < s.in_h;
    const int64_t row_lo = rows_inside ? lo : ow_count;
    for (int64_t ow = 0; ow < std::min(row_lo, ow_count); ++ow) orow[ow] = depthwise3x3_point(s, in, w, bias, oh, ow);
    if (!rows_inside) continue;
    const float* r0 = in + ih * s.in_w;
    if (s.stride_w == 1) {
      depthwise3x3_row<1>(r0, r0 + s.in_w, r0 + 2 * s.in_w, s.pad_w, w, bias, orow, lo, hi);
    } else {
      depthwise3x3_row<2>(r0, r0 + s.in_w, r0 + 2 * s.in_w, s.pad_w, w, bias, orow, lo, hi);
    }
    for (int64_t ow = hi; ow < ow_count; ++ow) orow[ow] = depthwise3x3_point(s, in, w, bias, oh, ow);
  }
}

#ifdef ET_CONV_NEON
// out[i] = bias + sum over t of w[t] * taps[t][i], four outputs per vector, for the leading
// multiple of four of [0, n); returns where the caller's scalar loop picks up. Each tap pointer
// is read at most up to taps[t][n - 1], as the scalar loop reads it.
int64_t depthwise3x3_neon(const float* const (&taps)[9], const float* w, float bias, float* out, int64_t n) {
  float32x4_t wv[9];
  for (int t = 0; t < 9; ++t) wv[t] = vdupq_n_f32(w[t]);
  const float32x4_t vb = vdupq_n_f32(bias);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    float32x4_t lo = vb, hi = vb;
#pragma GCC unroll 9
    for (int t = 0; t < 9; ++t) {
      lo = vfmaq_f32(lo, vld1q_f32(taps[t] + i), wv[t]);
      hi = vfmaq_f32(hi, vld1q_f32(taps[t] + i + 4), wv[t]);
    }
    vst1q_f32(out + i, lo);
    vst1q_f32(out + i + 4, hi);
  }
  for (; i + 4 <= n; i += 4) {
    float32x4_t acc = vb;
#pragma GCC unroll 9
    for (int t = 0; t < 9; ++t) acc = vfmaq_f32(acc, vld1q_f32(taps[t] + i), wv[t]);
    vst1q_f32(out + i, acc);
  }
  return i;
}
#endif

// Copies one plane into a zero-bordered buffer of (in_h + 2 pad_h) rows of (in_w + 2 pad_w).
// For stride 2 each row is stored as its even columns then its odd ones, so the three taps of
// output column ow are even[ow], odd[ow] and even[ow + 1]: all unit-stride loads.
void pad_plane(const Conv2dShape& s, const float* in, float* dst) {
  const int64_t wp = s.in_w + 2 * s.pad_w, hp = s.in_h + 2 * s.pad_h, half = (wp + 1) / 2;
  for (int64_t r = 0; r < hp; ++r) {
    float* d = dst + r * wp;
    const int64_t ih = r - s.pad_h;
    if (ih < 0 || ih >= s.in_h) {
      std::fill(d, d + wp, 0.f);
      continue;
    }
    const float* src = in + ih * s.in_w;
    if (s.stride_w == 1) {
      std::fill(d, d + s.pad_w, 0.f);
      std::copy(src, src + s.in_w, d + s.pad_w);
      std::fill(d + s.pad_w + s.in_w, d + wp, 0.f);
      continue;
    }
    // Even padded columns 2k read src[2k - pad_w], odd ones src[2k + 1 - pad_w].
    for (int64_t parity = 0; parity < 2; ++parity) {
      float* part = d + parity * half;
      const int64_t count = parity == 0 ? half : wp / 2;
      int64_t lo, hi;
      valid_range(count, s.in_w, 2, parity - s.pad_w, &lo, &hi);
      std::fill(part, part + lo, 0.f);
      for (int64_t k = lo; k < hi; ++k) part[k] = src[2 * k + parity - s.pad_w];
      std::fill(part + hi, part + count, 0.f);
    }
  }
}

// A whole 3x3 depthwise plane over a buffer from pad_plane: no bounds checks anywhere.
ET_MULTIVERSION void depthwise3x3_padded(const Conv2dShape& s, int64_t oh_count, int64_t ow_count, const float* padded,
                                         const float* w, float bias, float* out) {
  const int64_t wp = s.in_w + 2 * s.pad_w, half = (wp + 1) / 2;
  const float w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3], w4 = w[4], w5 = w[5], w6 = w[6], w7 = w[7], w8 = w[8];
  for (int64_t oh = 0; oh < oh_count; ++oh) {
    const float* r0 = padded + oh * s.stride_h * wp;
    const float* r1 = r0 + wp;
    const float* r2 = r1 + wp;
    float* orow = out + oh * ow_count;
    int64_t ow = 0;
    if (s.stride_w == 1) {
#ifdef ET_CONV_NEON
      const float* const taps[9] = {r0, r0 + 1, r0 + 2, r1, r1 + 1, r1 + 2, r2, r2 + 1, r2 + 2};
      ow = depthwise3x3_neon(taps, w, bias, orow, ow_count);
#endif
      for (; ow < ow_count; ++ow)
        orow[ow] = bias + w0 * r0[ow] + w1 * r0[ow + 1] + w2 * r0[ow + 2] + w3 * r1[ow] + w4 * r1[ow + 1] +
                   w5 * r1[ow + 2] + w6 * r2[ow] + w7 * r2[ow + 1] + w8 * r2[ow + 2];
    } else {
      const float *o0 = r0 + half, *o1 = r1 + half, *o2 = r2 + half;
#ifdef ET_CONV_NEON
      const float* const taps[9] = {r0, o0, r0 + 1, r1, o1, r1 + 1, r2, o2, r2 + 1};
      ow = depthwise3x3_neon(taps, w, bias, orow, ow_count);
#endif
      for (; ow < ow_count; ++ow)
        orow[ow] = bias + w0 * r0[ow] + w1 * o0[ow] + w2 * r0[ow + 1] + w3 * r1[ow] + w4 * o1[ow] + w5 * r1[ow + 1] +
                   w6 * r2[ow] + w7 * o2[ow] + w8 * r2[ow + 1];
    }
  }
}

// Stride 1: the same sums as depthwise3x3_padded, swept once over the padded plane read as one
// flat row, so small planes (7x7, 14x14) fill whole vectors; `wide` gets rows of the padded
// width (the two columns past each row are discarded), then the valid columns move to `out`.
ET_MULTIVERSION void depthwise3x3_flat(const Conv2dShape& s, int64_t oh_count, int64_t ow_count, const float* padded,
                                       const float* w, float bias, float* wide, float* out) {
  const int64_t wp = s.in_w + 2 * s.pad_w;
  const int64_t n = (oh_count - 1) * wp + ow_count;  // last read: padded[hp * wp - 1]
  const float w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3], w4 = w[4], w5 = w[5], w6 = w[6], w7 = w[7], w8 = w[8];
  const float* r0 = padded;
  const float* r1 = r0 + wp;
  const float* r2 = r1 + wp;
  int64_t p = 0;
#ifdef ET_CONV_NEON
  const float* const taps[9] = {r0, r0 + 1, r0 + 2, r1, r1 + 1, r1 + 2, r2, r2 + 1, r2 + 2};
  p = depthwise3x3_neon(taps, w, bias, wide, n);
#endif
  for (; p < n; ++p)
    wide[p] = bias + w0 * r0[p] + w1 * r0[p + 1] + w2 * r0[p + 2] + w3 * r1[p] + w4 * r1[p + 1] + w5 * r1[p + 2] +
              w6 * r2[p] + w7 * r2[p + 1] + w8 * r2[p + 2];
  for (int64_t oh = 0; oh < oh_count; ++oh) std::copy(wide + oh * wp, wide + oh * wp + ow_count, out + oh * ow_count);
}

// Unfolds output rows [oh_begin, oh_begin + rows) of one group of input channels into
// col[(c * KH + kh) * KW + kw][(oh - oh_begin) * OW + ow].
ET_MULTIVERSION void im2col(const Conv2dShape& s, int64_t channels, int64_t oh_begin, int64_t rows, int64_t ow_count,
                            const float* in, float* col) {
  const int64_t plane = rows * ow_count;
  for (int64_t c = 0; c < channels; ++c) {
    const float* in_c = in + c * s.in_h * s.in_w;
    for (int64_t kh = 0; kh < s.kernel_h; ++kh) {
      for (int64_t kw = 0; kw < s.kernel_w; ++kw) {
        float* dst = col + ((c * s.kernel_h + kh) * s.kernel_w + kw) * plane;
        const int64_t off = kw * s.dilation_w - s.pad_w;
        int64_t lo, hi;
        valid_range(ow_count, s.in_w, s.stride_w, off, &lo, &hi);
        for (int64_t r = 0; r < rows; ++r) {
          float* drow = dst + r * ow_count;
          const int64_t ih = (oh_begin + r) * s.stride_h - s.pad_h + kh * s.dilation_h;
          if (ih < 0 || ih >= s.in_h) {
            std::fill(drow, drow + ow_count, 0.f);
            continue;
          }
          const float* irow = in_c + ih * s.in_w;
          std::fill(drow, drow + lo, 0.f);
          if (s.stride_w == 1) {
            for (int64_t ow = lo; ow < hi; ++ow) drow[ow] = irow[ow + off];
          } else {
            for (int64_t ow = lo; ow < hi; ++ow) drow[ow] = irow[ow * s.stride_w + off];
          }
          std::fill(drow + hi, drow + ow_count, 0.f);
        }
      }
    }
  }
}

// im2col works on bands of output rows so its scratch stays under ~4 MB for any image size.
constexpr int64_t kIm2colBudgetFloats = int64_t(1) << 20;

// Floats one parallel im2col task copies at least (smaller pieces cost more to hand out).
constexpr int64_t kIm2colChunkFloats = int64_t(1) << 15;

int64_t im2col_rows(const Conv2dShape& s) {
  const int64_t per_row = (s.in_channels / s.groups) * s.kernel_h * s.kernel_w * s.out_w();
  const int64_t rows = per_row > 0 ? kIm2colBudgetFloats / per_row : s.out_h();
  return std::max<int64_t>(1, std::min(rows, s.out_h()));
}

bool is_depthwise3x3(const Conv2dShape& s) {
  return s.in_channels == s.groups && s.out_channels == s.groups && s.kernel_h == 3 && s.kernel_w == 3 &&
         s.dilation_h == 1 && s.dilation_w == 1 && (s.stride_w == 1 || s.stride_w == 2);
}

bool is_depthwise3x3_flat(const Conv2dShape& s) { return s.stride_h == 1 && s.stride_w == 1; }

// Scratch one channel of the 3x3 depthwise path needs: its padded plane, and for the flat sweep
// the output rows at the padded width.
int64_t depthwise3x3_channel_floats(const Conv2dShape& s) {
  const int64_t wp = s.in_w + 2 * s.pad_w;
  return (s.in_h + 2 * s.pad_h) * wp + (is_depthwise3x3_flat(s) ? s.out_h() * wp : 0);
}

// Channels per parallel_for chunk of the depthwise path: enough outputs to be worth a hand-off.
int64_t depthwise_grain(const Conv2dShape& s) {
  const int64_t plane = s.out_h() * s.out_w();
  return plane >= (1 << 14) ? 1 : (1 << 14) / (plane > 0 ? plane : 1);
}

bool is_pointwise(const Conv2dShape& s) {
  return s.kernel_h == 1 && s.kernel_w == 1 && s.stride_h == 1 && s.stride_w == 1 && s.pad_h == 0 && s.pad_w == 0;
}

void fill_bias(const float* bias, int64_t channels, int64_t plane, float* out) {
  for (int64_t c = 0; c < channels; ++c) std::fill(out + c * plane, out + (c + 1) * plane, bias ? bias[c] : 0.f);
}

}  // namespace

size_t conv2d_workspace_floats(const Conv2dShape& s) {
  const int64_t cg = s.in_channels / s.groups;
  const int64_t ocg = s.out_channels / s.groups;
  const int64_t plane = s.out_h() * s.out_w();
  if (is_depthwise3x3(s)) {
    // One channel's scratch per chunk, so chunks may run at once.
    const int64_t grain = depthwise_grain(s);
    return static_cast<size_t>((s.in_channels + grain - 1) / grain * depthwise3x3_channel_floats(s));
  }
  if (cg == 1 && ocg == 1) return 0;
  const int64_t k = cg * s.kernel_h * s.kernel_w;
  if (is_pointwise(s)) return sgemm_workspace_floats(ocg, plane, k);
  const int64_t band = im2col_rows(s) * s.out_w();
  return sgemm_workspace_floats(ocg, band, k) + static_cast<size_t>(k * band);
}

void conv2d(const Conv2dShape& s, const float* in, const float* weight, const float* bias, float* out,
            float* workspace) {
  const int64_t oh_count = s.out_h(), ow_count = s.out_w();
  const int64_t plane = oh_count * ow_count;
  const int64_t cg = s.in_channels / s.groups;
  const int64_t ocg = s.out_channels / s.groups;
  const int64_t ksize = s.kernel_h * s.kernel_w;
  const int64_t in_plane = s.in_h * s.in_w;
  const bool depthwise3x3 = s.kernel_h == 3 && s.kernel_w == 3 && s.dilation_h == 1 && s.dilation_w == 1 &&
                            (s.stride_w == 1 || s.stride_w == 2);
  for (int64_t n = 0; n < s.batch; ++n) {
    const float* in_n = in + n * s.in_channels * in_plane;
    float* out_n = out + n * s.out_channels * plane;
    if (workspace != nullptr && is_depthwise3x3(s)) {
      const int64_t grain = depthwise_grain(s), per = depthwise3x3_channel_floats(s);
      const bool flat = is_depthwise3x3_flat(s);
      const int64_t padded_floats = (s.in_h + 2 * s.pad_h) * (s.in_w + 2 * s.pad_w);
      parallel_for(0, s.in_channels, grain, [&](int64_t lo, int64_t hi) {
        float* ws = workspace + lo / grain * per;  // chunks start at multiples of grain
        for (int64_t c = lo; c < hi; ++c) {
          pad_plane(s, in_n + c * in_plane, ws);
          const float b = bias ? bias[c] : 0.f;
          if (flat) {
            depthwise3x3_flat(s, oh_count, ow_count, ws, weight + c * 9, b, ws + padded_floats, out_n + c * plane);
          } else {
            depthwise3x3_padded(s, oh_count, ow_count, ws, weight + c * 9, b, out_n + c * plane);
          }
        }
      });
      continue;
    }
    const bool direct = workspace == nullptr || (cg == 1 && ocg == 1);
    if (direct) {
      for (int64_t oc = 0; oc < s.out_channels; ++oc) {
        const int64_t g = oc / ocg;
        const float* w = weight + oc * cg * ksize;
        float* o = out_n + oc * plane;
        if (cg == 1 && depthwise3x3) {
          depthwise3x3_plane(s, oh_count, ow_count, in_n + g * in_plane, w, bias ? bias[oc] : 0.f, o);
          continue;
        }
        std::fill(o, o + plane, bias ? bias[oc] : 0.f);
        for (int64_t c = 0; c < cg; ++c)
          accumulate_plane(s, oh_count, ow_count, in_n + (g * cg + c) * in_plane, w + c * ksize, o);
      }
      continue;
    }
    const int64_t k = cg * ksize;
    for (int64_t g = 0; g < s.groups; ++g) {
      const float* in_g = in_n + g * cg * in_plane;
      const float* b_g = bias ? bias + g * ocg : nullptr;
      const ConstMatrix w_g{weight + g * ocg * k, k, 1};
      float* out_g = out_n + g * ocg * plane;
      if (is_pointwise(s)) {
        sgemm(ocg, plane, k, 1.f, w_g, {in_g, plane, 1}, 0.f, b_g, out_g, plane, workspace);
        continue;
      }
      const int64_t rows = im2col_rows(s);
      float* col = workspace;
      float* gemm_ws = workspace + k * rows * ow_count;
      for (int64_t oh0 = 0; oh0 < oh_count; oh0 += rows) {
        const int64_t r = std::min(rows, oh_count - oh0);
        // Unfold channel groups in parallel; each writes its own rows of `col`.
        const int64_t per_channel = ksize * r * ow_count;
        parallel_for(0, cg, std::max<int64_t>(1, kIm2colChunkFloats / per_channel), [&](int64_t c0, int64_t c1) {
          im2col(s, c1 - c0, oh0, r, ow_count, in_g + c0 * in_plane, col + c0 * per_channel);
        });
        sgemm(ocg, r * ow_count, k, 1.f, w_g, {col, r * ow_count, 1}, 0.f, b_g, out_g + oh0 * ow_count, plane, gemm_ws);
      }
    }
  }
}

void conv_transpose2d(const Conv2dShape& s, int64_t out_h, int64_t out_w, const float* in, const float* weight,
                      const float* bias, float* out) {
  const int64_t cg = s.in_channels / s.groups;
  const int64_t ocg = s.out_channels / s.groups;
  const int64_t ksize = s.kernel_h * s.kernel_w;
  const int64_t in_plane = s.in_h * s.in_w, out_plane = out_h * out_w;
  for (int64_t n = 0; n < s.batch; ++n) {
    float* out_n = out + n * s.out_channels * out_plane;
    fill_bias(bias, s.out_channels, out_plane, out_n);
    for (int64_t ic = 0; ic < s.in_channels; ++ic) {
      const int64_t g = ic / cg;
      const float* in_c = in + (n * s.in_channels + ic) * in_plane;
      for (int64_t j = 0; j < ocg; ++j) {
        const float* w = weight + (ic * ocg + j) * ksize;
        float* o = out_n + (g * ocg + j) * out_plane;
        for (int64_t ih = 0; ih < s.in_h; ++ih) {
          for (int64_t kh = 0; kh < s.kernel_h; ++kh) {
            const int64_t oh = ih * s.stride_h - s.pad_h + kh * s.dilation_h;
            if (oh < 0 || oh >= out_h) continue;
            for (int64_t iw = 0; iw < s.in_w; ++iw) {
              const float v = in_c[ih * s.in_w + iw];
              for (int64_t kw = 0; kw < s.kernel_w; ++kw) {
                const int64_t ow = iw * s.stride_w - s.pad_w + kw * s.dilation_w;
                if (ow >= 0 && ow < out_w) o[oh * out_w + ow] += v * w[kh * s.kernel_w + kw];
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
