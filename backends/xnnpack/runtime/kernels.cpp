// NHWC convolution as im2col + sgemm, depthwise and pooling loops over channels (contiguous in
// NHWC, so they vectorise), broadcasting elementwise ops and (de)quantization.
#include "backends/xnnpack/runtime/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/portable/cpu/activation.h"
#include "kernels/portable/cpu/gemm.h"
#include "kernels/portable/cpu/gemv.h"
#include "kernels/portable/cpu/parallel.h"
#include "kernels/portable/cpu/quantized.h"
#include "kernels/portable/cpu/vectorize.h"
#include "kernels/portable/cpu/vmath.h"

namespace executorch {
namespace backends {
namespace xnnpack {

using kernels::cpu::ConstMatrix;
using kernels::cpu::parallel_for;

namespace {

constexpr int64_t kGrain = 1 << 14;
// Elements per chunk of a flat elementwise loop: small enough that a 7x7 or 14x14 feature map
// splits into several chunks (a residual add of 7x7x160 floats was one chunk, so serial), large
// enough that a chunk is worth a hand-off.
constexpr int64_t kFlatGrain = 1 << 12;

inline float clampf(float v, float lo, float hi) { return std::min(std::max(v, lo), hi); }

// out[r, c] = clamp(out[r, c] + bias[c]) over a row-major [rows, cols] block with row stride ld.
void bias_clamp(float* out, int64_t rows, int64_t cols, int64_t ld, const float* bias, float lo, float hi) {
  const bool clamp = lo > -INFINITY || hi < INFINITY;
  if (!bias && !clamp) return;
  parallel_for(0, rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(cols, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* o = out + r * ld;
      if (bias) {
        for (int64_t c = 0; c < cols; ++c) o[c] = clampf(o[c] + bias[c], lo, hi);
      } else {
        for (int64_t c = 0; c < cols; ++c) o[c] = clampf(o[c], lo, hi);
      }
    }
  });
}

void gemm_rows(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, ConstMatrix b, float* c, int64_t ldc,
               float* scratch) {
  const ConstMatrix am{a, lda, 1};
  if (kernels::cpu::gemv_supports(m, b)) {
    kernels::cpu::gemv(m, n, k, 1.f, am, b, 0.f, c, ldc, scratch);
  } else {
    kernels::cpu::sgemm(m, n, k, 1.f, am, b, 0.f, nullptr, c, ldc, scratch);
  }
}

size_t gemm_scratch(int64_t m, int64_t n, int64_t k) {
  return std::max(kernels::cpu::sgemm_workspace_floats(m, n, k), static_cast<size_t>(m * k));
}

}  // namespace

kernels::cpu::ConvNhwc to_conv_nhwc(const ConvParams& p) {
  kernels::cpu::ConvNhwc c;
  c.kernel_h = p.kernel_h, c.kernel_w = p.kernel_w, c.stride_h = p.stride_h, c.stride_w = p.stride_w;
  c.dilation_h = p.dilation_h, c.dilation_w = p.dilation_w;
  c.pad_top = p.pad_top, c.pad_left = p.pad_left, c.pad_bottom = p.pad_bottom, c.pad_right = p.pad_right;
  c.groups = p.groups, c.group_in_channels = p.group_in, c.group_out_channels = p.group_out;
  return c;
}

int64_t window_out(int64_t in, int64_t pad_before, int64_t pad_after, int64_t kernel, int64_t dilation,
                   int64_t stride) {
  const int64_t span = in + pad_before + pad_after - dilation * (kernel - 1) - 1;
  return span < 0 ? 0 : span / stride + 1;
}

int64_t transposed_out(int64_t in, int64_t pad_before, int64_t pad_after, int64_t kernel, int64_t dilation,
                       int64_t stride, int64_t adjustment) {
  const int64_t span = stride * (in - 1) + adjustment + dilation * (kernel - 1) + 1 - pad_before - pad_after;
  return in == 0 || span < 0 ? 0 : span;
}

void conv_transpose_nhwc(const ConvParams& p, int64_t n, int64_t h, int64_t w, int64_t oh, int64_t ow, const float* in,
                         const float* weights, const float* bias, float* out, float lo, float hi) {
  const int64_t c = p.groups * p.group_in, oc = p.groups * p.group_out;
  for (int64_t px = 0; px < n * oh * ow; ++px) {
    for (int64_t o = 0; o < oc; ++o) out[px * oc + o] = bias ? bias[o] : 0.0f;
  }
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t iy = 0; iy < h; ++iy) {
      for (int64_t ix = 0; ix < w; ++ix) {
        const float* x = in + ((b * h + iy) * w + ix) * c;
        for (int64_t ky = 0; ky < p.kernel_h; ++ky) {
          const int64_t oy = iy * p.stride_h - p.pad_top + ky * p.dilation_h;
          if (oy < 0 || oy >= oh) continue;
          for (int64_t kx = 0; kx < p.kernel_w; ++kx) {
            const int64_t ox = ix * p.stride_w - p.pad_left + kx * p.dilation_w;
            if (ox < 0 || ox >= ow) continue;
            float* y = out + ((b * oh + oy) * ow + ox) * oc;
            for (int64_t g = 0; g < p.groups; ++g) {
              for (int64_t o = 0; o < p.group_out; ++o) {
                const int64_t oc_idx = g * p.group_out + o;
                const float* wk = weights + ((oc_idx * p.kernel_h + ky) * p.kernel_w + kx) * p.group_in;
                const float* xg = x + g * p.group_in;
                float acc = 0.0f;
                for (int64_t i = 0; i < p.group_in; ++i) acc += xg[i] * wk[i];
                y[oc_idx] += acc;
              }
            }
          }
        }
      }
    }
  }
  for (int64_t i = 0; i < n * oh * ow * oc; ++i) out[i] = std::min(std::max(out[i], lo), hi);
}

