// Row pointers of one indirect-GEMM tile, shared by the float and QS8 convolution drivers
// (internal header). A tile is up to kMaxMR consecutive output pixels; for each of a run of taps
// it gets one input row per pixel: a[t * kMaxMR + i]. Pixels whose whole window lies inside the
// image (nearly all of them) take one add per pointer; only border pixels check each tap.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/conv_nhwc.h"
#include "kernels/cpu/nhwc_ukernels.h"

namespace executorch {
namespace kernels {
namespace cpu {
namespace ukernel {

// Plain matrix rows (pointwise convolutions, fully connected): output row r reads input row r.
template <typename T>
struct MatrixRows {
  const T* in;
  int64_t stride, group_stride;  // between rows, between groups
  void operator()(int64_t r0, int64_t mr, int64_t, int64_t, int64_t g, const T** a, T*) const {
    const T* p = in + r0 * stride + g * group_stride;
    for (int64_t i = 0; i < mr; ++i) a[i] = p + i * stride;
  }
};

// Convolution rows, with the convolution's fields copied so the compiler keeps them in
// registers (the pointer stores cannot alias them). With `merged`, a tap is a whole kernel row
// read as one run of kernel_w * cin values (few input channels), and a border pixel's run is
// built in `patch` (room for kMaxMR * taps runs of `run` values), padding filled with `pad`.
template <typename T>
struct ConvRows {
  const T* in;
  const T* zero;  // a padding tap's row (at least one run long)
  int64_t in_h, in_w, cin, cg, oh, ow;
  int64_t kh, kw, sh, sw, dh, dw, pt, pl;
  bool merged;
  int64_t run;  // values per patched run (merged), else unused
  T pad;

  ConvRows(const ConvNhwc& c, int64_t in_h_, int64_t in_w_, const T* in_, const T* zero_, bool merged_, T pad_)
      : in(in_),
        zero(zero_),
        in_h(in_h_),
        in_w(in_w_),
        cin(c.in_channels()),
        cg(c.group_in_channels),
        oh(c.out_h(in_h_)),
        ow(c.out_w(in_w_)),
        kh(c.kernel_h),
        kw(c.kernel_w),
        sh(c.stride_h),
        sw(c.stride_w),
        dh(c.dilation_h),
        dw(c.dilation_w),
        pt(c.pad_top),
        pl(c.pad_left),
        merged(merged_),
        run(c.kernel_w * c.in_channels()),
        pad(pad_) {}

  // Image n, output row y and column x of output pixel r (two divisions, 32-bit when they fit).
  void locate(int64_t r, int64_t plane, int64_t* n, int64_t* y, int64_t* x) const {
    if (r <= INT32_MAX && plane <= INT32_MAX) {
      const uint32_t r32 = static_cast<uint32_t>(r), p32 = static_cast<uint32_t>(plane);
      const uint32_t n32 = r32 / p32, rem = r32 - n32 * p32, y32 = rem / static_cast<uint32_t>(ow);
      *n = n32;
      *y = y32;
      *x = rem - y32 * static_cast<uint32_t>(ow);
      return;
    }
    *n = r / plane;
    const int64_t rem = r - *n * plane;
    *y = rem / ow;
    *x = rem - *y * ow;
  }

