// EValue: the tagged value (tensor, scalar, list, string, none) kernels receive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

#include "runtime/core/span.h"
#include "runtime/core/tensor.h"

namespace executorch {
namespace runtime {

enum class Tag : uint32_t {
  None = 0,
  Tensor,
  String,
  Double,
  Int,
  Bool,
  ListBool,
  ListDouble,
  ListInt,
  ListTensor,
  ListScalar,
  ListOptionalTensor,
};

const char* tag_name(Tag tag);

class EValue;

// A list whose items are other EValues (so a symbolic int or a tensor updated
// by an earlier kernel is seen here). get() refreshes the unboxed copy.
template <typename T>
class BoxedList final {
 public:
  BoxedList() = default;
  BoxedList(EValue* const* items, T* unboxed, size_t size) : items_(items), unboxed_(unboxed), size_(size) {}
  Span<T> get() const;
  size_t size() const { return size_; }

 private:
  EValue* const* items_ = nullptr;
  T* unboxed_ = nullptr;
  size_t size_ = 0;
};

// Accessors of the wrong tag never crash: they return 0, false, an empty list
// or empty_tensor(). Kernels check tags first (see kernel_runtime_context.h).
class EValue final {
 public:
  EValue() : tag_(Tag::None) { payload_.i = 0; }
  EValue(int64_t v) : tag_(Tag::Int) { payload_.i = v; }
  EValue(double v) : tag_(Tag::Double) { payload_.d = v; }
  EValue(bool v) : tag_(Tag::Bool) { payload_.b = v; }
  EValue(Tensor t) : tag_(Tag::Tensor) { payload_.t = t; }
  // What points at a Tensor (extension::TensorPtr), as ExecuTorch's EValue takes it: a null one is None.
  template <typename P,
            typename = std::enable_if_t<std::is_same_v<std::decay_t<decltype(*std::declval<const P&>())>, Tensor>>>
  EValue(const P& p) : tag_(p ? Tag::Tensor : Tag::None) {
    if (p) {
      payload_.t = *p;
    } else {
      payload_.i = 0;
    }
  }
  EValue(std::string_view s) : tag_(Tag::String) { payload_.s = s; }
  EValue(Span<const bool> v) : tag_(Tag::ListBool) { payload_.bools = v; }
  EValue(Span<const double> v) : tag_(Tag::ListDouble) { payload_.doubles = v; }
  EValue(BoxedList<int64_t> v) : tag_(Tag::ListInt) { payload_.ints = v; }
  EValue(BoxedList<Tensor> v) : tag_(Tag::ListTensor) { payload_.tensors = v; }
  EValue(BoxedList<std::optional<Tensor>> v) : tag_(Tag::ListOptionalTensor) { payload_.opt_tensors = v; }

  Tag tag() const { return tag_; }
  bool isNone() const { return tag_ == Tag::None; }
  bool isTensor() const { return tag_ == Tag::Tensor; }
  bool isInt() const { return tag_ == Tag::Int; }
  bool isDouble() const { return tag_ == Tag::Double; }
  bool isBool() const { return tag_ == Tag::Bool; }
  bool isScalar() const { return isInt() || isDouble() || isBool(); }
  bool isString() const { return tag_ == Tag::String; }
  bool isIntList() const { return tag_ == Tag::ListInt; }
  bool isBoolList() const { return tag_ == Tag::ListBool; }
  bool isDoubleList() const { return tag_ == Tag::ListDouble; }
  bool isTensorList() const { return tag_ == Tag::ListTensor; }
  bool isListOptionalTensor() const { return tag_ == Tag::ListOptionalTensor; }

  Tensor toTensor() const { return isTensor() ? payload_.t : empty_tensor(); }
  int64_t toInt() const { return isInt() ? payload_.i : 0; }
  double toDouble() const { return isDouble() ? payload_.d : 0.0; }
  bool toBool() const { return isBool() ? payload_.b : false; }
  std::string_view toString() const { return isString() ? payload_.s : std::string_view(); }
  // A Scalar argument (Int, Double or Bool) as a double / as an int64.
  double toScalarDouble() const {
    return isDouble() ? payload_.d : isInt() ? static_cast<double>(payload_.i) : isBool() ? payload_.b : 0.0;
  }
  int64_t toScalarInt() const {
    return isInt() ? payload_.i : isDouble() ? static_cast<int64_t>(payload_.d) : isBool() ? payload_.b : 0;
  }
  Span<const int64_t> toIntList() const;
  Span<const bool> toBoolList() const { return isBoolList() ? payload_.bools : Span<const bool>(); }
  Span<const double> toDoubleList() const { return isDoubleList() ? payload_.doubles : Span<const double>(); }
  Span<Tensor> toTensorList() const;
  Span<std::optional<Tensor>> toListOptionalTensor() const;
  // `Tensor?` argument: nullopt for None (or any non-tensor).
  std::optional<Tensor> toOptionalTensor() const {
    return isTensor() ? std::optional<Tensor>(payload_.t) : std::nullopt;
  }

 private:
  union Payload {
    Payload() : i(0) {}
    int64_t i;
    double d;
    bool b;
    Tensor t;
    std::string_view s;
    Span<const bool> bools;
    Span<const double> doubles;
    BoxedList<int64_t> ints;
    BoxedList<Tensor> tensors;
    BoxedList<std::optional<Tensor>> opt_tensors;
  } payload_;
  Tag tag_;
};

template <>
inline Span<int64_t> BoxedList<int64_t>::get() const {
  for (size_t i = 0; i < size_; ++i) unboxed_[i] = items_[i]->toInt();
  return {unboxed_, size_};
}

template <>
inline Span<Tensor> BoxedList<Tensor>::get() const {
  for (size_t i = 0; i < size_; ++i) unboxed_[i] = items_[i]->toTensor();
  return {unboxed_, size_};
}

// A null item pointer stands for a None entry (-1 in the program).
template <>
inline Span<std::optional<Tensor>> BoxedList<std::optional<Tensor>>::get() const {
  for (size_t i = 0; i < size_; ++i) unboxed_[i] = items_[i] == nullptr ? std::nullopt : items_[i]->toOptionalTensor();
  return {unboxed_, size_};
}

inline Span<const int64_t> EValue::toIntList() const {
  if (!isIntList()) return {};
  Span<int64_t> v = payload_.ints.get();
  return {v.data(), v.size()};
}

inline Span<Tensor> EValue::toTensorList() const { return isTensorList() ? payload_.tensors.get() : Span<Tensor>(); }

inline Span<std::optional<Tensor>> EValue::toListOptionalTensor() const {
  return isListOptionalTensor() ? payload_.opt_tensors.get() : Span<std::optional<Tensor>>();
}

}  // namespace runtime
}  // namespace executorch
