// Pooling loops; the window bounds are clipped once per output so the inner loops are plain.
#include "kernels/cpu/pool.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vectorize.h"

namespace executorch {
namespace kernels {
namespace cpu {

int64_t pool_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation, bool ceil_mode) {
  if (stride <= 0) return 0;
  const int64_t span = in + 2 * pad - dilation * (kernel - 1) - 1;
  if (span < 0) return 0;
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  // The last window must start inside the input or the left padding.
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

namespace {

// One window step into a running max: a larger value or a NaN takes over (so the first of equal
// maxima keeps its index, and the last NaN wins), as torch's CPU kernel decides.
inline void take_max(float v, int64_t at, float& best, int64_t& where) {
  const bool take = v > best || v != v;
  best = take ? v : best;
  where = take ? at : where;
}

// Output columns [lo, hi) of row `oh` whose windows lie inside the input horizontally: each column
// visits the same (kh, kw) steps in the same order as the general path, so the results (ties and
// NaNs included) are identical. Columns go in blocks that the compiler keeps in registers/L1.
ET_MULTIVERSION void max_pool_inner_columns(const Pool2dShape& s, const float* ip, int64_t oh, int64_t lo, int64_t hi,
                                            float* out_row, int64_t* idx_row) {
  constexpr int64_t kBlock = 64;
  float best[kBlock];
  int64_t where[kBlock];
  for (int64_t c0 = lo; c0 < hi; c0 += kBlock) {
    const int64_t n = std::min(kBlock, hi - c0);
    std::fill(best, best + n, -std::numeric_limits<float>::infinity());
    std::fill(where, where + n, int64_t(-1));  // no row inside the input: -inf at -1
    bool first = true;
    for (int64_t kh = 0; kh < s.kernel_h; ++kh) {
      const int64_t ih = oh * s.stride_h - s.pad_h + kh * s.dilation_h;
      if (ih < 0 || ih >= s.in_h) continue;
      const float* row = ip + ih * s.in_w;
      for (int64_t kw = 0; kw < s.kernel_w; ++kw) {
        const int64_t iw0 = c0 * s.stride_w - s.pad_w + kw * s.dilation_w;
        const int64_t at0 = ih * s.in_w + iw0;
        if (first) {
          // The window's first element starts the max, whatever it holds (-inf included).
          for (int64_t j = 0; j < n; ++j) {
            best[j] = row[iw0 + j * s.stride_w];
            where[j] = at0 + j * s.stride_w;
          }
          first = false;
          continue;
        }
        for (int64_t j = 0; j < n; ++j) take_max(row[iw0 + j * s.stride_w], at0 + j * s.stride_w, best[j], where[j]);
      }
    }
    std::copy(best, best + n, out_row + c0);
    if (idx_row != nullptr) std::copy(where, where + n, idx_row + c0);
  }
}

// Output column ow of row oh, any window (clipped by the input's edges).
void max_pool_edge_column(const Pool2dShape& s, const float* ip, int64_t oh, int64_t ow, float* out_row,
                          int64_t* idx_row) {
  float best = -std::numeric_limits<float>::infinity();
  int64_t where = -1;
  for (int64_t kh = 0; kh < s.kernel_h; ++kh) {
    const int64_t ih = oh * s.stride_h - s.pad_h + kh * s.dilation_h;
    if (ih < 0 || ih >= s.in_h) continue;
    for (int64_t kw = 0; kw < s.kernel_w; ++kw) {
      const int64_t iw = ow * s.stride_w - s.pad_w + kw * s.dilation_w;
      if (iw < 0 || iw >= s.in_w) continue;
      if (where < 0) {
        best = ip[ih * s.in_w + iw];
        where = ih * s.in_w + iw;
      } else {
        take_max(ip[ih * s.in_w + iw], ih * s.in_w + iw, best, where);
      }
    }
  }
  out_row[ow] = best;
  if (idx_row != nullptr) idx_row[ow] = where;
}

int64_t ceil_div_nonneg(int64_t x, int64_t y) { return x <= 0 ? 0 : (x + y - 1) / y; }

}  // namespace

void max_pool2d(const Pool2dShape& s, const float* in, float* out, int64_t* indices) {
  const int64_t in_plane = s.in_h * s.in_w, out_plane = s.out_h * s.out_w;
  // Columns whose whole window row is inside the input: iw = ow * stride - pad + kw * dilation
  // within [0, in_w) for kw = 0 and kw = kernel_w - 1.
  const int64_t reach = (s.kernel_w - 1) * s.dilation_w;
  const int64_t lo = std::min(s.out_w, ceil_div_nonneg(s.pad_w, s.stride_w));
  const int64_t last = s.in_w - 1 + s.pad_w - reach;  // ow * stride <= last
  const int64_t hi = last < 0 ? lo : std::max(lo, std::min(s.out_w, last / s.stride_w + 1));
  // Rows split across the pool; every output element is computed whole by one chunk.
  const int64_t row_cost = std::max<int64_t>(1, s.out_w * s.kernel_h * s.kernel_w);
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 15) / row_cost);
  parallel_for(0, s.planes * s.out_h, grain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t p = r / s.out_h, oh = r % s.out_h;
      const float* ip = in + p * in_plane;
      float* out_row = out + p * out_plane + oh * s.out_w;
      int64_t* idx_row = indices != nullptr ? indices + p * out_plane + oh * s.out_w : nullptr;
      for (int64_t ow = 0; ow < lo; ++ow) max_pool_edge_column(s, ip, oh, ow, out_row, idx_row);
      max_pool_inner_columns(s, ip, oh, lo, hi, out_row, idx_row);
      for (int64_t ow = hi; ow < s.out_w; ++ow) max_pool_edge_column(s, ip, oh, ow, out_row, idx_row);
    }
  });
}

