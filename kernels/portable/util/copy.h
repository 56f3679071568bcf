// Strided views and the one copy routine every layout op (permute, slice, cat, ...) reduces to.
#pragma once

#include <cstdint>

#include "kernels/portable/util/kernel_util.h"

namespace executorch {
namespace kernels {

// Elements data[sum(i_d * strides[d])] over the index box `sizes` (strides may be 0 or negative).
struct View {
  const void* data = nullptr;
  ScalarType type = ScalarType::Float;
  size_t ndim = 0;
  int64_t sizes[kMaxDim] = {};
  int64_t strides[kMaxDim] = {};
};

View view_of(const Tensor& t);

// A view of `t` moved `offset` elements in.
inline View view_at(const Tensor& t, int64_t offset) {
  View v = view_of(t);
  v.data = static_cast<const char*>(v.data) + offset * static_cast<int64_t>(t.element_size());
  return v;
}

// dst[idx] = convert(src[idx]) for every index of the common box. Sizes must match; both
// dtypes must be supported (or equal, for a plain byte copy of any type).
void copy_view(const View& src, const View& dst);

// Fills every element of `dst` with `value` converted to its dtype.
void fill_view(const View& dst, double value);

}  // namespace kernels
}  // namespace executorch
