// TensorPtr construction: one heap block holds the Tensor, its TensorImpl, shape arrays and data.
#include "extension/tensor/tensor_ptr.h"

#include <utility>

namespace executorch {
namespace extension {
namespace {

struct Storage {
  std::vector<SizesType> sizes;
  std::vector<DimOrderType> dim_order;
  std::vector<StridesType> strides;
  std::vector<uint8_t> owned;
  void* data = nullptr;
  std::function<void(void*)> deleter;
  runtime::TensorImpl impl;
  Tensor tensor;

  ~Storage() {
    if (deleter) deleter(data);
  }
};

bool valid_dim_order(const std::vector<DimOrderType>& order, size_t dim) {
  std::vector<bool> seen(dim, false);
  for (DimOrderType d : order) {
    if (d >= dim || seen[d]) return false;
    seen[d] = true;
  }
  return order.size() == dim;
}

// Checks the shape against the type and data, then hands the storage to a TensorPtr. `deleter` is
// attached only on success, so a refused tensor leaves the caller's memory to the caller.
TensorPtr make(std::unique_ptr<Storage> s, ScalarType type, TensorShapeDynamism dynamism,
               std::function<void(void*)> deleter) {
  const size_t dim = s->sizes.size();
  if (dim > runtime::kTensorDimensionLimit || !runtime::is_valid_scalar_type(type)) return nullptr;
  for (SizesType size : s->sizes)
    if (size < 0) return nullptr;
  if (s->dim_order.empty())
    for (size_t i = 0; i < dim; ++i) s->dim_order.push_back(static_cast<DimOrderType>(i));
  if (!valid_dim_order(s->dim_order, dim)) return nullptr;
  std::vector<StridesType> given = std::move(s->strides);
  s->strides.assign(dim, 0);
  s->impl =
      runtime::TensorImpl(type, dim, s->sizes.data(), s->dim_order.data(), s->strides.data(), s->data, 0, dynamism);
  if (!given.empty() && given != s->strides) return nullptr;
  if (s->data == nullptr && s->impl.nbytes() != 0) return nullptr;
  s->impl.set_capacity_bytes(s->impl.nbytes());
  s->tensor = Tensor(&s->impl);
  s->deleter = std::move(deleter);
  std::shared_ptr<Storage> shared(std::move(s));
  return TensorPtr(shared, &shared->tensor);
}

}  // namespace

TensorPtr from_blob(void* data, std::vector<SizesType> sizes, std::vector<DimOrderType> dim_order,
                    std::vector<StridesType> strides, ScalarType type, TensorShapeDynamism dynamism,
                    std::function<void(void*)> deleter) {
  std::unique_ptr<Storage> s(new Storage());
  s->sizes = std::move(sizes);
  s->dim_order = std::move(dim_order);
  s->strides = std::move(strides);
  s->data = data;
  return make(std::move(s), type, dynamism, std::move(deleter));
}

TensorPtr make_tensor_ptr(std::vector<SizesType> sizes, std::vector<uint8_t> data, std::vector<DimOrderType> dim_order,
                          std::vector<StridesType> strides, ScalarType type, TensorShapeDynamism dynamism) {
  int64_t numel = 1;
  for (SizesType size : sizes) numel *= size;
  if (numel < 0 || data.size() != static_cast<size_t>(numel) * runtime::element_size(type)) return nullptr;
  std::unique_ptr<Storage> s(new Storage());
  s->sizes = std::move(sizes);
  s->dim_order = std::move(dim_order);
  s->strides = std::move(strides);
  s->owned = std::move(data);
  // A 0-byte tensor still gets a distinct, non-null pointer.
  if (s->owned.empty()) s->owned.reserve(1);
  s->data = s->owned.data();
  return make(std::move(s), type, dynamism, nullptr);
}

}  // namespace extension
}  // namespace executorch
