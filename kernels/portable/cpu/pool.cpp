// Pooling loops; the window bounds are clipped once per output so the inner loops are plain.
#include "kernels/portable/cpu/pool.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace executorch {
namespace kernels {
namespace cpu {

int64_t pool_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                         int64_t dilation, bool ceil_mode) {
  if (stride <= 0) return 0;
  const int64_t span = in + 2 * pad - dilation * (kernel - 1) - 1;
  if (span < 0) return 0;
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  // The last window must start inside the input or the left padding.
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

void max_pool2d(const Pool2dShape& s, const float* in, float* out, int64_t* indices) {
  const int64_t in_plane = s.in_h * s.in_w, out_plane = s.out_h * s.out_w;
  for (int64_t p = 0; p < s.planes; ++p) {
    const float* ip = in + p * in_plane;
    for (int64_t oh = 0; oh < s.out_h; ++oh) {
      for (int64_t ow = 0; ow < s.out_w; ++ow) {
        float best = -std::numeric_limits<float>::infinity();
        int64_t where = -1;
        for (int64_t kh = 0; kh < s.kernel_h; ++kh) {
          const int64_t ih = oh * s.stride_h - s.pad_h + kh * s.dilation_h;
          if (ih < 0 || ih >= s.in_h) continue;
          for (int64_t kw = 0; kw < s.kernel_w; ++kw) {
            const int64_t iw = ow * s.stride_w - s.pad_w + kw * s.dilation_w;
            if (iw < 0 || iw >= s.in_w) continue;
            const float v = ip[ih * s.in_w + iw];
            if (v > best || std::isnan(v) || where < 0) {
              best = v;
              where = ih * s.in_w + iw;
            }
          }
        }
        out[p * out_plane + oh * s.out_w + ow] = best;
        if (indices) indices[p * out_plane + oh * s.out_w + ow] = where;
      }
    }
  }
}

void avg_pool2d(const Pool2dShape& s, const float* in, float* out, bool count_include_pad,
                int64_t divisor_override) {
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

void adaptive_avg_pool2d(int64_t planes, int64_t in_h, int64_t in_w, int64_t out_h,
                         int64_t out_w, const float* in, float* out) {
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
