// The registered load passes (runtime/core/load_pass.h), run on a method once it is loaded.
#include "runtime/core/load_pass.h"
#include "runtime/executor/flatbuffer_util.h"
#include "runtime/executor/method.h"
#include "schema/program_generated.h"

namespace executorch {
namespace runtime {

namespace fb = executorch_flatbuffer;

// The method as MethodRewriter presents it; value_flags_ marks values instructions write.
class MethodRewriterImpl final : public MethodRewriter {
 public:
  MethodRewriterImpl(Method& m, MemoryAllocator* a) : m_(m), alloc_(a) {}
  static void run(Method& m, MemoryAllocator* a);
  static void install() { Method::run_load_passes_ = &MethodRewriterImpl::run; }

  size_t num_steps() const override { return m_.num_steps_; }
  OpFunction kernel(size_t pc) const override {
    return pc < m_.num_steps_ && m_.steps_[pc].kind == Step::Kind::Kernel ? m_.steps_[pc].op : nullptr;
  }
  bool does_nothing(size_t pc) const override { return pc < m_.num_steps_ && m_.steps_[pc].kind == Step::Kind::Free; }
  Span<EValue*> args(size_t pc) const override {
    if (kernel(pc) == nullptr) return {};
    return {m_.steps_[pc].args, m_.steps_[pc].a};
  }
  bool is_constant(const EValue* v) const override {
    const size_t i = index(v);
    if (i >= m_.num_values_ || (m_.value_flags_[i] & Method::kWritten)) return false;
    if (v->isTensor()) return constant_tensor(i);
    if (v->isIntList()) {
      const auto* items = m_.meta_.flatbuffer()->values()->Get(i)->val_as_IntList()->items();
      for (size_t j = 0; items && j < items->size(); ++j)
        if (m_.value_flags_[load_item(items, j)] & Method::kWritten) return false;
      return true;
    }
    return v->tag() != Tag::ListTensor && v->tag() != Tag::ListOptionalTensor;
  }
  size_t uses(const EValue* v, size_t* pcs, size_t max) const override {
    const size_t i = index(v);
    if (i >= m_.num_values_ || (m_.value_flags_[i] & Method::kEscapes)) return SIZE_MAX;
    size_t n = 0;
    for (size_t pc = 0; pc < m_.num_steps_; ++pc) {
      const Step& s = m_.steps_[pc];
      bool named = false;
      if (s.kind == Step::Kind::Move) named = s.a == i || s.b == i;
      else if (s.kind == Step::Kind::JumpFalse) named = s.a == i;
      for (uint32_t j = 0; s.args != nullptr && j < s.a && !named; ++j) named = names(*s.args[j], v);
      if (!named) continue;
      if (n < max) pcs[n] = pc;
      ++n;
    }
    return n;
  }
  bool aliased(const EValue* v) const override {
    const size_t i = index(v);
    if (i >= m_.num_values_ || !v->isTensor() || source_ == nullptr) return true;
    for (size_t j = 0; j < m_.num_values_; ++j)
      if ((m_.value_flags_[j] & Method::kView) && source_[j] == i) return true;
    return false;
  }
  void* allocate(size_t bytes, size_t alignment) override { return alloc_->allocate(bytes, alignment); }
  void* allocate_temp(size_t bytes, size_t alignment) override {
    return m_.temp_allocator_ != nullptr ? m_.temp_allocator_->allocate(bytes, alignment) : nullptr;
  }
  void free_temp() override {
    if (m_.temp_allocator_ != nullptr) m_.temp_allocator_->reset();
  }
  void set_kernel(size_t pc, OpFunction op, const void* state) override {
    if (kernel(pc) == nullptr || op == nullptr) return;
    m_.steps_[pc].op = op;
    m_.steps_[pc].state = state;
  }
  void remove(size_t pc) override {
    if (kernel(pc) == nullptr) return;
    // A Free of the first argument's value: it names a value in range and does nothing.
    const size_t first = m_.steps_[pc].a > 0 ? index(m_.steps_[pc].args[0]) : 0;
    m_.steps_[pc] = Step{Step::Kind::Free, static_cast<uint32_t>(first < m_.num_values_ ? first : 0), 0,
                         nullptr, nullptr};
  }
  void make_constant(const EValue* v, void* data, size_t bytes) override {
    const size_t i = index(v);
    if (i >= m_.num_values_ || !v->isTensor()) return;
    TensorImpl* t = v->toTensor().unsafeGetTensorImpl();
    t->set_data(data);
    t->set_capacity_bytes(bytes);
    m_.value_flags_[i] = static_cast<uint8_t>((m_.value_flags_[i] | Method::kFolded) & ~Method::kWritten);
  }

