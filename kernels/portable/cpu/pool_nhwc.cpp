// NHWC pooling: per output pixel, the window's in-image rows and columns are found once, then
// each tap updates a run of channels (the vectorized inner loop).
#include "kernels/portable/cpu/pool_nhwc.h"

#include <algorithm>
#include <cmath>

#include "kernels/portable/cpu/parallel.h"
#include "kernels/portable/cpu/vectorize.h"

namespace executorch {
namespace kernels {
namespace cpu {
namespace {

constexpr int64_t kTaskElems = int64_t(1) << 15;
// Channels per chunk of a global average pool.
constexpr int64_t kPoolChannels = 128;

ET_MULTIVERSION void max_into(int64_t c, const float* x, float* acc) {
  for (int64_t i = 0; i < c; ++i) {
    const float v = x[i];
    // A NaN takes over and stays: v > acc is false for it, so test it explicitly.
    acc[i] = (v > acc[i] || v != v) ? v : acc[i];
  }
}

ET_MULTIVERSION void max_into(int64_t c, const int8_t* x, int8_t* acc) {
  for (int64_t i = 0; i < c; ++i) acc[i] = x[i] > acc[i] ? x[i] : acc[i];
}

ET_MULTIVERSION void add_into(int64_t c, const float* x, float* acc) {
  for (int64_t i = 0; i < c; ++i) acc[i] += x[i];
}

// acc[i] += x[p * stride + i] for pixels p in order: one call per chunk of a global pool.
ET_MULTIVERSION void add_pixels(int64_t c, int64_t pixels, int64_t stride, const float* x, float* acc) {
  for (int64_t p = 0; p < pixels; ++p)
    for (int64_t i = 0; i < c; ++i) acc[i] += x[p * stride + i];
}

ET_MULTIVERSION void add_pixels_i32(int64_t c, int64_t pixels, int64_t stride, const int8_t* x, int32_t* acc) {
  for (int64_t p = 0; p < pixels; ++p)
    for (int64_t i = 0; i < c; ++i) acc[i] += x[p * stride + i];
}

// Calls fn(out_pixel_pointer_offset, taps) for each output pixel of rows [r0, r1): `tap(x)` is
// invoked for every in-image window element with its input offset, in window order.
template <typename Fn>
void for_windows(const PoolNhwc& p, int64_t in_h, int64_t in_w, int64_t channels, int64_t r0, int64_t r1,
                 const Fn& fn) {
  const int64_t oh = p.out_h(in_h), ow = p.out_w(in_w);
  for (int64_t row = r0; row < r1; ++row) {
    const int64_t n = row / oh, y = row % oh;
    for (int64_t x = 0; x < ow; ++x) {
      int64_t offsets[1024];
      int64_t count = 0;
      for (int64_t kh = 0; kh < p.kernel_h; ++kh) {
        const int64_t ih = y * p.stride_h - p.pad_top + kh * p.dilation_h;
        if (ih < 0 || ih >= in_h) continue;
        for (int64_t kw = 0; kw < p.kernel_w; ++kw) {
          const int64_t iw = x * p.stride_w - p.pad_left + kw * p.dilation_w;
          if (iw >= 0 && iw < in_w) offsets[count++] = ((n * in_h + ih) * in_w + iw) * channels;
        }
      }
      fn((row * ow + x) * channels, offsets, count);
    }
  }
}

bool pool_ok(const PoolNhwc& p, int64_t batch, int64_t in_h, int64_t in_w, int64_t channels) {
  PoolNhwc q = p;
  q.groups = q.group_in_channels = q.group_out_channels = 1;
  return q.valid() && p.kernel_h * p.kernel_w <= 1024 && batch > 0 && channels > 0 && p.out_h(in_h) > 0 &&
         p.out_w(in_w) > 0;
}

template <typename Fn>
void over_rows(const PoolNhwc& p, int64_t batch, int64_t in_h, int64_t in_w, int64_t channels, const Fn& body) {
  const int64_t rows = batch * p.out_h(in_h);
  const int64_t per_row = std::max<int64_t>(1, p.out_w(in_w) * channels * p.kernel_h * p.kernel_w);
  parallel_for(0, rows, std::max<int64_t>(1, kTaskElems / per_row),
               [&](int64_t r0, int64_t r1) { for_windows(p, in_h, in_w, channels, r0, r1, body); });
}

// XNNPACK's quantized mean: the output zero point is added in float32 before the rounding (half to
// even), so a tie rounds to an even *output* integer.
int8_t requantize_mean(int32_t acc, float scale, int32_t zp, int8_t lo, int8_t hi) {
  float y = static_cast<float>(acc) * scale + static_cast<float>(zp);
  y = std::min(std::max(y, static_cast<float>(lo)), static_cast<float>(hi));
  return static_cast<int8_t>(std::nearbyint(y));
}

}  // namespace

bool max_pool2d_nhwc_f32(const PoolNhwc& p, int64_t batch, int64_t in_h, int64_t in_w, int64_t channels,
                         const float* in, float* out, float out_min, float out_max) {
  if (!pool_ok(p, batch, in_h, in_w, channels)) return false;
  over_rows(p, batch, in_h, in_w, channels, [&](int64_t o, const int64_t* offs, int64_t count) {
    float* acc = out + o;
    std::fill(acc, acc + channels, -INFINITY);
    for (int64_t t = 0; t < count; ++t) max_into(channels, in + offs[t], acc);
    for (int64_t c = 0; c < channels; ++c)
      acc[c] = acc[c] != acc[c] ? acc[c] : std::min(std::max(acc[c], out_min), out_max);
  });
  return true;
}

bool avg_pool2d_nhwc_f32(const PoolNhwc& p, int64_t batch, int64_t in_h, int64_t in_w, int64_t channels,
                         bool count_include_pad, const float* in, float* out, float out_min, float out_max) {
  if (!pool_ok(p, batch, in_h, in_w, channels)) return false;
  const int64_t window = p.kernel_h * p.kernel_w;
  over_rows(p, batch, in_h, in_w, channels, [&](int64_t o, const int64_t* offs, int64_t count) {
    float* acc = out + o;
    std::fill(acc, acc + channels, 0.f);
    for (int64_t t = 0; t < count; ++t) add_into(channels, in + offs[t], acc);
    const int64_t d = count_include_pad ? window : count;
    const float scale = d > 0 ? 1.f / static_cast<float>(d) : 0.f;
    for (int64_t c = 0; c < channels; ++c) acc[c] = std::min(std::max(acc[c] * scale, out_min), out_max);
  });
  return true;
}

bool global_avg_pool_nhwc_f32(int64_t batch, int64_t pixels, int64_t channels, const float* in, float* out,
                              float out_min, float out_max) {
  if (batch <= 0 || pixels <= 0 || channels <= 0) return false;
  const float scale = 1.f / static_cast<float>(pixels);
  // Chunks of whole channel blocks per image (a batch of one is still split); each channel is
  // summed over the pixels in order by one chunk, so the split does not change the result.
  const int64_t blocks = (channels + kPoolChannels - 1) / kPoolChannels;
  parallel_for(0, batch * blocks, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t n = t / blocks, c0 = t % blocks * kPoolChannels;
      const int64_t cn = std::min(kPoolChannels, channels - c0);
      float* acc = out + n * channels + c0;
      std::fill(acc, acc + cn, 0.f);
      add_pixels(cn, pixels, channels, in + n * pixels * channels + c0, acc);
      for (int64_t c = 0; c < cn; ++c) acc[c] = std::min(std::max(acc[c] * scale, out_min), out_max);
    }
  });
  return true;
}

bool global_avg_pool_nhwc_qs8(int64_t batch, int64_t pixels, int64_t channels, const int8_t* in, float in_scale,
                              int32_t in_zero_point, int8_t* out, float out_scale, int32_t out_zero_point,
                              int8_t out_min, int8_t out_max) {
  constexpr int64_t kMaxChannels = 16384;
  const float scale = in_scale / out_scale / static_cast<float>(pixels);
  if (batch <= 0 || pixels <= 0 || channels <= 0 || channels > kMaxChannels || pixels > (int64_t(1) << 23) ||
      !(scale > 0.f) || !std::isfinite(scale) || out_min > out_max)
    return false;
  // Chunks of whole channel blocks per image, as the float one.
  const int64_t blocks = (channels + kPoolChannels - 1) / kPoolChannels;
  parallel_for(0, batch * blocks, 1, [&](int64_t t0, int64_t t1) {
    int32_t acc[kPoolChannels];
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t n = t / blocks, c0 = t % blocks * kPoolChannels;
      const int64_t cn = std::min(kPoolChannels, channels - c0);
      std::fill(acc, acc + cn, -in_zero_point * static_cast<int32_t>(pixels));
      add_pixels_i32(cn, pixels, channels, in + n * pixels * channels + c0, acc);
      for (int64_t c = 0; c < cn; ++c)
        out[n * channels + c0 + c] = requantize_mean(acc[c], scale, out_zero_point, out_min, out_max);
    }
  });
  return true;
}

bool max_pool2d_nhwc_qs8(const PoolNhwc& p, int64_t batch, int64_t in_h, int64_t in_w, int64_t channels,
                         const int8_t* in, int8_t* out, int8_t out_min, int8_t out_max) {
  if (!pool_ok(p, batch, in_h, in_w, channels) || out_min > out_max) return false;
  over_rows(p, batch, in_h, in_w, channels, [&](int64_t o, const int64_t* offs, int64_t count) {
    int8_t* acc = out + o;
    std::fill(acc, acc + channels, static_cast<int8_t>(-128));
    for (int64_t t = 0; t < count; ++t) max_into(channels, in + offs[t], acc);
    for (int64_t c = 0; c < channels; ++c) acc[c] = std::min(std::max(acc[c], out_min), out_max);
  });
  return true;
}

}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
