// MethodMeta: bounds-checked reads of a plan's inputs, outputs and memory plan.
#include "runtime/executor/method_meta.h"

#include "runtime/executor/flatbuffer_util.h"
#include "schema/program_generated.h"

namespace executorch {
namespace runtime {
namespace {

using IndexVector = flatbuffers::Vector<int32_t>;

Tag tag_of(const executorch_flatbuffer::EValue* v) {
  using K = executorch_flatbuffer::KernelTypes;
  switch (v == nullptr || v->val() == nullptr ? K::NONE : v->val_type()) {
    case K::Int: return Tag::Int;
    case K::Bool: return Tag::Bool;
    case K::Double: return Tag::Double;
    case K::Tensor: return Tag::Tensor;
    case K::String: return Tag::String;
    case K::IntList: return Tag::ListInt;
    case K::DoubleList: return Tag::ListDouble;
    case K::BoolList: return Tag::ListBool;
    case K::TensorList: return Tag::ListTensor;
    case K::OptionalTensorList: return Tag::ListOptionalTensor;
    default: return Tag::None;
  }
}

}  // namespace

const char* MethodMeta::name() const { return plan_->name() ? plan_->name()->c_str() : ""; }

size_t MethodMeta::num_inputs() const { return plan_->inputs() ? plan_->inputs()->size() : 0; }

size_t MethodMeta::num_outputs() const { return plan_->outputs() ? plan_->outputs()->size() : 0; }

size_t MethodMeta::num_instructions() const {
  size_t n = 0;
  if (plan_->chains() == nullptr) return 0;
  for (const auto* chain : *plan_->chains())
    if (chain != nullptr && chain->instructions() != nullptr) n += chain->instructions()->size();
  return n;
}

Result<Tag> MethodMeta::value_tag(const void* indices, size_t index) const {
  const auto* list = static_cast<const IndexVector*>(indices);
  ET_CHECK_OR_RETURN(list != nullptr && index < list->size(), InvalidArgument, "index %zu is out of range", index);
  int32_t v = list->Get(index);
  const auto* values = plan_->values();
  ET_CHECK_OR_RETURN(values != nullptr && v >= 0 && static_cast<uint32_t>(v) < values->size(), InvalidProgram,
                     "value index %d is out of range", v);
  return tag_of(values->Get(v));
}

Result<TensorInfo> MethodMeta::tensor_info(const void* indices, size_t index) const {
  Result<Tag> tag = value_tag(indices, index);
  if (!tag.ok()) return tag.error();
  ET_CHECK_OR_RETURN(*tag == Tag::Tensor, InvalidArgument, "value %zu is a %s, not a tensor", index, tag_name(*tag));
  int32_t v = static_cast<const IndexVector*>(indices)->Get(index);
  const auto* t = plan_->values()->Get(v)->val_as_Tensor();
  TensorInfo info;
  info.scalar_type = static_cast<ScalarType>(t->scalar_type());
  info.sizes = t->sizes() ? Span<const int32_t>(t->sizes()->data(), t->sizes()->size()) : Span<const int32_t>();
  info.dim_order =
      t->dim_order() ? Span<const uint8_t>(t->dim_order()->data(), t->dim_order()->size()) : Span<const uint8_t>();
  info.dynamism = static_cast<TensorShapeDynamism>(t->shape_dynamism());
  info.is_memory_planned = t->allocation_info() != nullptr;
  return info;
}

Result<Tag> MethodMeta::input_tag(size_t index) const { return value_tag(plan_->inputs(), index); }
Result<Tag> MethodMeta::output_tag(size_t index) const { return value_tag(plan_->outputs(), index); }

Result<TensorInfo> MethodMeta::input_tensor_info(size_t index) const { return tensor_info(plan_->inputs(), index); }

Result<TensorInfo> MethodMeta::output_tensor_info(size_t index) const { return tensor_info(plan_->outputs(), index); }

size_t MethodMeta::num_memory_planned_buffers() const {
  const auto* sizes = plan_->non_const_buffer_sizes();
  return sizes == nullptr || sizes->size() == 0 ? 0 : sizes->size() - 1;
}

Result<int64_t> MethodMeta::memory_planned_buffer_size(size_t index) const {
  ET_CHECK_OR_RETURN(index < num_memory_planned_buffers(), InvalidArgument, "planned buffer %zu is out of range",
                     index);
  int64_t size = load_item(plan_->non_const_buffer_sizes(), index + 1);
  ET_CHECK_OR_RETURN(size >= 0, InvalidProgram, "planned buffer %zu has negative size", index);
  return size;
}

Result<etensor::Device> MethodMeta::memory_planned_buffer_device(size_t index) const {
  ET_CHECK_OR_RETURN(index < num_memory_planned_buffers(), InvalidArgument, "planned buffer %zu is out of range",
                     index);
  etensor::Device device;
  const auto* entries = plan_->non_const_buffer_device();
  for (size_t i = 0; entries != nullptr && i < entries->size(); ++i) {
    const auto* e = entries->Get(i);
    // Entries count arenas as the plan's sizes do, from 1 (0 is the constants).
    if (e == nullptr || e->buffer_idx() != static_cast<int64_t>(index) + 1) continue;
    const auto type = static_cast<int8_t>(e->device_type());
    ET_CHECK_OR_RETURN(type >= 0 && static_cast<size_t>(type) < etensor::kNumDeviceTypes && e->device_index() >= 0,
                       InvalidProgram, "planned buffer %zu is on unknown device %d:%d", index, type,
                       static_cast<int>(e->device_index()));
    device.type = static_cast<etensor::DeviceType>(type);
    device.index = e->device_index();
  }
  return device;
}

}  // namespace runtime
}  // namespace executorch
