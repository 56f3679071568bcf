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
    if (stale_ && !no_index_) index_uses();
    if (!no_index_) {
      const size_t n = use_start_[i + 1] - use_start_[i];
      for (size_t k = 0; k < n && k < max; ++k) pcs[k] = use_pc_[use_start_[i] + k];
      return n;
    }
    size_t n = 0;  // no index (no room for it): scan every instruction
    for (size_t pc = 0; pc < m_.num_steps_; ++pc) {
      bool named = false;
      for_each_named(pc, [&](size_t j) { named = named || j == i; });
      if (!named) continue;
      if (n < max) pcs[n] = pc;
      ++n;
    }
    return n;
  }
  bool aliased(const EValue* v) const override {
    const size_t i = index(v);
    return i >= m_.num_values_ || !v->isTensor() || aliased_ == nullptr || aliased_[i] != 0;
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
    stale_ = true;  // passes edit arguments in place before removing the instruction they fold
    // A Free of the first argument's value: it names a value in range and does nothing.
    const size_t first = m_.steps_[pc].a > 0 ? index(m_.steps_[pc].args[0]) : 0;
    m_.steps_[pc] =
        Step{Step::Kind::Free, static_cast<uint32_t>(first < m_.num_values_ ? first : 0), 0, nullptr, nullptr};
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

 public:
  // Calls f(value index) for every value instruction `pc` names: a Move's two, a JumpFalse's
  // condition, each argument and each tensor in a tensor list argument (by the list's items in
  // the file, which the method checked at load). A value may come more than once.
  template <typename F>
  void for_each_named(size_t pc, F&& f) const {
    const Step& s = m_.steps_[pc];
    if (s.kind == Step::Kind::Move) f(s.a), f(s.b);
    if (s.kind == Step::Kind::JumpFalse) f(s.a);
    if (s.args == nullptr || (s.kind != Step::Kind::Kernel && s.kind != Step::Kind::Delegate)) return;
    const auto* values = m_.meta_.flatbuffer()->values();
    for (uint32_t j = 0; j < s.a; ++j) {
      const size_t i = index(s.args[j]);
      if (i >= m_.num_values_) continue;
      f(i);
      const fb::EValue* v = values->Get(static_cast<flatbuffers::uoffset_t>(i));
      const flatbuffers::Vector<int32_t>* items = nullptr;
      if (v != nullptr && v->val_type() == fb::KernelTypes::TensorList) items = v->val_as_TensorList()->items();
      if (v != nullptr && v->val_type() == fb::KernelTypes::OptionalTensorList)
        items = v->val_as_OptionalTensorList()->items();
      for (flatbuffers::uoffset_t k = 0; items != nullptr && k < items->size(); ++k)
        if (items->Get(k) >= 0 && static_cast<size_t>(items->Get(k)) < m_.num_values_)
          f(static_cast<size_t>(items->Get(k)));
    }
  }
  // (Re)builds the index of the instructions naming each value, in order and once per
  // instruction; passes edit instructions rarely, so rebuilding after an edit keeps every
  // uses() query proportional to its answer instead of to the method. The arrays are sized at
  // the first build; if an edit ever made the index outgrow them, uses() scans instead.
  void index_uses() const {
    const size_t nv = m_.num_values_;
    if (use_start_ == nullptr) {
      use_start_ = alloc_->allocate_list<uint32_t>(nv + 1);
      last_ = alloc_->allocate_list<uint32_t>(nv == 0 ? 1 : nv);
      if (use_start_ == nullptr || last_ == nullptr) {
        no_index_ = true;  // no room: scan
        return;
      }
    }
    for (size_t i = 0; i <= nv; ++i) use_start_[i] = 0;
    for (size_t i = 0; i < nv; ++i) last_[i] = kNever;
    size_t total = 0;
    for (size_t pc = 0; pc < m_.num_steps_; ++pc)
      for_each_named(pc, [&](size_t i) {
        if (last_[i] == pc) return;
        last_[i] = static_cast<uint32_t>(pc);
        ++use_start_[i + 1];
        ++total;
      });
    if (use_pc_ == nullptr) {
      use_pc_ = alloc_->allocate_list<uint32_t>(total == 0 ? 1 : total);
      use_cap_ = use_pc_ != nullptr ? total : 0;
    }
    if (use_pc_ == nullptr || total > use_cap_) {
      no_index_ = true;  // scan from now on
      return;
    }
    for (size_t i = 0; i < nv; ++i) use_start_[i + 1] += use_start_[i];
    for (size_t i = 0; i < nv; ++i) last_[i] = kNever;
    // Fill: use_start_[i] advances as value i's slots fill, then is restored from its neighbour.
    for (size_t pc = 0; pc < m_.num_steps_; ++pc)
      for_each_named(pc, [&](size_t i) {
        if (last_[i] == pc) return;
        last_[i] = static_cast<uint32_t>(pc);
        use_pc_[use_start_[i]++] = static_cast<uint32_t>(pc);
      });
    for (size_t i = nv; i > 0; --i) use_start_[i] = use_start_[i - 1];
    use_start_[0] = 0;
    stale_ = false;
  }

 private:
  // Whether tensor values i and j have planned memory in common.
  bool overlaps(size_t i, size_t j) const {
    if (!m_.values_[i].isTensor() || !m_.values_[j].isTensor()) return false;
    const Tensor a = m_.values_[i].toTensor(), b = m_.values_[j].toTensor();
    const auto x = reinterpret_cast<uintptr_t>(a.const_data_ptr()), y = reinterpret_cast<uintptr_t>(b.const_data_ptr());
    return x != 0 && y != 0 && x < y + b.nbytes() && y < x + a.nbytes();
  }
  size_t index(const EValue* v) const {
    return v >= m_.values_ && v < m_.values_ + m_.num_values_ ? static_cast<size_t>(v - m_.values_) : SIZE_MAX;
  }

  Method& m_;
  MemoryAllocator* alloc_;
  // The use index (index_uses()); stale_ until built and after an edit.
  mutable uint32_t* use_start_ = nullptr;
  mutable uint32_t* use_pc_ = nullptr;
  mutable uint32_t* last_ = nullptr;
  mutable size_t use_cap_ = 0;
  mutable bool stale_ = true;
  mutable bool no_index_ = false;

 public:
  static constexpr uint32_t kNever = UINT32_MAX;
  // Per value, nonzero for a view the memory plan aliases to another tensor's memory and for the
  // tensor it shows (its source: the overlapping tensor written last before the view's first
  // read). Null when there was no room: every tensor then counts as aliased.
  uint8_t* aliased_ = nullptr;
};

