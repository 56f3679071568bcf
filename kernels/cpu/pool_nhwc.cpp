// NHWC pooling: per output pixel, the window's in-image taps are found from their row and column
// ranges (so the work follows the input read, whatever the window size the file gives), then each
// tap updates a run of channels (the vectorized inner loop).
#include "kernels/cpu/pool_nhwc.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vectorize.h"

namespace executorch {
namespace kernels {
namespace cpu {
namespace {

constexpr int64_t kTaskElems = int64_t(1) << 15;
// Channels per chunk of a global average pool.
constexpr int64_t kPoolChannels = 128;
// Taps max_taps folds per call (larger windows: in chunks, the output so far leading the next).
constexpr int64_t kMaxTaps = 64;

// A cache line of T as one GNU vector (unaligned), and the signed integer vector its compares give.
template <typename T>
struct Line;
template <>
struct Line<float> {
  typedef float V __attribute__((vector_size(64), aligned(4)));
  typedef int32_t M __attribute__((vector_size(64)));
};
template <>
struct Line<int8_t> {
  typedef int8_t V __attribute__((vector_size(64), aligned(1)));
  typedef int8_t M __attribute__((vector_size(64)));
};
template <>
struct Line<uint8_t> {
  typedef uint8_t V __attribute__((vector_size(64), aligned(1)));
  typedef int8_t M __attribute__((vector_size(64)));
};

// o = the running maximum of taps[0..count) (count >= 1; taps[0] may be o itself), a cache line of
// channels at a time in registers: a later tap s wins where s > m, so a NaN wins only as the first
// tap (then stays). One compare per tap: testing s != s as well made GCC scalarize the line (20x).
template <typename T>
ET_MULTIVERSION void max_taps(int64_t c, const T* const* taps, int64_t count, T* o) {
  using V = typename Line<T>::V;
  using M = typename Line<T>::M;
  constexpr int64_t kB = 64 / sizeof(T);
  int64_t c0 = 0;
  for (; c0 + kB <= c; c0 += kB) {
    V m = *reinterpret_cast<const V*>(taps[0] + c0);
    for (int64_t t = 1; t < count; ++t) {
      const V s = *reinterpret_cast<const V*>(taps[t] + c0);
      const M take = reinterpret_cast<M>(s > m);
      m = reinterpret_cast<V>((reinterpret_cast<M>(s) & take) | (reinterpret_cast<M>(m) & ~take));
    }
    *reinterpret_cast<V*>(o + c0) = m;
  }
  for (; c0 < c; ++c0) {
    T m = taps[0][c0];
    for (int64_t t = 1; t < count; ++t) {
      const T s = taps[t][c0];
      m = s > m ? s : m;
    }
    o[c0] = m;
  }
}

// Inlined into the window loop (a multiversioned call per tap cost more than its wider vectors gain).
inline void add_into(int64_t c, const float* x, float* acc) {
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

// The taps t in [0, k) whose position base + t * dil falls in [0, extent).
void tap_range(int64_t base, int64_t dil, int64_t extent, int64_t k, int64_t* first, int64_t* end) {
  *first = base >= 0 ? 0 : (-base + dil - 1) / dil;
  *end = base >= extent ? 0 : std::min<int64_t>(k, (extent - 1 - base) / dil + 1);
}

// Sizes positive, pads non-negative, an output to make. A window has no weights, so its size is
// bounded only by the caller: the loops visit in-image taps only.
bool pool_ok(const PoolNhwc& p, int64_t batch, int64_t in_h, int64_t in_w, int64_t channels) {
  return p.kernel_h > 0 && p.kernel_w > 0 && p.stride_h > 0 && p.stride_w > 0 && p.dilation_h > 0 && p.dilation_w > 0 &&
         p.pad_top >= 0 && p.pad_left >= 0 && p.pad_bottom >= 0 && p.pad_right >= 0 && batch > 0 && in_h >= 0 &&
         in_w >= 0 && channels > 0 && p.out_h(in_h) > 0 && p.out_w(in_w) > 0;
}

// For each output pixel of the pool, in parallel over output rows: step(out, taps, count, first) over
// its in-image taps (pointers into `in`) in window order, at most kMaxTaps at a time (`first` for
// the first chunk), then done(out, taps_in_image) once.
template <typename T, typename Step, typename Done>
void over_windows(const PoolNhwc& p, int64_t batch, int64_t in_h, int64_t in_w, int64_t channels, const T* in, T* out,
                  const Step& step, const Done& done) {
  const int64_t oh = p.out_h(in_h), ow = p.out_w(in_w);
  const int64_t per_row = std::max<int64_t>(1, ow * channels * std::min<int64_t>(p.kernel_h * p.kernel_w, kMaxTaps));
  parallel_for(0, batch * oh, std::max<int64_t>(1, kTaskElems / per_row), [&](int64_t r0, int64_t r1) {
    const T* taps[kMaxTaps];
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / oh, y0 = r % oh * p.stride_h - p.pad_top;
      int64_t ky0, ky1;
      tap_range(y0, p.dilation_h, in_h, p.kernel_h, &ky0, &ky1);
      for (int64_t x = 0; x < ow; ++x) {
        T* o = out + (r * ow + x) * channels;
        const int64_t x0 = x * p.stride_w - p.pad_left;
        int64_t kx0, kx1;
        tap_range(x0, p.dilation_w, in_w, p.kernel_w, &kx0, &kx1);
        int64_t count = 0, total = 0;
        for (int64_t ky = ky0; ky < ky1; ++ky) {
          const T* row = in + ((n * in_h + y0 + ky * p.dilation_h) * in_w + x0) * channels;
          for (int64_t kx = kx0; kx < kx1; ++kx) {
            taps[count++] = row + kx * p.dilation_w * channels;
            if (count == kMaxTaps) {
              step(o, taps, count, total == 0);
              total += count;
              count = 0;
            }
          }
        }
        if (count > 0) step(o, taps, count, total == 0);
        done(o, total + count);
      }
    }
  });
}

// Max pooling on any element type: a window wholly in padding gives the lowest value; then the
// clamp to [lo, hi], which keeps a NaN.
template <typename T>
bool max_pool(const PoolNhwc& p, int64_t batch, int64_t in_h, int64_t in_w, int64_t channels, const T* in, T* out, T lo,
              T hi) {
  if (!pool_ok(p, batch, in_h, in_w, channels) || !(lo <= hi)) return false;
  using L = std::numeric_limits<T>;
  const T lowest = L::has_infinity ? -L::infinity() : L::lowest(), highest = L::has_infinity ? L::infinity() : L::max();
  const bool clamp = lo > lowest || hi < highest;
  over_windows(
      p, batch, in_h, in_w, channels, in, out,
      [&](T* o, const T* const* taps, int64_t count, bool first) {
        if (first) {
          max_taps(channels, taps, count, o);
          return;
        }
        const T* more[kMaxTaps + 1];
        more[0] = o;
        std::copy(taps, taps + count, more + 1);
        max_taps(channels, more, count + 1, o);
      },
      [&](T* o, int64_t total) {
        if (total == 0) std::fill(o, o + channels, lowest);
        if (!clamp) return;
        for (int64_t c = 0; c < channels; ++c) o[c] = o[c] != o[c] ? o[c] : std::min(std::max(o[c], lo), hi);
      });
  return true;
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
  return max_pool(p, batch, in_h, in_w, channels, in, out, out_min, out_max);
}

bool max_pool2d_nhwc_qs8(const PoolNhwc& p, int64_t batch, int64_t in_h, int64_t in_w, int64_t channels,
                         const int8_t* in, int8_t* out, int8_t out_min, int8_t out_max) {
  return max_pool(p, batch, in_h, in_w, channels, in, out, out_min, out_max);
}

bool max_pool2d_nhwc_qu8(const PoolNhwc& p, int64_t batch, int64_t in_h, int64_t in_w, int64_t channels,
                         const uint8_t* in, uint8_t* out, uint8_t out_min, uint8_t out_max) {
  return max_pool(p, batch, in_h, in_w, channels, in, out, out_min, out_max);
}

bool avg_pool2d_nhwc_f32(const PoolNhwc& p, int64_t batch, int64_t in_h, int64_t in_w, int64_t channels,
                         bool count_include_pad, const float* in, float* out, float out_min, float out_max) {
  if (!pool_ok(p, batch, in_h, in_w, channels) || !(out_min <= out_max)) return false;
  const int64_t window = p.kernel_h * p.kernel_w;
  over_windows(
      p, batch, in_h, in_w, channels, in, out,
      [&](float* o, const float* const* taps, int64_t count, bool first) {
        if (first) std::fill(o, o + channels, 0.f);
        for (int64_t t = 0; t < count; ++t) add_into(channels, taps[t], o);
      },
      [&](float* o, int64_t total) {
        if (total == 0) std::fill(o, o + channels, 0.f);
        const int64_t d = count_include_pad ? window : total;
        const float scale = d > 0 ? 1.f / static_cast<float>(d) : 0.f;
        for (int64_t c = 0; c < channels; ++c) o[c] = std::min(std::max(o[c] * scale, out_min), out_max);
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

}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
