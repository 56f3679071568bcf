// TensorPtr: a runtime Tensor that owns its shape (and, from make_tensor_ptr, its data), for host code.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "runtime/core/scalar_type.h"
#include "runtime/core/tensor.h"

namespace executorch {
namespace extension {

using runtime::DimOrderType;
using runtime::ScalarType;
using runtime::SizesType;
using runtime::StridesType;
using runtime::Tensor;
using runtime::TensorShapeDynamism;

// Shared ownership of a Tensor together with its sizes, dim order, strides and (if owned) data.
using TensorPtr = std::shared_ptr<Tensor>;

// The ScalarType of a C++ element type, for make_tensor_ptr.
template <typename T>
struct ScalarTypeOf;
template <>
struct ScalarTypeOf<uint8_t> {
  static constexpr ScalarType value = ScalarType::Byte;
};
template <>
struct ScalarTypeOf<int8_t> {
  static constexpr ScalarType value = ScalarType::Char;
};
template <>
struct ScalarTypeOf<int16_t> {
  static constexpr ScalarType value = ScalarType::Short;
};
template <>
struct ScalarTypeOf<int32_t> {
  static constexpr ScalarType value = ScalarType::Int;
};
template <>
struct ScalarTypeOf<int64_t> {
  static constexpr ScalarType value = ScalarType::Long;
};
template <>
struct ScalarTypeOf<float> {
  static constexpr ScalarType value = ScalarType::Float;
};
template <>
struct ScalarTypeOf<double> {
  static constexpr ScalarType value = ScalarType::Double;
};
template <>
struct ScalarTypeOf<bool> {
  static constexpr ScalarType value = ScalarType::Bool;
};

// A tensor over caller memory `data`, which must outlive every copy of the TensorPtr; `deleter`,
// when given, is called with `data` when the last copy goes. An empty dim_order means contiguous;
// strides, when given, must match the dim order (the runtime computes them from it).
// Returns nullptr when the sizes, dim order or strides are inconsistent.
TensorPtr from_blob(void* data, std::vector<SizesType> sizes, std::vector<DimOrderType> dim_order,
                    std::vector<StridesType> strides, ScalarType type = ScalarType::Float,
                    TensorShapeDynamism dynamism = TensorShapeDynamism::DynamicBound,
                    std::function<void(void*)> deleter = nullptr);

inline TensorPtr from_blob(void* data, std::vector<SizesType> sizes, ScalarType type = ScalarType::Float,
                           TensorShapeDynamism dynamism = TensorShapeDynamism::DynamicBound) {
  return from_blob(data, std::move(sizes), {}, {}, type, dynamism);
}

// A tensor that owns `data` (raw bytes of `type`). nullptr when the byte count does not match the sizes.
TensorPtr make_tensor_ptr(std::vector<SizesType> sizes, std::vector<uint8_t> data, std::vector<DimOrderType> dim_order,
                          std::vector<StridesType> strides, ScalarType type,
                          TensorShapeDynamism dynamism = TensorShapeDynamism::DynamicBound);

inline TensorPtr make_tensor_ptr(std::vector<SizesType> sizes, std::vector<uint8_t> data,
                                 ScalarType type = ScalarType::Byte,
                                 TensorShapeDynamism dynamism = TensorShapeDynamism::DynamicBound) {
  return make_tensor_ptr(std::move(sizes), std::move(data), {}, {}, type, dynamism);
}

// A tensor that owns a copy of `data`, typed after T.
template <typename T, typename = decltype(ScalarTypeOf<T>::value)>
TensorPtr make_tensor_ptr(std::vector<SizesType> sizes, const std::vector<T>& data,
                          std::vector<DimOrderType> dim_order = {}, std::vector<StridesType> strides = {},
                          TensorShapeDynamism dynamism = TensorShapeDynamism::DynamicBound) {
  const uint8_t* bytes = reinterpret_cast<const uint8_t*>(data.data());
  return make_tensor_ptr(std::move(sizes), std::vector<uint8_t>(bytes, bytes + data.size() * sizeof(T)),
                         std::move(dim_order), std::move(strides), ScalarTypeOf<T>::value, dynamism);
}

// A 1-D tensor holding a copy of `data`.
template <typename T, typename = decltype(ScalarTypeOf<T>::value)>
TensorPtr make_tensor_ptr(const std::vector<T>& data) {
  return make_tensor_ptr<T>({static_cast<SizesType>(data.size())}, data);
}

template <typename T, typename = decltype(ScalarTypeOf<T>::value)>
TensorPtr make_tensor_ptr(std::initializer_list<T> list) {
  return make_tensor_ptr(std::vector<T>(list));
}

// A 0-D tensor holding `value`.
template <typename T, typename = decltype(ScalarTypeOf<T>::value)>
TensorPtr make_tensor_ptr(T value) {
  return make_tensor_ptr<T>(std::vector<SizesType>{}, std::vector<T>{value});
}

}  // namespace extension
}  // namespace executorch