static bool conv_is_pointwise(const ConvParams& p) {
  return p.kernel_h == 1 && p.kernel_w == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_top == 0 &&
         p.pad_left == 0 && p.pad_bottom == 0 && p.pad_right == 0 && p.groups == 1;
}

size_t conv_scratch_floats(const ConvParams& p, int64_t n, int64_t h, int64_t w, int64_t oh, int64_t ow) {
  (void)h, (void)w;
  const int64_t rows = n * oh * ow, k = p.kernel_h * p.kernel_w * p.group_in;
  const size_t cols = conv_is_pointwise(p) ? 0 : static_cast<size_t>(rows * k);
  return cols + gemm_scratch(rows, p.group_out, k);
}

void conv_nhwc(const ConvParams& p, int64_t n, int64_t h, int64_t w, int64_t oh, int64_t ow, const float* in,
               const float* weights, const float* bias, float* out, float lo, float hi, float* scratch) {
  const int64_t c = p.groups * p.group_in, oc = p.groups * p.group_out;
  const int64_t rows = n * oh * ow, k = p.kernel_h * p.kernel_w * p.group_in;
  if (rows == 0) return;
  if (conv_is_pointwise(p)) {
    gemm_rows(rows, oc, k, in, c, ConstMatrix{weights, 1, k}, out, oc, scratch);
    bias_clamp(out, rows, oc, oc, bias, lo, hi);
    return;
  }
  float* cols = scratch;
  float* gemm_ws = scratch + rows * k;
  for (int64_t g = 0; g < p.groups; ++g) {
    // One row per output pixel: the (kh, kw, channel) patch, zeros where it falls in the padding.
    parallel_for(0, rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(k, 1)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / (oh * ow), y = (r / ow) % oh, x = r % ow;
        float* dst = cols + r * k;
        for (int64_t ky = 0; ky < p.kernel_h; ++ky) {
          const int64_t iy = y * p.stride_h - p.pad_top + ky * p.dilation_h;
          for (int64_t kx = 0; kx < p.kernel_w; ++kx, dst += p.group_in) {
            const int64_t ix = x * p.stride_w - p.pad_left + kx * p.dilation_w;
            if (iy < 0 || iy >= h || ix < 0 || ix >= w) {
              std::memset(dst, 0, sizeof(float) * p.group_in);
            } else {
              std::memcpy(dst, in + ((b * h + iy) * w + ix) * c + g * p.group_in, sizeof(float) * p.group_in);
            }
          }
        }
      }
    });
    gemm_rows(rows, p.group_out, k, cols, k, ConstMatrix{weights + g * p.group_out * k, 1, k}, out + g * p.group_out,
              oc, gemm_ws);
  }
  bias_clamp(out, rows, oc, oc, bias, lo, hi);
}

void depthwise_nhwc(const ConvParams& p, int64_t n, int64_t h, int64_t w, int64_t oh, int64_t ow, const float* in,
                    const float* weights, const float* bias, float* out, float lo, float hi) {
  const int64_t c = p.groups, mult = p.group_out, oc = c * mult;
  parallel_for(0, n * oh, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / oh, y = r % oh;
      for (int64_t x = 0; x < ow; ++x) {
        float* o = out + ((b * oh + y) * ow + x) * oc;
        if (bias) {
          std::memcpy(o, bias, sizeof(float) * oc);
        } else {
          std::memset(o, 0, sizeof(float) * oc);
        }
        for (int64_t ky = 0; ky < p.kernel_h; ++ky) {
          const int64_t iy = y * p.stride_h - p.pad_top + ky * p.dilation_h;
          if (iy < 0 || iy >= h) continue;
          for (int64_t kx = 0; kx < p.kernel_w; ++kx) {
            const int64_t ix = x * p.stride_w - p.pad_left + kx * p.dilation_w;
            if (ix < 0 || ix >= w) continue;
            const float* src = in + ((b * h + iy) * w + ix) * c;
            const float* wk = weights + (ky * p.kernel_w + kx) * oc;
            if (mult == 1) {
              for (int64_t ch = 0; ch < oc; ++ch) o[ch] += src[ch] * wk[ch];
            } else {
              for (int64_t ch = 0; ch < oc; ++ch) o[ch] += src[ch / mult] * wk[ch];
            }
          }
        }
        for (int64_t ch = 0; ch < oc; ++ch) o[ch] = clampf(o[ch], lo, hi);
      }
    }
  });
}

size_t fc_scratch_floats(int64_t rows, int64_t in, int64_t out) { return gemm_scratch(rows, out, in); }