 private:
  bool constant_tensor(size_t i) const;
  // Whether `arg` is `v`, or a tensor list holding v's tensor.
  static bool names(const EValue& arg, const EValue* v) {
    if (&arg == v) return true;
    if (!v->isTensor()) return false;
    const TensorImpl* t = v->toTensor().unsafeGetTensorImpl();
    for (const Tensor& item : arg.toTensorList())
      if (item.unsafeGetTensorImpl() == t) return true;
    for (const auto& item : arg.toListOptionalTensor())
      if (item && item->unsafeGetTensorImpl() == t) return true;
    return false;
  }
  // Whether tensor values i and j have planned memory in common.
  bool overlaps(size_t i, size_t j) const {
    if (!m_.values_[i].isTensor() || !m_.values_[j].isTensor()) return false;
    const Tensor a = m_.values_[i].toTensor(), b = m_.values_[j].toTensor();
    const auto x = reinterpret_cast<uintptr_t>(a.const_data_ptr()), y = reinterpret_cast<uintptr_t>(b.const_data_ptr());
    return x != 0 && y != 0 && x < y + b.nbytes() && y < x + a.nbytes();
  }
  size_t index(const EValue* v) const {
    return v >= m_.values_ && v < m_.values_ + m_.num_values_ ? static_cast<size_t>(v - m_.values_)
                                                              : SIZE_MAX;
  }

  Method& m_;
  MemoryAllocator* alloc_;

