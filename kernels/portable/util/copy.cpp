// copy_view: same-dtype copies move bytes (memcpy when both sides are dense), others convert.
#include "kernels/portable/util/copy.h"

#include <cstring>

namespace executorch {
namespace kernels {
namespace {

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

template <typename T>
void copy_same(const View& src, const View& dst) {
  const T* s = static_cast<const T*>(src.data);
  T* d = static_cast<T*>(const_cast<void*>(dst.data));
  for_each_pair(src, dst, [&](int64_t so, int64_t dof) { d[dof] = s[so]; });
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
      std::memmove(const_cast<void*>(dst.data), src.data, static_cast<size_t>(numel) * es);
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
    for_each_pair(src, dst, [&](int64_t so, int64_t dof) {
      store_int(d, dst.type, dof, load_int(src.data, src.type, so));
    });
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