void fully_connected(int64_t rows, int64_t ic, int64_t oc, const float* in, const float* weights, bool transposed,
                     const float* bias, float* out, float lo, float hi, float* scratch) {
  if (rows == 0) return;
  const ConstMatrix b = transposed ? ConstMatrix{weights, oc, 1} : ConstMatrix{weights, 1, ic};
  gemm_rows(rows, oc, ic, in, ic, b, out, oc, scratch);
  bias_clamp(out, rows, oc, oc, bias, lo, hi);
}

size_t bmm_scratch_floats(int64_t m, int64_t n, int64_t k) { return gemm_scratch(m, n, k); }

void batch_matmul(int rank, const int64_t* a_dims, const int64_t* b_dims, const int64_t* out_dims, const float* a,
                  const float* b, bool transpose_b, float* out, float* scratch) {
  const int64_t m = out_dims[rank - 2], n = out_dims[rank - 1], k = a_dims[rank - 1];
  int64_t batches = 1;
  for (int d = 0; d < rank - 2; ++d) batches *= out_dims[d];
  for (int64_t bi = 0; bi < batches; ++bi) {
    // Offsets of this batch in A and B, whose batch dims may be 1 (broadcast).
    int64_t rem = bi, a_off = 0, b_off = 0, a_stride = m * k, b_stride = k * n;
    for (int d = rank - 3; d >= 0; --d) {
      const int64_t idx = rem % out_dims[d];
      rem /= out_dims[d];
      a_off += (a_dims[d] == 1 ? 0 : idx) * a_stride;
      b_off += (b_dims[d] == 1 ? 0 : idx) * b_stride;
      a_stride *= a_dims[d];
      b_stride *= b_dims[d];
    }
    const ConstMatrix bm = transpose_b ? ConstMatrix{b + b_off, 1, k} : ConstMatrix{b + b_off, n, 1};
    gemm_rows(m, n, k, a + a_off, k, bm, out + bi * m * n, n, scratch);
  }
}

namespace {

// out = f(a, b) with numpy broadcasting; f gives the stored element (clamp included).
template <typename T, typename F>
void broadcast_loop(int rank, const int64_t* a_dims, const T* a, const int64_t* b_dims, const T* b,
                    const int64_t* out_dims, T* out, F f) {
  int64_t total = 1;
  for (int d = 0; d < rank; ++d) total *= out_dims[d];
  if (total == 0) return;
  const int64_t inner = rank ? out_dims[rank - 1] : 1;
  const int64_t as = rank && a_dims[rank - 1] != 1 ? 1 : 0, bs = rank && b_dims[rank - 1] != 1 ? 1 : 0;
  // Strides of A and B per output dim (0 where broadcast).
  int64_t a_str[kMaxDims] = {}, b_str[kMaxDims] = {};
  int64_t sa = 1, sb = 1;
  for (int d = rank - 1; d >= 0; --d) {
    a_str[d] = a_dims[d] == 1 ? 0 : sa;
    b_str[d] = b_dims[d] == 1 ? 0 : sb;
    sa *= a_dims[d];
    sb *= b_dims[d];
  }
  if (std::equal(a_dims, a_dims + rank, out_dims) && std::equal(b_dims, b_dims + rank, out_dims)) {
    // Same shapes (residual adds): one flat loop the compiler vectorizes.
    parallel_for(0, total, kFlatGrain, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) out[i] = f(a[i], b[i]);
    });
    return;
  }
  const int64_t lines = total / inner;
  parallel_for(0, lines, std::max<int64_t>(1, kGrain / std::max<int64_t>(inner, 1)), [&](int64_t l0, int64_t l1) {
    for (int64_t l = l0; l < l1; ++l) {
      int64_t rem = l, ao = 0, bo = 0;
      for (int d = rank - 2; d >= 0; --d) {
        const int64_t idx = rem % out_dims[d];
        rem /= out_dims[d];
        ao += idx * a_str[d];
        bo += idx * b_str[d];
      }
      const T* pa = a + ao;
      const T* pb = b + bo;
      T* po = out + l * inner;
      if (as && bs) {
        for (int64_t i = 0; i < inner; ++i) po[i] = f(pa[i], pb[i]);
      } else if (as) {
        const T vb = pb[0];
        for (int64_t i = 0; i < inner; ++i) po[i] = f(pa[i], vb);
      } else if (bs) {
        const T va = pa[0];
        for (int64_t i = 0; i < inner; ++i) po[i] = f(va, pb[i]);
      } else {
        const T v = f(pa[0], pb[0]);
        for (int64_t i = 0; i < inner; ++i) po[i] = v;
      }
    }
  });
}

template <typename F>
void binary_loop(int rank, const int64_t* a_dims, const float* a, const int64_t* b_dims, const float* b,
                 const int64_t* out_dims, float* out, float lo, float hi, F f) {
  broadcast_loop(rank, a_dims, a, b_dims, b, out_dims, out, [&](float x, float y) { return clampf(f(x, y), lo, hi); });
}

}  // namespace

