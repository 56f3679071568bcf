// Load-time pass: constant weights read transposed in place instead of copied on every run.
#include "runtime/executor/method.h"

#include "schema/program_generated.h"

namespace executorch {
namespace runtime {

// Whether the only instructions naming `v` are `permute` (writing it) and mm/addmm reading it as
// their right operand: no other kernel, move, jump, delegate or tensor list may see it.
bool Method::read_only_as_mat2(const EValue* v, const Step* permute, OpFunction mm, OpFunction addmm) const {
  const size_t value = static_cast<size_t>(v - values_);
  for (size_t pc = 0; pc < num_steps_; ++pc) {
    const Step& s = steps_[pc];
    // Moves and jumps name values by index; frees name nothing that matters.
    if (s.args == nullptr && s.kind != Step::Kind::Free &&
        (s.a == value || (s.kind == Step::Kind::Move && s.b == value)))
      return false;
    for (uint32_t j = 0; s.args != nullptr && j < s.a; ++j) {
      const bool product = s.kind == Step::Kind::Kernel && ((s.op == mm && j == 1) || (s.op == addmm && j == 2));
      if (s.args[j] == v && &s != permute && !product) return false;
    }
  }
  const TensorImpl* t = v->toTensor().unsafeGetTensorImpl();
  for (size_t i = 0; i < num_values_; ++i) {
    for (const Tensor& item : values_[i].toTensorList())
      if (item.unsafeGetTensorImpl() == t) return false;
    for (const auto& item : values_[i].toListOptionalTensor())
      if (item && item->unsafeGetTensorImpl() == t) return false;
  }
  return true;
}

// Linear layers export as permute_copy(weight, [1, 0]) feeding mm/addmm, which would copy every
// weight on every run. Where the weight is a constant and the copy is read only as the product's
// right operand, the copy's tensor becomes the weight itself with transposed strides (the
// kernels honour any dim order) and its instruction does nothing.
void Method::elide_weight_transposes() {
  const OpFunction permute = get_op_function("aten::permute_copy", "out");
  const OpFunction mm = get_op_function("aten::mm", "out"), addmm = get_op_function("aten::addmm", "out");
  const auto* values = meta_.flatbuffer()->values();
  size_t elided = 0;
  for (size_t pc = 0; pc < num_steps_; ++pc) {
    Step& s = steps_[pc];
    if (s.kind != Step::Kind::Kernel || s.op != permute || s.a < 3) continue;
    const EValue* in = s.args[0];
    const EValue* out = s.args[2];
    if (!in->isTensor() || !out->isTensor()) continue;
    const Span<const int64_t> d = s.args[1]->toIntList();  // empty unless an int list
    const size_t o = static_cast<size_t>(out - values_);
    TensorImpl* w = in->toTensor().unsafeGetTensorImpl();
    TensorImpl* t = out->toTensor().unsafeGetTensorImpl();
    // A constant has data at load but no memory plan (unplanned inputs have no data yet).
    bool ok = d.size() == 2 && d[0] == 1 && d[1] == 0 && w != t && w->data() != nullptr &&
              values->Get(in - values_)->val_as_Tensor()->allocation_info() == nullptr &&
              values->Get(o)->val_as_Tensor()->allocation_info() != nullptr && w->dim() == 2 &&
              t->dim() == 2 && w->scalar_type() == t->scalar_type() && w->dim_order()[0] == 0 &&
              t->dim_order()[0] == 0 && t->sizes()[0] == w->sizes()[1] && t->sizes()[1] == w->sizes()[0];
    for (size_t i = 0; i < num_inputs_; ++i) ok = ok && input_index_[i] != o;
    for (size_t i = 0; i < num_outputs_; ++i) ok = ok && output_index_[i] != o;
    if (!ok || !read_only_as_mat2(out, &s, mm, addmm)) continue;
    // The Method allocated these arrays (parse_tensor); the transpose of [n, k] is k-major.
    const_cast<DimOrderType*>(t->dim_order().data())[0] = 1;
    const_cast<DimOrderType*>(t->dim_order().data())[1] = 0;
    const_cast<StridesType*>(t->strides().data())[0] = 1;
    const_cast<StridesType*>(t->strides().data())[1] = w->sizes()[1];
    t->set_data(w->data());
    t->set_capacity_bytes(w->capacity_bytes());
    s = Step{Step::Kind::Free, static_cast<uint32_t>(o), 0, nullptr, nullptr};
    ++elided;
  }
  if (elided > 0) ET_LOG(Info, "method '%s': %zu weight transposes read in place", meta_.name(), elided);
}

}  // namespace runtime
}  // namespace executorch