// A tensor with data from the file (or the .ptd), or one a load pass computed.
bool MethodRewriterImpl::constant_tensor(size_t i) const {
  if (m_.value_flags_[i] & Method::kFolded) return true;
  const fb::Tensor* t = m_.meta_.flatbuffer()->values()->Get(i)->val_as_Tensor();
  if (t == nullptr || t->allocation_info() != nullptr) return false;
  const auto* extra = t->extra_tensor_info();
  const bool from_file =
      t->data_buffer_idx() > 0 || (extra != nullptr && extra->location() == fb::TensorDataLocation::EXTERNAL);
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
    for (uint32_t j = 0; s.kind == Step::Kind::Delegate && j < s.a; ++j)
      flags[s.args[j] - m.values_] |= Method::kWritten;
  }
  // A planned tensor nothing writes is a view of memory another tensor fills.
  for (size_t i = 0; i < m.num_values_; ++i) {
    const fb::EValue* v = values->Get(i);
    if (v != nullptr && v->val_type() == fb::KernelTypes::Tensor && v->val_as_Tensor()->allocation_info() != nullptr &&
        !(flags[i] & Method::kWritten))
      flags[i] |= Method::kView;
  }
  MethodRewriterImpl rewriter(m, a);
  // The first instruction naming each value, then each view's source (one pass over the views
  // and the tensors they may show).
  uint32_t* first = a->allocate_list<uint32_t>(m.num_values_ == 0 ? 1 : m.num_values_);
  uint8_t* aliased = a->allocate_list<uint8_t>(m.num_values_ == 0 ? 1 : m.num_values_);
  for (size_t i = 0; first != nullptr && aliased != nullptr && i < m.num_values_; ++i)
    first[i] = kNever, aliased[i] = 0;
  for (size_t pc = m.num_steps_; first != nullptr && aliased != nullptr && pc-- > 0;)
    rewriter.for_each_named(pc, [&](size_t i) { first[i] = static_cast<uint32_t>(pc); });
  for (size_t j = 0; first != nullptr && aliased != nullptr && j < m.num_values_; ++j) {
    if (!(flags[j] & Method::kView)) continue;
    uint32_t source = kNever;
    for (size_t k = 0; k < m.num_values_; ++k)
      if (!(flags[k] & Method::kView) && first[k] < first[j] && rewriter.overlaps(k, j) &&
          (source == kNever || first[k] > first[source]))
        source = static_cast<uint32_t>(k);
    // The view itself too: its bytes are laid out as its source writes them (a method input's
    // by the caller), so it can no more change layout than its source can.
    aliased[j] = 1;
    if (source != kNever) aliased[source] = 1;
  }
  rewriter.aliased_ = first != nullptr ? aliased : nullptr;
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