void binary(BinaryKind kind, int rank, const int64_t* a_dims, const float* a, const int64_t* b_dims, const float* b,
            const int64_t* out_dims, float* out, float lo, float hi) {
  switch (kind) {
    case BinaryKind::kAdd:
      return binary_loop(rank, a_dims, a, b_dims, b, out_dims, out, lo, hi, [](float x, float y) { return x + y; });
    case BinaryKind::kSub:
      return binary_loop(rank, a_dims, a, b_dims, b, out_dims, out, lo, hi, [](float x, float y) { return x - y; });
    case BinaryKind::kMul:
      return binary_loop(rank, a_dims, a, b_dims, b, out_dims, out, lo, hi, [](float x, float y) { return x * y; });
    case BinaryKind::kDiv:
      return binary_loop(rank, a_dims, a, b_dims, b, out_dims, out, lo, hi, [](float x, float y) { return x / y; });
    case BinaryKind::kMin:
      return binary_loop(rank, a_dims, a, b_dims, b, out_dims, out, lo, hi,
                         [](float x, float y) { return x != x || y != y ? x + y : std::min(x, y); });
    case BinaryKind::kMax:
      return binary_loop(rank, a_dims, a, b_dims, b, out_dims, out, lo, hi,
                         [](float x, float y) { return x != x || y != y ? x + y : std::max(x, y); });
    case BinaryKind::kPrelu:
      return binary_loop(rank, a_dims, a, b_dims, b, out_dims, out, lo, hi,
                         [](float x, float s) { return x < 0 ? x * s : x; });
  }
}

void unary(UnaryKind kind, const float* x, float* y, int64_t n, float alpha, float lo, float hi) {
  using kernels::cpu::vexp;
  if (kind == UnaryKind::kGelu) {
    kernels::cpu::gelu(x, y, n, false);
    if (lo > -INFINITY || hi < INFINITY) {
      for (int64_t i = 0; i < n; ++i) y[i] = clampf(y[i], lo, hi);
    }
    return;
  }
  parallel_for(0, n, kFlatGrain, [&](int64_t i0, int64_t i1) {
    const float* xs = x + i0;
    float* ys = y + i0;
    const int64_t m = i1 - i0;
    switch (kind) {
      case UnaryKind::kClamp:
        for (int64_t i = 0; i < m; ++i) ys[i] = clampf(xs[i], lo, hi);
        return;
      case UnaryKind::kHardswish:
        for (int64_t i = 0; i < m; ++i) ys[i] = xs[i] * std::min(std::max(xs[i] + 3.f, 0.f), 6.f) * (1.f / 6.f);
        break;
      case UnaryKind::kSigmoid:
        for (int64_t i = 0; i < m; ++i) ys[i] = 1.f / (1.f + vexp(-xs[i]));
        break;
      case UnaryKind::kTanh:
        for (int64_t i = 0; i < m; ++i) ys[i] = std::tanh(xs[i]);
        break;
      case UnaryKind::kSqrt:
        for (int64_t i = 0; i < m; ++i) ys[i] = std::sqrt(xs[i]);
        break;
      case UnaryKind::kRsqrt:
        for (int64_t i = 0; i < m; ++i) ys[i] = 1.f / std::sqrt(xs[i]);
        break;
      case UnaryKind::kAbs:
        for (int64_t i = 0; i < m; ++i) ys[i] = std::fabs(xs[i]);
        break;
      case UnaryKind::kNeg:
        for (int64_t i = 0; i < m; ++i) ys[i] = -xs[i];
        break;
      case UnaryKind::kSquare:
        for (int64_t i = 0; i < m; ++i) ys[i] = xs[i] * xs[i];
        break;
      case UnaryKind::kFloor:
        for (int64_t i = 0; i < m; ++i) ys[i] = std::floor(xs[i]);
        break;
      case UnaryKind::kCeil:
        for (int64_t i = 0; i < m; ++i) ys[i] = std::ceil(xs[i]);
        break;
      case UnaryKind::kExp:
        for (int64_t i = 0; i < m; ++i) ys[i] = std::exp(xs[i]);
        break;
      case UnaryKind::kLog:
        for (int64_t i = 0; i < m; ++i) ys[i] = std::log(xs[i]);
        break;
      case UnaryKind::kSin:
        for (int64_t i = 0; i < m; ++i) ys[i] = std::sin(xs[i]);
        break;
      case UnaryKind::kCos:
        for (int64_t i = 0; i < m; ++i) ys[i] = std::cos(xs[i]);
        break;
      case UnaryKind::kElu:
        for (int64_t i = 0; i < m; ++i) ys[i] = xs[i] > 0 ? xs[i] : alpha * std::expm1(xs[i]);
        break;
      case UnaryKind::kLeakyRelu:
        for (int64_t i = 0; i < m; ++i) ys[i] = xs[i] > 0 ? xs[i] : alpha * xs[i];
        break;
      case UnaryKind::kGelu: break;
    }
    if (lo > -INFINITY || hi < INFINITY) {
      for (int64_t i = 0; i < m; ++i) ys[i] = clampf(ys[i], lo, hi);
    }
  });
}