  void operator()(int64_t r0, int64_t mr, int64_t tap0, int64_t taps, int64_t g, const T** a, T* patch) const {
    const int64_t span_y = (kh - 1) * dh, span_x = merged ? kw : (kw - 1) * dw + 1;
    const int64_t plane = oh * ow;
    int64_t n, y, x;
    locate(r0, plane, &n, &y, &x);
    {
      // The common tile: its pixels are in one output row and all windows inside the image, so
      // pixel i's row for a tap is pixel 0's plus i strides.
      const int64_t y0 = y * sh - pt, x0 = x * sw - pl, x1 = (x + mr - 1) * sw - pl;
      if (x + mr <= ow && y0 >= 0 && y0 + span_y < in_h && x0 >= 0 && x1 + span_x <= in_w) {
        const T* p0 = in + (((n * in_h + y0) * in_w + x0) * cin + g * cg);
        const int64_t step = sw * cin, row_step = dh * in_w * cin, col_step = dw * cin;
        int64_t ty = merged ? tap0 : tap0 / kw, tx = merged ? 0 : tap0 % kw;
        int64_t off = ty * row_step + tx * col_step;
        for (int64_t t = 0; t < taps; ++t) {
          const T* p = p0 + off;
          const T** at = a + t * kMaxMR;
          if (mr == kMaxMR) {
            for (int i = 0; i < kMaxMR; ++i) at[i] = p + i * step;  // unrolled, independent
          } else {
            for (int64_t i = 0; i < mr; ++i) at[i] = p + i * step;
          }
          if (merged || ++tx == kw) {
            tx = 0;
            off = ++ty * row_step;
          } else {
            off += col_step;
          }
        }
        return;
      }
    }
    // Per pixel: its window's top-left input pixel, that pixel's offset in the input (which
    // may lie outside it), and whether the whole window is inside the image.
    int64_t iy[kMaxMR], ix[kMaxMR], base[kMaxMR], img[kMaxMR];
    bool inside[kMaxMR];
    for (int64_t i = 0; i < mr; ++i) {
      iy[i] = y * sh - pt;
      ix[i] = x * sw - pl;
      img[i] = n;
      base[i] = ((n * in_h + iy[i]) * in_w + ix[i]) * cin + g * cg;
      inside[i] = iy[i] >= 0 && iy[i] + span_y < in_h && ix[i] >= 0 && ix[i] + span_x <= in_w;
      if (++x == ow) {
        x = 0;
        if (++y == oh) {
          y = 0;
          ++n;
        }
      }
    }
    // Per tap (a kernel position, or a kernel row when merged), in chunks: its input row and
    // column relative to the window's top-left pixel, and the offset that makes in the input.
    int64_t dy[kTapChunk], dx[kTapChunk], off[kTapChunk];
    int64_t ty = merged ? tap0 : tap0 / kw, tx = merged ? 0 : tap0 % kw;
    for (int64_t c0 = 0; c0 < taps; c0 += kTapChunk) {
      const int64_t cn = std::min<int64_t>(kTapChunk, taps - c0);
      for (int64_t t = 0; t < cn; ++t) {
        dy[t] = ty * dh;
        dx[t] = tx * dw;
        off[t] = (dy[t] * in_w + dx[t]) * cin;
        if (merged || ++tx == kw) {
          tx = 0;
          ++ty;
        }
      }
      const T** at = a + c0 * kMaxMR;
      for (int64_t i = 0; i < mr; ++i) {
        if (inside[i]) {
          for (int64_t t = 0; t < cn; ++t) at[t * kMaxMR + i] = in + (base[i] + off[t]);
          continue;
        }
        for (int64_t t = 0; t < cn; ++t) {
          const int64_t ih = iy[i] + dy[t], iw = ix[i] + dx[t];
          const T** slot = &at[t * kMaxMR + i];
          if (ih < 0 || ih >= in_h) {
            *slot = zero;
          } else if (!merged) {
            *slot = iw >= 0 && iw < in_w ? in + (base[i] + off[t]) : zero;
          } else if (iw >= 0 && iw + kw <= in_w) {
            *slot = in + (base[i] + off[t]);
          } else {
            // The run's pixels [lo, hi) are inside the row; the rest are padding.
            const int64_t lo = std::clamp<int64_t>(-iw, 0, kw);
            const int64_t hi = std::clamp<int64_t>(in_w - iw, lo, kw);
            T* p = patch + ((c0 + t) * kMaxMR + i) * run;
            std::fill(p, p + lo * cin, pad);
            if (hi > lo)
              std::memcpy(p + lo * cin, in + ((img[i] * in_h + ih) * in_w + iw + lo) * cin,
                          (hi - lo) * cin * sizeof(T));
            std::fill(p + hi * cin, p + run, pad);
            *slot = p;
          }
        }
      }
    }
  }
};

}  // namespace ukernel
}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
