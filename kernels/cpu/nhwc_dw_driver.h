// The depthwise sweep shared by the float and QS8 drivers (internal header): output rows (and,
// for small maps, channel blocks) are split over the thread pool; in each row the pixels whose taps all lie inside the image go to
// the micro-kernel as one strided run, the border pixels with one pointer per tap (padding taps
// point at the zero row).
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/conv_nhwc.h"
#include "kernels/cpu/gemm_split.h"
#include "kernels/cpu/nhwc_ukernels.h"
#include "kernels/cpu/parallel.h"

namespace executorch {
namespace kernels {
namespace cpu {
namespace ukernel {

// Tap pointers one micro-kernel call gets at most (and so the largest depthwise filter).
constexpr int64_t kDwPtrs = 512;

// Output rows per depthwise task come from `task_macs`; a layer with fewer row tasks than this
// takes one row per task, and if that is still fewer (7x7 maps) splits its channels too, in
// whole kernel blocks, so two threads share it evenly (7 rows were 4 + 3). Depends on the shape
// only, never on the thread count; few chunks, as each one sets up its own tap pointers.
constexpr int64_t kDwMinTasks = 8;

// Output pixels [xa, xb) of output row y of image n, written from out_px on (pixel xa; pixels
// ch apart): the pixels whose taps all lie inside the image go to the micro-kernel as one
// strided run, the border pixels with one pointer per tap (padding taps point at `zero`). `in`
// and `zero` start at the tile's first channel; `t` has its channels and weights set.
template <typename T, typename Tile, typename Kernel>
void depthwise_pixels(const ConvNhwc& c, int64_t in_h, int64_t in_w, int64_t ch, const T* in, const T* zero, int64_t n,
                      int64_t y, int64_t xa, int64_t xb, T* out_px, Tile t, Kernel kernel) {
  const T* ptrs[kDwPtrs];
  const T* rows[kDwPtrs];  // input row of each kernel row (null: padding)
  const int64_t ow = c.out_w(in_w), ks = c.kernel_h * c.kernel_w;
  const int64_t chunk = std::max<int64_t>(1, kDwPtrs / ks);
  // Columns [x_lo, x_hi) read no horizontal padding.
  const int64_t x_lo = std::min(ow, (c.pad_left + c.stride_w - 1) / c.stride_w);
  const int64_t last = in_w - 1 - (c.kernel_w - 1) * c.dilation_w + c.pad_left;
  const int64_t x_hi = std::max(x_lo, std::min(ow, last < 0 ? 0 : last / c.stride_w + 1));
  bool inside = true;
  for (int64_t kh = 0; kh < c.kernel_h; ++kh) {
    const int64_t ih = y * c.stride_h - c.pad_top + kh * c.dilation_h;
    rows[kh] = ih >= 0 && ih < in_h ? in + (n * in_h + ih) * in_w * ch : nullptr;
    inside = inside && rows[kh] != nullptr;
  }
  T* const out_row = out_px - xa * ch;
  // Pixels [a, b) with one pointer per tap.
  auto listed = [&](int64_t a, int64_t b) {
    for (int64_t x0 = a; x0 < b; x0 += chunk) {
      const int64_t px = std::min(chunk, b - x0);
      for (int64_t p = 0; p < px; ++p)
        for (int64_t kh = 0; kh < c.kernel_h; ++kh)
          for (int64_t kw = 0; kw < c.kernel_w; ++kw) {
            const int64_t iw = (x0 + p) * c.stride_w - c.pad_left + kw * c.dilation_w;
            ptrs[p * ks + kh * c.kernel_w + kw] =
                rows[kh] != nullptr && iw >= 0 && iw < in_w ? rows[kh] + iw * ch : zero;
          }
      t.pixels = px;
      t.in = ptrs;
      t.in_step = 0;
      t.out = out_row + x0 * ch;
      kernel(t);
    }
  };
  const int64_t lo = std::clamp(x_lo, xa, xb), hi = std::clamp(x_hi, xa, xb);
  if (!inside || hi <= lo) {
    listed(xa, xb);
    return;
  }
  listed(xa, lo);
  for (int64_t kh = 0; kh < c.kernel_h; ++kh)
    for (int64_t kw = 0; kw < c.kernel_w; ++kw)
      ptrs[kh * c.kernel_w + kw] = rows[kh] + (lo * c.stride_w - c.pad_left + kw * c.dilation_w) * ch;
  t.pixels = hi - lo;
  t.in = ptrs;
  t.in_step = c.stride_w * ch;
  t.out = out_row + lo * ch;
  kernel(t);
  listed(hi, xb);
}

// `tile` is a filled-in F32DwTile / Qs8DwTile whose pixels, in, in_step and out this sets per
// call, and channels and w per channel chunk: weights_at(c0) gives the packed weights from
// channel c0 on (c0 a multiple of the kernel's channel block `cb`); `kernel` runs it. T is the
// element type; the input has `ch` channels. Each channel is computed by the same code whatever
// chunk it lands in, so the split does not change the result.
template <typename T, typename Tile, typename WeightsAt, typename Kernel>
void depthwise_rows(const ConvNhwc& c, int64_t batch, int64_t in_h, int64_t in_w, int64_t ch, const T* in, T* out,
                    const T* zero, int64_t task_macs, int64_t cb, Tile tile, const WeightsAt& weights_at,
                    Kernel kernel) {
  const int64_t oh = c.out_h(in_h), ow = c.out_w(in_w), ks = c.kernel_h * c.kernel_w;
  const int64_t rows_total = batch * oh;
  int64_t rows_per = std::clamp<int64_t>(task_macs / std::max<int64_t>(1, ow * ch * ks), 1, rows_total);
  int64_t row_tasks = (rows_total + rows_per - 1) / rows_per, ch_per = ch;
  if (row_tasks < kDwMinTasks) {
    rows_per = 1;
    row_tasks = rows_total;
    const int64_t blocks = (ch + cb - 1) / cb;
    const int64_t want = std::min(blocks, (kDwMinTasks + rows_total - 1) / rows_total);
    ch_per = (blocks + want - 1) / want * cb;
  }
  const int64_t ch_tasks = (ch + ch_per - 1) / ch_per;
  parallel_for(0, row_tasks * ch_tasks, 1, [&](int64_t t0, int64_t t1) {
    Tile t = tile;
    for (int64_t task = t0; task < t1; ++task) {
      const int64_t rt = task / ch_tasks, c0 = task % ch_tasks * ch_per;
      t.channels = std::min(ch_per, ch - c0);
      t.w = weights_at(c0);
      for (int64_t row = rt * rows_per; row < std::min(rows_total, (rt + 1) * rows_per); ++row)
        depthwise_pixels(c, in_h, in_w, ch, in + c0, zero + c0, row / oh, row % oh, 0, ow, out + row * ow * ch + c0, t,
                         kernel);
    }
  });
}

// A depthwise convolution's output handed on without being stored (conv2d_nhwc_*_dw_pw): tasks
// are (output row, run of its pixels), a run as long as its depthwise output fits the task's
// stack buffer (kDwPwMaxChannels values). Each run goes through the depthwise kernel into the
// buffer, then to rows(a, mr, pixel) in row tiles of balanced sizes, at most mr_max rows: a[i]
// holds output pixel `pixel + i`'s channels (pixels numbered over the whole output). Shape-only.
template <typename T, typename Tile, typename Kernel, typename Rows>
void depthwise_then_rows(const ConvNhwc& c, int64_t batch, int64_t in_h, int64_t in_w, int64_t ch, const T* in,
                         const T* zero, Tile tile, Kernel kernel, int64_t mr_max, const Rows& rows) {
  const int64_t oh = c.out_h(in_h), ow = c.out_w(in_w);
  const int64_t runs = (ow + kDwPwMaxChannels / ch - 1) / (kDwPwMaxChannels / ch);
  const int64_t px_per = (ow + runs - 1) / runs;
  tile.channels = ch;
  tile.out_stride = ch;
  parallel_for(0, batch * oh * runs, 1, [&](int64_t t0, int64_t t1) {
    alignas(64) T buf[kDwPwMaxChannels + 64];  // slack for kernels reading whole steps past a row
    for (int64_t task = t0; task < t1; ++task) {
      const int64_t row = task / runs, x0 = task % runs * px_per, px = std::min(px_per, ow - x0);
      depthwise_pixels(c, in_h, in_w, ch, in, zero, row / oh, row % oh, x0, x0 + px, buf, tile, kernel);
      const int64_t n_tiles = (px + mr_max - 1) / mr_max;
      const RowTiles tiles(px, n_tiles);
      for (int64_t t = 0; t < n_tiles; ++t) {
        const int64_t r0 = tiles.begin(t), mr = tiles.rows(t);
        const T* a[kMaxMR];
        for (int64_t i = 0; i < mr; ++i) a[i] = buf + (r0 + i) * ch;
        rows(a, mr, row * ow + x0 + r0);
      }
    }
  });
}

}  // namespace ukernel
}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