void transpose(size_t elem, int rank, const int64_t* in_dims, const int64_t* perm, const void* in, void* out) {
  int64_t in_str[kMaxDims], out_dims[kMaxDims], str[kMaxDims];
  int64_t s = 1, total = 1;
  for (int d = rank - 1; d >= 0; --d) in_str[d] = s, s *= in_dims[d];
  for (int d = 0; d < rank; ++d) out_dims[d] = in_dims[perm[d]], str[d] = in_str[perm[d]], total *= out_dims[d];
  if (total == 0) return;
  // Moving only dims of size 1 leaves the bytes in place (e.g. NHWC [N, 1, 1, C] back to NCHW).
  int64_t prev = -1;
  bool in_order = true;
  for (int d = 0; d < rank && in_order; ++d) {
    if (out_dims[d] == 1) continue;
    in_order = perm[d] > prev;
    prev = perm[d];
  }
  if (in_order) {
    // memmove: a malformed file's memory plan may overlap an argument with the result.
    std::memmove(out, in, static_cast<size_t>(total) * elem);
    return;
  }
  const int64_t inner = rank ? out_dims[rank - 1] : 1, inner_str = rank ? str[rank - 1] : 1;
  const uint8_t* src = static_cast<const uint8_t*>(in);
  uint8_t* dst = static_cast<uint8_t*>(out);
  // A short last output dim (NCHW -> NHWC with 3 channels: lines of 3) makes per-line overhead
  // dominate: walk lines along the input's contiguous dim instead, reading in order and writing
  // with the output's stride for that dim.
  int64_t along = -1;
  for (int d = 0; d + 1 < rank; ++d)
    if (str[d] == 1 && out_dims[d] >= 16) along = d;
  const auto along_lines = [&](auto zero) {
    using T = decltype(zero);
    int64_t out_str[kMaxDims];
    s = 1;
    for (int d = rank - 1; d >= 0; --d) out_str[d] = s, s *= out_dims[d];
    // When `along` is the next-to-last output dim, a line carries all `inner` values of each of
    // its positions, so the output is written in order too.
    const bool tile = along == rank - 2;
    const int64_t len = out_dims[along], ostep = out_str[along], width = tile ? inner : 1;
    parallel_for(0, total / (len * width), std::max<int64_t>(1, kGrain / (len * width)), [&](int64_t l0, int64_t l1) {
      // Odometer over the output dims but `along` (and the last, for a tile), keeping the input
      // and output offsets.
      int64_t idx[kMaxDims] = {}, off = 0, ooff = 0, rem = l0;
      for (int d = rank - 1; d >= 0; --d) {
        if (d == along || (tile && d == rank - 1)) continue;
        idx[d] = rem % out_dims[d], off += idx[d] * str[d], ooff += idx[d] * out_str[d];
        rem /= out_dims[d];
      }
      for (int64_t l = l0; l < l1; ++l) {
        if (l != l0) {
          for (int d = rank - 1; d >= 0; --d) {
            if (d == along || (tile && d == rank - 1)) continue;
            off += str[d], ooff += out_str[d];
            if (++idx[d] < out_dims[d]) break;
            off -= idx[d] * str[d], ooff -= idx[d] * out_str[d];
            idx[d] = 0;
          }
        }
        const T* sp = reinterpret_cast<const T*>(src) + off;
        T* op = reinterpret_cast<T*>(dst) + ooff;
        if (tile) {
          for (int64_t i = 0; i < len; ++i)
            for (int64_t j = 0; j < inner; ++j) op[i * inner + j] = sp[i + j * inner_str];
        } else {
          for (int64_t i = 0; i < len; ++i) op[i * ostep] = sp[i];
        }
      }
    });
  };
  if ((elem == 4 || elem == 1) && inner < 16 && along >= 0) {
    if (elem == 4) {
      along_lines(float{});
    } else {
      along_lines(uint8_t{});
    }
    return;
  }
  parallel_for(0, total / inner, std::max<int64_t>(1, kGrain / std::max<int64_t>(inner, 1)),
               [&](int64_t l0, int64_t l1) {
                 // The outer index of line l0, then stepped like an odometer (no division per line).
                 int64_t idx[kMaxDims] = {}, off = 0, rem = l0;
                 for (int d = rank - 2; d >= 0; --d)
                   idx[d] = rem % out_dims[d], off += idx[d] * str[d], rem /= out_dims[d];
                 for (int64_t l = l0; l < l1; ++l) {
                   if (l != l0) {
                     for (int d = rank - 2; d >= 0; --d) {
                       off += str[d];
                       if (++idx[d] < out_dims[d]) break;
                       off -= idx[d] * str[d];
                       idx[d] = 0;
                     }
                   }
                   uint8_t* o = dst + l * inner * elem;
                   if (elem == 4) {
                     const float* sp = reinterpret_cast<const float*>(src) + off;
                     float* op = reinterpret_cast<float*>(o);
                     for (int64_t i = 0; i < inner; ++i) op[i] = sp[i * inner_str];
                   } else if (elem == 1) {
                     const uint8_t* sp = src + off;
                     for (int64_t i = 0; i < inner; ++i) o[i] = sp[i * inner_str];
                   } else {
                     for (int64_t i = 0; i < inner; ++i)
                       std::memmove(o + i * elem, src + (off + i * inner_str) * elem, elem);
                   }
                 }
               });
}