void avg_pool2d(const Pool2dShape& s, const float* in, float* out, bool count_include_pad, int64_t divisor_override) {
  const int64_t in_plane = s.in_h * s.in_w, out_plane = s.out_h * s.out_w;
  for (int64_t p = 0; p < s.planes; ++p) {
    const float* ip = in + p * in_plane;
    for (int64_t oh = 0; oh < s.out_h; ++oh) {
      int64_t h0 = oh * s.stride_h - s.pad_h;
      int64_t h1 = std::min(h0 + s.kernel_h, s.in_h + s.pad_h);
      const int64_t padded_h = h1 - h0;
      h0 = std::max<int64_t>(h0, 0);
      h1 = std::min(h1, s.in_h);
      for (int64_t ow = 0; ow < s.out_w; ++ow) {
        int64_t w0 = ow * s.stride_w - s.pad_w;
        int64_t w1 = std::min(w0 + s.kernel_w, s.in_w + s.pad_w);
        const int64_t padded = padded_h * (w1 - w0);
        w0 = std::max<int64_t>(w0, 0);
        w1 = std::min(w1, s.in_w);
        float sum = 0.f;
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) sum += ip[ih * s.in_w + iw];
        const int64_t divisor = divisor_override > 0 ? divisor_override
                                : count_include_pad  ? padded
                                                     : (h1 - h0) * (w1 - w0);
        out[p * out_plane + oh * s.out_w + ow] =
            divisor > 0 ? sum / static_cast<float>(divisor) : std::numeric_limits<float>::quiet_NaN();
      }
    }
  }
}

void adaptive_avg_pool2d(int64_t planes, int64_t in_h, int64_t in_w, int64_t out_h, int64_t out_w, const float* in,
                         float* out) {
  for (int64_t p = 0; p < planes; ++p) {
    const float* ip = in + p * in_h * in_w;
    for (int64_t oh = 0; oh < out_h; ++oh) {
      const int64_t h0 = oh * in_h / out_h, h1 = ((oh + 1) * in_h + out_h - 1) / out_h;
      for (int64_t ow = 0; ow < out_w; ++ow) {
        const int64_t w0 = ow * in_w / out_w, w1 = ((ow + 1) * in_w + out_w - 1) / out_w;
        float sum = 0.f;
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) sum += ip[ih * in_w + iw];
        out[(p * out_h + oh) * out_w + ow] = sum / static_cast<float>((h1 - h0) * (w1 - w0));
      }
    }
  }
}

}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
