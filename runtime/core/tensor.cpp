// TensorImpl resizing and stride derivation.
#include "runtime/core/tensor.h"

namespace executorch {
namespace runtime {

TensorImpl::TensorImpl(ScalarType type, size_t dim, SizesType* sizes, DimOrderType* dim_order, StridesType* strides,
                       void* data, size_t capacity_bytes, TensorShapeDynamism dynamism)
    : type_(type),
      dim_(dim),
      sizes_(sizes),
      dim_order_(dim_order),
      strides_(strides),
      data_(data),
      capacity_bytes_(capacity_bytes),
      dynamism_(dynamism) {
  update_strides_and_numel();
}

void TensorImpl::update_strides_and_numel() {
  // The innermost dimension in dim order has stride 1; walk outwards.
  int64_t running = 1;
  for (size_t i = dim_; i > 0; --i) {
    DimOrderType d = dim_order_ != nullptr ? dim_order_[i - 1] : static_cast<DimOrderType>(i - 1);
    if (strides_ != nullptr && d < dim_) strides_[d] = static_cast<StridesType>(running);
    if (d < dim_) running *= sizes_[d];
  }
  numel_ = running;
}

template <typename S>
static Error resize_impl(TensorImpl& self, SizesType* sizes, Span<const S> new_sizes) {
  if (new_sizes.size() != self.dim()) return Error::InvalidArgument;
  // Overflow-safe: every factor is checked against the remaining capacity.
  uint64_t nbytes = self.element_size();
  // Strides are 32-bit: the product of the non-zero sizes must fit even when a zero
  // size makes the tensor empty.
  uint64_t span = 1;
  bool same = true;
  for (size_t i = 0; i < new_sizes.size(); ++i) {
    if (new_sizes[i] < 0 || static_cast<int64_t>(new_sizes[i]) > INT32_MAX) return Error::InvalidArgument;
    uint64_t s = static_cast<uint64_t>(new_sizes[i]);
    span *= s == 0 ? 1 : s;
    if (span > INT32_MAX) return Error::InvalidArgument;
    nbytes *= s;
    same = same && static_cast<int64_t>(sizes[i]) == static_cast<int64_t>(new_sizes[i]);
  }
  if (same) return Error::Ok;
  if (self.shape_dynamism() == TensorShapeDynamism::Static) return Error::NotSupported;
  if (nbytes > self.capacity_bytes()) return Error::OutOfResources;
  for (size_t i = 0; i < new_sizes.size(); ++i) sizes[i] = static_cast<SizesType>(new_sizes[i]);
  return Error::Ok;
}

Error TensorImpl::resize(Span<const SizesType> new_sizes) {
  Error e = resize_impl(*this, sizes_, new_sizes);
  if (e == Error::Ok) update_strides_and_numel();
  return e;
}

Error TensorImpl::resize(Span<const int64_t> new_sizes) {
  Error e = resize_impl(*this, sizes_, new_sizes);
  if (e == Error::Ok) update_strides_and_numel();
  return e;
}

bool Tensor::is_contiguous() const {
  Span<const DimOrderType> order = impl_->dim_order();
  for (size_t i = 0; i < order.size(); ++i)
    if (order[i] != i) return false;
  return true;
}

Tensor empty_tensor() {
  static SizesType sizes[1] = {0};
  static DimOrderType order[1] = {0};
  static StridesType strides[1] = {1};
  static TensorImpl impl(ScalarType::Float, 1, sizes, order, strides, nullptr, 0, TensorShapeDynamism::Static);
  // A caller may have resized it through a wrong-type access; keep it empty.
  sizes[0] = 0;
  return Tensor(&impl);
}

}  // namespace runtime
}  // namespace executorch