void slice(size_t elem, int rank, const int64_t* in_dims, const int64_t* offsets, const int64_t* out_dims,
           const void* in, void* out) {
  int64_t in_str[kMaxDims], total = 1, s = 1;
  for (int d = rank - 1; d >= 0; --d) in_str[d] = s, s *= in_dims[d];
  for (int d = 0; d < rank; ++d) total *= out_dims[d];
  if (total == 0) return;
  const int64_t inner = out_dims[rank - 1];
  const uint8_t* src = static_cast<const uint8_t*>(in);
  uint8_t* dst = static_cast<uint8_t*>(out);
  for (int64_t l = 0; l < total / inner; ++l) {
    int64_t rem = l, off = offsets[rank - 1];
    for (int d = rank - 2; d >= 0; --d) off += (rem % out_dims[d] + offsets[d]) * in_str[d], rem /= out_dims[d];
    std::memmove(dst + l * inner * elem, src + off * elem, inner * elem);
  }
}

void pad(size_t elem, int rank, const int64_t* in_dims, const int64_t* before, const int64_t* out_dims,
         const void* value, const void* in, void* out) {
  int64_t total = 1, in_total = 1;
  for (int d = 0; d < rank; ++d) total *= out_dims[d], in_total *= in_dims[d];
  uint8_t* dst = static_cast<uint8_t*>(out);
  for (int64_t i = 0; i < total; ++i) std::memcpy(dst + i * elem, value, elem);
  if (in_total == 0) return;
  int64_t out_str[kMaxDims], s = 1;
  for (int d = rank - 1; d >= 0; --d) out_str[d] = s, s *= out_dims[d];
  const int64_t inner = in_dims[rank - 1];
  const uint8_t* src = static_cast<const uint8_t*>(in);
  for (int64_t l = 0; l < in_total / inner; ++l) {
    int64_t rem = l, off = before[rank - 1];
    for (int d = rank - 2; d >= 0; --d) off += (rem % in_dims[d] + before[d]) * out_str[d], rem /= in_dims[d];
    std::memmove(dst + off * elem, src + l * inner * elem, inner * elem);
  }
}

void concat(size_t elem, int rank, int64_t axis, int count, const int64_t* const* in_dims, const void* const* in,
            void* out) {
  int64_t outer = 1, out_axis = 0;
  for (int d = 0; d < axis; ++d) outer *= in_dims[0][d];
  int64_t inner = 1;
  for (int d = static_cast<int>(axis) + 1; d < rank; ++d) inner *= in_dims[0][d];
  for (int i = 0; i < count; ++i) out_axis += in_dims[i][axis];
  uint8_t* dst = static_cast<uint8_t*>(out);
  for (int64_t o = 0; o < outer; ++o) {
    int64_t at = 0;
    for (int i = 0; i < count; ++i) {
      const int64_t chunk = in_dims[i][axis] * inner * static_cast<int64_t>(elem);
      std::memmove(dst + (o * out_axis * inner) * elem + at, static_cast<const uint8_t*>(in[i]) + o * chunk, chunk);
      at += chunk;
    }
  }
}

namespace {
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

// o = the running maximum of taps[0..count) in tap order (count >= 1; taps[0] may be o itself),
// kept in registers a cache line of channels at a time: a later tap s wins where s > m, so a NaN
// in a later tap never wins and one in the first stays.
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
      const M gt = reinterpret_cast<M>(s > m);
      m = reinterpret_cast<V>((reinterpret_cast<M>(s) & gt) | (reinterpret_cast<M>(m) & ~gt));
    }
    *reinterpret_cast<V*>(o + c0) = m;
  }
  for (; c0 < c; ++c0) {
    T m = taps[0][c0];
    for (int64_t t = 1; t < count; ++t) m = taps[t][c0] > m ? taps[t][c0] : m;
    o[c0] = m;
  }
}
constexpr int64_t kMaxPoolTaps = 64;  // taps max_taps folds per call (larger windows: in chunks)
}  // namespace

// The taps t in [0, k) whose position base + t * dil falls in [0, extent): a pooling window has no
// weights, so its size is bounded only by the file; iterating just these keeps the work proportional
// to the input it reads.
inline void tap_range(int64_t base, int64_t dil, int64_t extent, int64_t k, int64_t* first, int64_t* end) {
  *first = base >= 0 ? 0 : (-base + dil - 1) / dil;
  *end = base >= extent ? 0 : std::min<int64_t>(k, (extent - 1 - base) / dil + 1);
}

template <typename T>
void max_pool_nhwc(const ConvParams& p, int64_t n, int64_t h, int64_t w, int64_t c, int64_t oh, int64_t ow, const T* in,
                   T* out, float lo, float hi) {
  if (c == 0) return;  // no output values: nothing to compute, however large the window
  parallel_for(0, n * oh, 1, [&](int64_t r0, int64_t r1) {
    const T* taps[kMaxPoolTaps];
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / oh, y = r % oh;
      int64_t ky0, ky1;
      tap_range(y * p.stride_h - p.pad_top, p.dilation_h, h, p.kernel_h, &ky0, &ky1);
      for (int64_t x = 0; x < ow; ++x) {
        T* o = out + ((b * oh + y) * ow + x) * c;
        // Taps in chunks; after the first, the output so far leads the next chunk.
        int64_t count = 0;
        bool folded = false;
        int64_t kx0, kx1;
        tap_range(x * p.stride_w - p.pad_left, p.dilation_w, w, p.kernel_w, &kx0, &kx1);
        for (int64_t ky = ky0; ky < ky1; ++ky) {
          const int64_t iy = y * p.stride_h - p.pad_top + ky * p.dilation_h;
          for (int64_t kx = kx0; kx < kx1; ++kx) {
            const int64_t ix = x * p.stride_w - p.pad_left + kx * p.dilation_w;
            taps[count++] = in + ((b * h + iy) * w + ix) * c;
            if (count == kMaxPoolTaps) {
              max_taps(c, taps, count, o);
              taps[0] = o;
              count = 1;
              folded = true;
            }
          }
        }
        if (count > (folded ? 1 : 0)) max_taps(c, taps, count, o);
        if (count == 0) std::memset(o, 0, sizeof(T) * c);
        if (sizeof(T) == 4 && (lo > -INFINITY || hi < INFINITY)) {
          for (int64_t ch = 0; ch < c; ++ch) o[ch] = static_cast<T>(clampf(static_cast<float>(o[ch]), lo, hi));
        }
      }
    }
  });
}