 public:
  // Per view, the tensor it shows: the overlapping one written last before the view's first read
  // (kNever: none). Null when there was no room: every tensor then counts as aliased.
  static constexpr uint32_t kNever = UINT32_MAX;
  uint32_t* source_ = nullptr;
};


// A tensor with data from the file (or the .ptd), or one a load pass computed.
bool MethodRewriterImpl::constant_tensor(size_t i) const {
  if (m_.value_flags_[i] & Method::kFolded) return true;
  const fb::Tensor* t = m_.meta_.flatbuffer()->values()->Get(i)->val_as_Tensor();
  if (t == nullptr || t->allocation_info() != nullptr) return false;
  const auto* extra = t->extra_tensor_info();
  const bool from_file = t->data_buffer_idx() > 0 ||
                         (extra != nullptr && extra->location() == fb::TensorDataLocation::EXTERNAL);
  return from_file && m_.values_[i].toTensor().const_data_ptr() != nullptr;
}

namespace {

LoadPass g_passes[kMaxLoadPasses];
size_t g_num_passes = 0;

}  // namespace

// Which values instructions write (a kernel's last argument is its result, tensor list items
// may be results; moves, delegates and inputs write theirs) and which escape a pass's view
// (method inputs and outputs); then every registered pass, in order.
void MethodRewriterImpl::run(Method& m, MemoryAllocator* a) {
  m.value_flags_ = a->allocate_list<uint8_t>(m.num_values_ == 0 ? 1 : m.num_values_);
  if (m.value_flags_ == nullptr) return;  // no room: the method runs as loaded
  uint8_t* flags = m.value_flags_;
  for (size_t i = 0; i < m.num_values_; ++i) flags[i] = 0;
  for (size_t i = 0; i < m.num_inputs_; ++i) flags[m.input_index_[i]] |= Method::kWritten | Method::kEscapes;
  for (size_t i = 0; i < m.num_outputs_; ++i) flags[m.output_index_[i]] |= Method::kEscapes;
  const auto* values = m.meta_.flatbuffer()->values();
  for (size_t i = 0; i < m.num_values_; ++i) {
    const fb::EValue* v = values->Get(i);
    const flatbuffers::Vector<int32_t>* items = nullptr;
    if (v != nullptr && v->val_type() == fb::KernelTypes::TensorList) items = v->val_as_TensorList()->items();
    if (v != nullptr && v->val_type() == fb::KernelTypes::OptionalTensorList)
      items = v->val_as_OptionalTensorList()->items();
    for (size_t j = 0; items && j < items->size(); ++j)
      if (items->Get(j) >= 0) flags[items->Get(j)] |= Method::kWritten;
  }
  for (size_t pc = 0; pc < m.num_steps_; ++pc) {
    const Step& s = m.steps_[pc];
    if (s.kind == Step::Kind::Move) flags[s.b] |= Method::kWritten;
    if (s.kind == Step::Kind::Kernel && s.a > 0) flags[s.args[s.a - 1] - m.values_] |= Method::kWritten;
    for (uint32_t j = 0; s.kind == Step::Kind::Delegate && j < s.a; ++j) flags[s.args[j] - m.values_] |= Method::kWritten;
  }
  // A planned tensor nothing writes is a view of memory another tensor fills.
  for (size_t i = 0; i < m.num_values_; ++i) {
    const fb::EValue* v = values->Get(i);
    if (v != nullptr && v->val_type() == fb::KernelTypes::Tensor && v->val_as_Tensor()->allocation_info() != nullptr &&
        !(flags[i] & Method::kWritten))
      flags[i] |= Method::kView;
  }
  MethodRewriterImpl rewriter(m, a);
  // The first instruction naming each value, then each view's source.
  uint32_t* first = a->allocate_list<uint32_t>(m.num_values_ == 0 ? 1 : m.num_values_);
  uint32_t* source = a->allocate_list<uint32_t>(m.num_values_ == 0 ? 1 : m.num_values_);
  for (size_t i = 0; first != nullptr && source != nullptr && i < m.num_values_; ++i) first[i] = source[i] = kNever;
  for (size_t pc = m.num_steps_; first != nullptr && source != nullptr && pc-- > 0;) {
    const Step& s = m.steps_[pc];
    if (s.kind == Step::Kind::Move) first[s.a] = first[s.b] = static_cast<uint32_t>(pc);
    if (s.kind == Step::Kind::JumpFalse) first[s.a] = static_cast<uint32_t>(pc);
    for (uint32_t j = 0; s.args != nullptr && j < s.a; ++j) {
      first[s.args[j] - m.values_] = static_cast<uint32_t>(pc);
      for (const Tensor& item : s.args[j]->toTensorList())
        for (size_t k = 0; k < m.num_values_; ++k)
          if (m.values_[k].isTensor() && m.values_[k].toTensor().unsafeGetTensorImpl() == item.unsafeGetTensorImpl())
            first[k] = static_cast<uint32_t>(pc);
    }
  }
  for (size_t j = 0; first != nullptr && source != nullptr && j < m.num_values_; ++j) {
    if (!(flags[j] & Method::kView)) continue;
    for (size_t k = 0; k < m.num_values_; ++k)
      if (!(flags[k] & Method::kView) && first[k] < first[j] && rewriter.overlaps(k, j) &&
          (source[j] == kNever || first[k] > first[source[j]]))
        source[j] = static_cast<uint32_t>(k);
  }
  rewriter.source_ = first != nullptr ? source : nullptr;
  for (size_t i = 0; i < g_num_passes; ++i) {
    g_passes[i](rewriter);
    rewriter.free_temp();
  }
}

Error register_load_pass(LoadPass pass) {
  if (pass == nullptr) return Error::InvalidArgument;
  if (g_num_passes >= kMaxLoadPasses) return Error::RegistrationExceedingMaxKernels;
  g_passes[g_num_passes++] = pass;
  MethodRewriterImpl::install();
  return Error::Ok;
}

Span<const LoadPass> registered_load_passes() { return {g_passes, g_num_passes}; }

}  // namespace runtime
}  // namespace executorch
