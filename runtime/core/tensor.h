// Tensor: a handle to TensorImpl, a typed strided view over memory owned elsewhere.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/core/device_allocator.h"
#include "runtime/core/error.h"
#include "runtime/core/scalar_type.h"
#include "runtime/core/span.h"

namespace executorch {
namespace runtime {

using SizesType = int32_t;
using StridesType = int32_t;
using DimOrderType = uint8_t;

// Most dimensions a tensor may have; deeper tensors are rejected at load.
constexpr size_t kTensorDimensionLimit = 16;

enum class TensorShapeDynamism : uint8_t {
  Static = 0,  // sizes never change
  DynamicBound = 1,  // sizes may shrink/grow up to the planned capacity
  DynamicUnbound = 2,
};

// Metadata of one tensor. The sizes/strides/dim_order arrays are owned by the
// Method (or the caller) and must outlive the TensorImpl.
class TensorImpl final {
 public:
  TensorImpl() = default;
  // `capacity_bytes` bounds resize(); strides are derived from `dim_order`.
  TensorImpl(ScalarType type, size_t dim, SizesType* sizes, DimOrderType* dim_order, StridesType* strides, void* data,
             size_t capacity_bytes, TensorShapeDynamism dynamism);

  ScalarType scalar_type() const { return type_; }
  size_t dim() const { return dim_; }
  int64_t numel() const { return numel_; }
  size_t element_size() const { return runtime::element_size(type_); }
  size_t nbytes() const { return static_cast<size_t>(numel_) * element_size(); }
  size_t capacity_bytes() const { return capacity_bytes_; }
  TensorShapeDynamism shape_dynamism() const { return dynamism_; }
  Span<const SizesType> sizes() const { return {sizes_, dim_}; }
  Span<const StridesType> strides() const { return {strides_, dim_}; }
  Span<const DimOrderType> dim_order() const { return {dim_order_, dim_}; }
  void* data() const { return data_; }
  void set_data(void* data) { data_ = data; }
  void set_capacity_bytes(size_t capacity) { capacity_bytes_ = capacity; }
  // Where the data lives: the host unless the program placed the tensor on a device.
  etensor::DeviceType device_type() const { return device_type_; }
  etensor::DeviceIndex device_index() const { return device_index_; }
  void set_device(etensor::DeviceType type, etensor::DeviceIndex index) {
    device_type_ = type;
    device_index_ = index;
  }

  // Changes sizes in place (same rank). Static tensors accept only their own
  // sizes; bounded dynamic ones any sizes whose bytes fit the capacity.
  Error resize(Span<const SizesType> new_sizes);
  Error resize(Span<const int64_t> new_sizes);

 private:
  void update_strides_and_numel();

  ScalarType type_ = ScalarType::Float;
  size_t dim_ = 0;
  SizesType* sizes_ = nullptr;
  DimOrderType* dim_order_ = nullptr;
  StridesType* strides_ = nullptr;
  void* data_ = nullptr;
  int64_t numel_ = 1;
  size_t capacity_bytes_ = 0;
  TensorShapeDynamism dynamism_ = TensorShapeDynamism::Static;
  etensor::DeviceType device_type_ = etensor::DeviceType::CPU;
  etensor::DeviceIndex device_index_ = 0;
};

// Cheap-to-copy handle; copies alias the same TensorImpl (as EValue moves do).
class Tensor final {
 public:
  Tensor() = default;
  explicit Tensor(TensorImpl* impl) : impl_(impl) {}

  TensorImpl* unsafeGetTensorImpl() const { return impl_; }
  ScalarType scalar_type() const { return impl_->scalar_type(); }
  int64_t dim() const { return static_cast<int64_t>(impl_->dim()); }
  int64_t numel() const { return impl_->numel(); }
  size_t nbytes() const { return impl_->nbytes(); }
  size_t element_size() const { return impl_->element_size(); }
  // Size of dimension `d`; negative `d` counts from the end. Caller keeps d in range.
  int64_t size(int64_t d) const { return impl_->sizes()[d < 0 ? d + dim() : d]; }
  int64_t stride(int64_t d) const { return impl_->strides()[d < 0 ? d + dim() : d]; }
  Span<const SizesType> sizes() const { return impl_->sizes(); }
  Span<const StridesType> strides() const { return impl_->strides(); }
  Span<const DimOrderType> dim_order() const { return impl_->dim_order(); }
  TensorShapeDynamism shape_dynamism() const { return impl_->shape_dynamism(); }
  etensor::DeviceType device_type() const { return impl_->device_type(); }
  etensor::DeviceIndex device_index() const { return impl_->device_index(); }
  // True when the dim order is 0..dim-1 (row-major, no permutation).
  bool is_contiguous() const;

  const void* const_data_ptr() const { return impl_->data(); }
  void* mutable_data_ptr() const { return impl_->data(); }
  template <typename T>
  const T* const_data_ptr() const {
    return static_cast<const T*>(impl_->data());
  }
  template <typename T>
  T* mutable_data_ptr() const {
    return static_cast<T*>(impl_->data());
  }

  Error resize(Span<const SizesType> new_sizes) const { return impl_->resize(new_sizes); }
  Error resize(Span<const int64_t> new_sizes) const { return impl_->resize(new_sizes); }

 private:
  TensorImpl* impl_ = nullptr;
};

// A zero-element float tensor of shape [0]; what a wrong-type EValue access yields.
Tensor empty_tensor();

}  // namespace runtime
}  // namespace executorch