template void max_pool_nhwc<float>(const ConvParams&, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                                   const float*, float*, float, float);
template void max_pool_nhwc<int8_t>(const ConvParams&, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                                    const int8_t*, int8_t*, float, float);
template void max_pool_nhwc<uint8_t>(const ConvParams&, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                                     const uint8_t*, uint8_t*, float, float);

void avg_pool_nhwc(const ConvParams& p, int64_t n, int64_t h, int64_t w, int64_t c, int64_t oh, int64_t ow,
                   const float* in, float* out, float lo, float hi) {
  if (c == 0) return;  // no output values: nothing to compute, however large the window
  parallel_for(0, n * oh, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / oh, y = r % oh;
      int64_t ky0, ky1;
      tap_range(y * p.stride_h - p.pad_top, p.dilation_h, h, p.kernel_h, &ky0, &ky1);
      for (int64_t x = 0; x < ow; ++x) {
        float* o = out + ((b * oh + y) * ow + x) * c;
        std::memset(o, 0, sizeof(float) * c);
        int64_t count = 0;
        int64_t kx0, kx1;
        tap_range(x * p.stride_w - p.pad_left, p.dilation_w, w, p.kernel_w, &kx0, &kx1);
        for (int64_t ky = ky0; ky < ky1; ++ky) {
          const int64_t iy = y * p.stride_h - p.pad_top + ky * p.dilation_h;
          for (int64_t kx = kx0; kx < kx1; ++kx) {
            const int64_t ix = x * p.stride_w - p.pad_left + kx * p.dilation_w;
            const float* s = in + ((b * h + iy) * w + ix) * c;
            for (int64_t ch = 0; ch < c; ++ch) o[ch] += s[ch];
            ++count;
          }
        }
        const float inv = count ? 1.f / static_cast<float>(count) : 0.f;
        for (int64_t ch = 0; ch < c; ++ch) o[ch] = clampf(o[ch] * inv, lo, hi);
      }
    }
  });
}

namespace {
// o[ch] += in[i * stride + ch] for pixels i in order, built per ISA.
ET_MULTIVERSION void add_pixels(int64_t c, int64_t pixels, int64_t stride, const float* in, float* o) {
  for (int64_t i = 0; i < pixels; ++i)
    for (int64_t ch = 0; ch < c; ++ch) o[ch] += in[i * stride + ch];
}
}  // namespace

void global_avg_pool_nhwc(int64_t n, int64_t hw, int64_t c, const float* in, float* out, float lo, float hi) {
  // Chunks of whole channel blocks per image (a batch of one is still split): each channel is
  // summed over the pixels in order by one chunk, so the result does not depend on the split.
  constexpr int64_t kChannels = 128;
  const int64_t blocks = (c + kChannels - 1) / kChannels;
  const float inv = hw ? 1.f / static_cast<float>(hw) : 0.f;
  parallel_for(0, n * blocks, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / blocks, c0 = t % blocks * kChannels, cn = std::min(kChannels, c - c0);
      float* o = out + b * c + c0;
      std::memset(o, 0, sizeof(float) * cn);
      add_pixels(cn, hw, c, in + b * hw * c + c0, o);
      for (int64_t ch = 0; ch < cn; ++ch) o[ch] = clampf(o[ch] * inv, lo, hi);
    }
  });
}

namespace {
// Round half to even of x * inv, clamped to [lo, hi] (offsets from the zero point): clamp first,
// then add and subtract 1.5 * 2^23, which rounds to nearest even in float32 for |v| < 2^22. A NaN
// maps to 0 (the zero point). Branch-free, so the loop vectorizes (per ISA: IEEE operations
// without a fused multiply-add, so every ISA gives the same bytes).
template <typename T>
ET_MULTIVERSION void quantize_loop(const float* x, int64_t n, float inv, int32_t zero_point, float lo, float hi,
                                   T* out) {
  constexpr float kMagic = 12582912.f;
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] * inv;
    v = v == v ? v : 0.f;
    v = std::min(std::max(v, lo), hi);
    v = (v + kMagic) - kMagic;
    out[i] = static_cast<T>(static_cast<int32_t>(v) + zero_point);
  }
}
}  // namespace

