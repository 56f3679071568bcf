// Builds tensors and argument lists for kernel tests and runs a registered kernel by name.
#pragma once

#include <cstring>
#include <deque>
#include <initializer_list>
#include <memory>
#include <vector>

#include "runtime/core/evalue.h"
#include "runtime/core/kernel_runtime_context.h"
#include "runtime/core/memory_allocator.h"
#include "runtime/core/operator_registry.h"
#include "runtime/core/tensor.h"

namespace ktest {

using executorch::runtime::BoxedList;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::ScalarType;
using executorch::runtime::Tensor;
using executorch::runtime::TensorImpl;
using executorch::runtime::TensorShapeDynamism;

// A tensor owning its metadata and a buffer of `capacity` elements (bounded-dynamic, so
// kernels may resize it within the buffer).
class OwnedTensor {
 public:
  OwnedTensor(ScalarType type, std::vector<int64_t> sizes, size_t capacity, std::vector<uint8_t> dim_order = {},
              bool dynamic = true)
      : sizes_(sizes.begin(), sizes.end()), order_(std::move(dim_order)), strides_(sizes.size()) {
    if (order_.empty())
      for (size_t i = 0; i < sizes.size(); ++i) order_.push_back(static_cast<uint8_t>(i));
    const size_t es = executorch::runtime::element_size(type);
    bytes_.assign(capacity * es + 8, 0);
    impl_ = TensorImpl(type, sizes.size(), sizes_.data(), order_.data(), strides_.data(), bytes_.data(), capacity * es,
                       dynamic ? TensorShapeDynamism::DynamicBound : TensorShapeDynamism::Static);
  }
  OwnedTensor(const OwnedTensor&) = delete;
  OwnedTensor& operator=(const OwnedTensor&) = delete;

  Tensor tensor() { return Tensor(&impl_); }
  template <typename T>
  T* data() {
    return reinterpret_cast<T*>(bytes_.data());
  }
  std::vector<int64_t> sizes() const { return {sizes_.begin(), sizes_.end()}; }

 private:
  std::vector<int32_t> sizes_;
  std::vector<uint8_t> order_;
  std::vector<int32_t> strides_;
  std::vector<uint8_t> bytes_;
  TensorImpl impl_;
};

// Keeps argument storage (tensors, list items) alive for one kernel call.
class Call {
 public:
  template <typename T>
  OwnedTensor& tensor(ScalarType type, std::vector<int64_t> sizes, std::vector<T> values,
                      std::vector<uint8_t> dim_order = {}) {
    tensors_.push_back(std::make_unique<OwnedTensor>(type, sizes, values.size(), dim_order));
    OwnedTensor& t = *tensors_.back();
    std::memcpy(t.data<T>(), values.data(), values.size() * sizeof(T));
    return t;
  }
  // An output with room for `capacity` elements, initially shaped `sizes`.
  OwnedTensor& out(ScalarType type, std::vector<int64_t> sizes, size_t capacity, bool dynamic = true) {
    tensors_.push_back(std::make_unique<OwnedTensor>(type, sizes, capacity, std::vector<uint8_t>{}, dynamic));
    return *tensors_.back();
  }
  EValue ints(std::vector<int64_t> v) {
    auto& items = item_lists_.emplace_back();
    auto& ptrs = ptr_lists_.emplace_back();
    auto& unboxed = int_lists_.emplace_back(v);
    for (int64_t x : v) items.emplace_back(x);
    for (auto& e : items) ptrs.push_back(&e);
    return EValue(BoxedList<int64_t>(ptrs.data(), unboxed.data(), v.size()));
  }
  EValue tensors(std::vector<OwnedTensor*> v) {
    auto& items = item_lists_.emplace_back();
    auto& ptrs = ptr_lists_.emplace_back();
    auto& unboxed = tensor_lists_.emplace_back(v.size());
    for (auto* t : v) items.emplace_back(t->tensor());
    for (auto& e : items) ptrs.push_back(&e);
    return EValue(BoxedList<Tensor>(ptrs.data(), unboxed.data(), v.size()));
  }
  EValue optional_tensors(std::vector<OwnedTensor*> v) {
    auto& items = item_lists_.emplace_back();
    auto& ptrs = ptr_lists_.emplace_back();
    auto& unboxed = opt_lists_.emplace_back(v.size());
    for (auto* t : v) items.emplace_back(t ? EValue(t->tensor()) : EValue());
    for (size_t i = 0; i < v.size(); ++i) ptrs.push_back(v[i] ? &items[i] : nullptr);
    return EValue(BoxedList<std::optional<Tensor>>(ptrs.data(), unboxed.data(), v.size()));
  }

  // Runs kernel `name` on `args`; returns the context's failure state (Ok on success) or
  // OperatorMissing when nothing is registered under `name`.
  Error run(const char* name, std::vector<EValue> args) {
    auto fn = executorch::runtime::get_op_function(name);
    if (fn == nullptr) return Error::OperatorMissing;
    args_ = std::move(args);
    std::vector<EValue*> ptrs;
    for (auto& a : args_) ptrs.push_back(&a);
    static std::vector<uint8_t> scratch(64 << 20);
    executorch::runtime::MemoryAllocator temp(scratch.data(), with_temp_ ? scratch.size() : 0);
    executorch::runtime::KernelRuntimeContext ctx(&temp);
    fn(ctx, {ptrs.data(), ptrs.size()});
    return ctx.failure_state();
  }
  // Later runs get no temp memory, to exercise the kernels' scratch-free paths.
  void without_temp() { with_temp_ = false; }

 private:
  std::vector<std::unique_ptr<OwnedTensor>> tensors_;
  std::deque<std::vector<EValue>> item_lists_;
  std::deque<std::vector<EValue*>> ptr_lists_;
  std::deque<std::vector<int64_t>> int_lists_;
  std::deque<std::vector<Tensor>> tensor_lists_;
  std::deque<std::vector<std::optional<Tensor>>> opt_lists_;
  std::vector<EValue> args_;
  bool with_temp_ = true;
};

}  // namespace ktest
