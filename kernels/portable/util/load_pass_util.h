// Helpers the portable kernels' load passes share: reading constant arguments, tensor layouts and
// memory overlap, a 2-D convolution's geometry, and the NCHW <-> NHWC plane transpose.
#pragma once

#include <cstdint>

#include "kernels/cpu/conv_nhwc.h"
#include "kernels/cpu/parallel.h"
#include "kernels/portable/util/kernel_util.h"
#include "runtime/core/load_pass.h"

namespace executorch {
namespace kernels {

inline bool channels_last(const Tensor& t) {
  const auto d = t.dim_order();
  return t.dim() == 4 && d[0] == 0 && d[1] == 2 && d[2] == 3 && d[3] == 1;
}

inline bool same_dim_order(const Tensor& a, const Tensor& b) {
  if (a.dim() != b.dim()) return false;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (a.dim_order()[d] != b.dim_order()[d]) return false;
  return true;
}

// Whether [a, a + an) and [b, b + bn) share a byte.
inline bool overlap(const void* a, size_t an, const void* b, size_t bn) {
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x < y + bn && y < x + an;
}

// The bytes a tensor may ever occupy (its capacity, or its size when larger).
inline size_t bytes_of(const Tensor& t) {
  const size_t cap = t.unsafeGetTensorImpl()->capacity_bytes();
  return cap > t.nbytes() ? cap : t.nbytes();
}

// A constant int list argument of one value or one per spatial dim, as a pair (h, w).
inline bool pair_of(runtime::MethodRewriter& m, const EValue* v, int64_t fallback, int64_t* hw) {
  if (!v->isIntList() || !m.is_constant(v)) return false;
  const Span<const int64_t> l = v->toIntList();
  if (l.size() > 2) return false;
  hw[0] = l.size() == 0 ? fallback : l[0];
  hw[1] = l.size() == 0 ? fallback : l[l.size() - 1];
  return true;
}

inline bool constant_scalar(runtime::MethodRewriter& m, const EValue* v, float* out) {
  if (!v->isScalar() || !m.is_constant(v)) return false;
  *out = static_cast<float>(v->toScalarDouble());
  return true;
}

// The geometry of convolution.out's call `a` (11 arguments, not transposed, constant
// stride/padding/dilation/groups) over a [O, I/groups, kh, kw] weight; false when it is not one
// the NHWC kernels take or does not match the input's channels.
inline bool conv_geometry(runtime::MethodRewriter& m, Args a, const Tensor& weight, int64_t in_channels,
                          cpu::ConvNhwc* g) {
  int64_t stride[2], pad[2], dilation[2];
  if (a.size() != 11 || !a[6]->isBool() || a[6]->toBool() || !a[8]->isInt() || !m.is_constant(a[8]) ||
      weight.dim() != 4 || !pair_of(m, a[3], 1, stride) || !pair_of(m, a[4], 0, pad) || !pair_of(m, a[5], 1, dilation))
    return false;
  g->kernel_h = weight.size(2);
  g->kernel_w = weight.size(3);
  g->stride_h = stride[0];
  g->stride_w = stride[1];
  g->dilation_h = dilation[0];
  g->dilation_w = dilation[1];
  g->pad_top = g->pad_bottom = pad[0];
  g->pad_left = g->pad_right = pad[1];
  g->groups = a[8]->toInt();
  g->group_in_channels = weight.size(1);
  g->group_out_channels = g->groups > 0 && weight.size(0) % g->groups == 0 ? weight.size(0) / g->groups : 0;
  return g->valid() && in_channels == g->in_channels();
}

// [n, rows, cols] -> [n, cols, rows] (NCHW <-> NHWC with rows * cols = C * H * W), in tiles so
// both sides are read in runs.
template <typename T>
void transpose_planes(const T* in, T* out, int64_t n, int64_t rows, int64_t cols) {
  constexpr int64_t kTile = 32;
  cpu::parallel_for(0, n * ((rows + kTile - 1) / kTile), 1, [&](int64_t lo, int64_t hi) {
    const int64_t row_tiles = (rows + kTile - 1) / kTile;
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t b = t / row_tiles, r0 = (t % row_tiles) * kTile;
      const int64_t r1 = r0 + kTile < rows ? r0 + kTile : rows;
      const T* src = in + b * rows * cols;
      T* dst = out + b * rows * cols;
      for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
        const int64_t c1 = c0 + kTile < cols ? c0 + kTile : cols;
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t c = c0; c < c1; ++c) dst[c * rows + r] = src[r * cols + c];
      }
    }
  });
}

}  // namespace kernels
}  // namespace executorch