void quantize(const float* x, int64_t n, float scale, int32_t zero_point, int32_t qmin, int32_t qmax, void* out,
              bool is_signed) {
  const float inv = 1.f / scale;
  const float lo = static_cast<float>(qmin - zero_point), hi = static_cast<float>(qmax - zero_point);
  parallel_for(0, n, kFlatGrain, [&](int64_t i0, int64_t i1) {
    if (is_signed) {
      quantize_loop(x + i0, i1 - i0, inv, zero_point, lo, hi, static_cast<int8_t*>(out) + i0);
    } else {
      quantize_loop(x + i0, i1 - i0, inv, zero_point, lo, hi, static_cast<uint8_t*>(out) + i0);
    }
  });
}

void dequantize(const void* q, int64_t n, float scale, int32_t zero_point, bool is_signed, float* out) {
  parallel_for(0, n, kFlatGrain, [&](int64_t i0, int64_t i1) {
    if (is_signed) {
      const int8_t* s = static_cast<const int8_t*>(q);
      for (int64_t i = i0; i < i1; ++i) out[i] = static_cast<float>(int32_t(s[i]) - zero_point) * scale;
    } else {
      const uint8_t* s = static_cast<const uint8_t*>(q);
      for (int64_t i = i0; i < i1; ++i) out[i] = static_cast<float>(int32_t(s[i]) - zero_point) * scale;
    }
  });
}

void quantize_rows(const float* x, int64_t rows, int64_t cols, int8_t* out, float* scale, int32_t* zero_point) {
  // The QD8 fully connected kernels' row quantization (XNNPACK's: x * (255 / range), not x / scale,
  // which differs on a rounding boundary), so a Convert to qdint8 gives the rows they would.
  parallel_for(0, rows, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      kernels::cpu::quantize_row_qd8(x + r * cols, cols, out + r * cols, scale + r, zero_point + r);
    }
  });
}

void dequantize_rows(const int8_t* q, int64_t rows, int64_t cols, const float* scale, const int32_t* zero_point,
                     float* out) {
  for (int64_t r = 0; r < rows; ++r) dequantize(q + r * cols, cols, scale[r], zero_point[r], true, out + r * cols);
}

Qs8BinaryParams qs8_binary_params(BinaryKind kind, const Value& a, const Value& b, const Value& y) {
  Qs8BinaryParams p;
  if (kind == BinaryKind::kMul) {
    p.scale = a.scale * b.scale / y.scale;
    p.ok = std::isfinite(p.scale) && p.scale > 0.f;
    return p;
  }
  const float ra = a.scale / y.scale, rb = (kind == BinaryKind::kSub ? -1.f : 1.f) * (b.scale / y.scale);
  const float top = std::max(std::fabs(ra), std::fabs(rb));
  int exponent = 0;
  std::frexp(top, &exponent);
  p.shift = 21 - exponent;
  if (!std::isfinite(top) || p.shift < 12 || p.shift > 30) return p;
  p.a_mul = static_cast<int32_t>(std::nearbyint(std::ldexp(double(ra), p.shift)));
  p.b_mul = static_cast<int32_t>(std::nearbyint(std::ldexp(double(rb), p.shift)));
  p.bias = (int32_t(1) << (p.shift - 1)) - p.a_mul * a.zero_point - p.b_mul * b.zero_point;
  p.ok = true;
  return p;
}

void qs8_binary(BinaryKind kind, const Qs8BinaryParams& p, int rank, const int64_t* a_dims, const int8_t* a,
                const int64_t* b_dims, const int8_t* b, const int64_t* out_dims, int8_t* out, int32_t a_zp,
                int32_t b_zp, int32_t out_zp, int8_t qmin, int8_t qmax) {
  const int32_t lo = qmin - out_zp, hi = qmax - out_zp;
  if (kind == BinaryKind::kMul) {
    constexpr float kMagic = 12582912.f;  // round half to even, as quantize()
    const float flo = static_cast<float>(lo), fhi = static_cast<float>(hi), scale = p.scale;
    broadcast_loop(rank, a_dims, a, b_dims, b, out_dims, out, [=](int8_t x, int8_t y) {
      float v = static_cast<float>((int32_t(x) - a_zp) * (int32_t(y) - b_zp)) * scale;
      v = (std::min(std::max(v, flo), fhi) + kMagic) - kMagic;
      return static_cast<int8_t>(static_cast<int32_t>(v) + out_zp);
    });
    return;
  }
  broadcast_loop(rank, a_dims, a, b_dims, b, out_dims, out, [=](int8_t x, int8_t y) {
    const int32_t v = (int32_t(x) * p.a_mul + int32_t(y) * p.b_mul + p.bias) >> p.shift;
    return static_cast<int8_t>(std::min(std::max(v, lo), hi) + out_zp);
  });
}

kernels::cpu::Qs8AddQuant add_quant(const Op& op, const Plan& plan) {
  const Value& a = plan.values[op.in[0]];
  const Value& b = plan.values[op.in[1]];
  const Value& y = plan.values[op.out];
  kernels::cpu::Qs8AddQuant q;
  q.a_scale = a.scale, q.a_zero_point = a.zero_point;
  q.b_scale = b.scale, q.b_zero_point = b.zero_point;
  q.out_scale = y.scale, q.out_zero_point = y.zero_point;
  return q;
}

}  // namespace xnnpack
}  // namespace backends
}  // namespace executorch
