// copy_view: same-dtype copies move bytes (memcpy when both sides are dense), others convert.
#include "kernels/portable/util/copy.h"

#include <cstring>

#include "kernels/cpu/parallel.h"

namespace executorch {
namespace kernels {
namespace {

// Bytes one parallel copy task moves at least: less costs more to hand out than it saves.
constexpr size_t kCopyChunkBytes = size_t(1) << 16;

// True when the view's elements are exactly [data, data + numel) in index order.
bool dense_row_major(const View& v) {
  int64_t expect = 1;
  for (size_t d = v.ndim; d > 0; --d) {
    if (v.sizes[d - 1] != 1 && v.strides[d - 1] != expect) return false;
    expect *= v.sizes[d - 1];
  }
  return true;
}

template <typename F>
void for_each_pair(const View& src, const View& dst, F f) {
  const size_t nd = dst.ndim;
  for (size_t d = 0; d < nd; ++d)
    if (dst.sizes[d] == 0) return;
  int64_t idx[kMaxDim] = {};
  int64_t so = 0, doff = 0;
  const int64_t inner = nd == 0 ? 1 : dst.sizes[nd - 1];
  const int64_t ss = nd == 0 ? 0 : src.strides[nd - 1];
  const int64_t ds = nd == 0 ? 0 : dst.strides[nd - 1];
  while (true) {
    for (int64_t i = 0; i < inner; ++i) f(so + i * ss, doff + i * ds);
    size_t d = nd == 0 ? 0 : nd - 1;
    while (true) {
      if (d == 0) return;
      --d;
      if (++idx[d] < dst.sizes[d]) {
        so += src.strides[d];
        doff += dst.strides[d];
        break;
      }
      so -= src.strides[d] * (dst.sizes[d] - 1);
      doff -= dst.strides[d] * (dst.sizes[d] - 1);
      idx[d] = 0;
    }
  }
}

// The dim (other than the last) along which `src` is unit-stride, when its last dim is not:
// the shape of a transpose, where element-by-element copying misses the cache on every read.
bool transposed_dim(const View& src, const View& dst, size_t* dim) {
  const size_t last = dst.ndim - 1;
  if (dst.ndim < 2 || src.strides[last] == 1 || dst.sizes[last] < 2) return false;
  for (size_t d = 0; d < last; ++d) {
    if (src.strides[d] == 1 && dst.sizes[d] > 1) {
      *dim = d;
      return true;
    }
  }
  return false;
}

// View without dims a and b (a > b): the outer loops of a tiled 2-D copy.
View without_dims(const View& v, size_t a, size_t b) {
  View out = v;
  out.ndim = 0;
  for (size_t d = 0; d < v.ndim; ++d) {
    if (d == a || d == b) continue;
    out.sizes[out.ndim] = v.sizes[d];
    out.strides[out.ndim++] = v.strides[d];
  }
  return out;
}

template <typename T>
void copy_same(const View& src, const View& dst) {
  const T* s = static_cast<const T*>(src.data);
  T* d = static_cast<T*>(const_cast<void*>(dst.data));
  size_t b;
  if (!transposed_dim(src, dst, &b)) {
    const size_t last = dst.ndim - 1;
    if (dst.ndim > 0 && src.strides[last] == 1 && dst.strides[last] == 1 && dst.sizes[last] > 1) {
      // Rows contiguous on both sides (permutes that keep the last dim, expands, slices):
      // one memmove per row instead of an indexed copy per element.
      const size_t bytes = static_cast<size_t>(dst.sizes[last]) * sizeof(T);
      int64_t rows = 1;
      for (size_t k = 0; k < last; ++k) rows *= dst.sizes[k];
      // Rows in chunks of at least kCopyChunkBytes, shared over the thread pool; each row is
      // copied by one chunk, so the result is the same for any thread count.
      const int64_t grain = static_cast<int64_t>(kCopyChunkBytes / bytes) + 1;
      cpu::parallel_for(0, rows, grain, [&](int64_t r0, int64_t r1) {
        // The chunk's first row's offsets, then an odometer over the outer dims.
        int64_t idx[kMaxDim] = {}, sr = 0, dr = 0;
        for (size_t k = last, rest = static_cast<size_t>(r0); k > 0; --k) {
          idx[k - 1] = static_cast<int64_t>(rest % static_cast<size_t>(dst.sizes[k - 1]));
          rest /= static_cast<size_t>(dst.sizes[k - 1]);
          sr += idx[k - 1] * src.strides[k - 1];
          dr += idx[k - 1] * dst.strides[k - 1];
        }
        for (int64_t r = r0; r < r1; ++r) {
          std::memmove(d + dr, s + sr, bytes);
          for (size_t k = last; k > 0; --k) {
            if (++idx[k - 1] < dst.sizes[k - 1]) {
              sr += src.strides[k - 1];
              dr += dst.strides[k - 1];
              break;
            }
            sr -= src.strides[k - 1] * (dst.sizes[k - 1] - 1);
            dr -= dst.strides[k - 1] * (dst.sizes[k - 1] - 1);
            idx[k - 1] = 0;
          }
        }
      });
      return;
    }
    for_each_pair(src, dst, [&](int64_t so, int64_t dof) { d[dof] = s[so]; });
    return;
  }
  // Copy in square tiles so each tile's source lines stay cached while it is written.
  constexpr int64_t kTile = 32;
  const size_t a = dst.ndim - 1;
  const int64_t na = dst.sizes[a], nb = dst.sizes[b];
  const int64_t sa = src.strides[a], sb = src.strides[b], da = dst.strides[a], db = dst.strides[b];
  for_each_pair(without_dims(src, a, b), without_dims(dst, a, b), [&](int64_t so, int64_t dof) {
    for (int64_t i0 = 0; i0 < nb; i0 += kTile)
      for (int64_t j0 = 0; j0 < na; j0 += kTile) {
        const int64_t i1 = i0 + kTile < nb ? i0 + kTile : nb, j1 = j0 + kTile < na ? j0 + kTile : na;
        for (int64_t i = i0; i < i1; ++i)
          for (int64_t j = j0; j < j1; ++j) d[dof + i * db + j * da] = s[so + i * sb + j * sa];
      }
  });
}

}  // namespace

View view_of(const Tensor& t) {
  View v;
  v.data = t.const_data_ptr();
  v.type = t.scalar_type();
  v.ndim = static_cast<size_t>(t.dim());
  for (size_t d = 0; d < v.ndim && d < kMaxDim; ++d) {
    v.sizes[d] = t.sizes()[d];
    v.strides[d] = t.strides()[d];
  }
  return v;
}

void copy_view(const View& src, const View& dst) {
  int64_t numel = 1;
  for (size_t d = 0; d < dst.ndim; ++d) numel *= dst.sizes[d];
  if (numel == 0) return;
  if (src.type == dst.type) {
    const size_t es = runtime::element_size(src.type);
    if (dense_row_major(src) && dense_row_major(dst)) {
      char* d = static_cast<char*>(const_cast<void*>(dst.data));
      const char* s = static_cast<const char*>(src.data);
      const int64_t total = numel * static_cast<int64_t>(es);
      // Disjoint buffers (the planner never overlaps an op's input and output) split over the
      // pool; an overlapping pair takes one memmove.
      const bool disjoint = d + total <= s || s + total <= d;
      if (!disjoint) {
        std::memmove(d, s, static_cast<size_t>(total));
        return;
      }
      cpu::parallel_for(0, total, static_cast<int64_t>(kCopyChunkBytes),
                        [&](int64_t b0, int64_t b1) { std::memcpy(d + b0, s + b0, static_cast<size_t>(b1 - b0)); });
      return;
    }
    switch (es) {
      case 1: copy_same<uint8_t>(src, dst); return;
      case 2: copy_same<uint16_t>(src, dst); return;
      case 4: copy_same<uint32_t>(src, dst); return;
      case 8: copy_same<uint64_t>(src, dst); return;
      default: return;
    }
  }
  void* d = const_cast<void*>(dst.data);
  if (is_floating(src.type) || is_floating(dst.type)) {
    for_each_pair(src, dst, [&](int64_t so, int64_t dof) {
      store_double(d, dst.type, dof, load_double(src.data, src.type, so));
    });
  } else {
    for_each_pair(src, dst,
                  [&](int64_t so, int64_t dof) { store_int(d, dst.type, dof, load_int(src.data, src.type, so)); });
  }
}

void fill_view(const View& dst, double value) {
  void* d = const_cast<void*>(dst.data);
  if (dst.type == ScalarType::Float && dense_row_major(dst)) {
    int64_t numel = 1;
    for (size_t i = 0; i < dst.ndim; ++i) numel *= dst.sizes[i];
    float* f = static_cast<float*>(d);
    for (int64_t i = 0; i < numel; ++i) f[i] = static_cast<float>(value);
    return;
  }
  for_each_pair(dst, dst, [&](int64_t, int64_t dof) { store_double(d, dst.type, dof, value); });
}

}  // namespace kernels
}  // namespace executorch
