// Method loading (values, tensors, memory plan, instructions) and execution.
#include "runtime/executor/method.h"

#include <cstdio>
#include <cstring>
#include <new>

#include "runtime/executor/flatbuffer_util.h"
#include "runtime/executor/program.h"
#include "schema/program_generated.h"

namespace executorch {
namespace runtime {
namespace {

namespace fb = executorch_flatbuffer;

bool in_bounds(uint64_t offset, uint64_t length, uint64_t size) { return offset <= size && length <= size - offset; }

template <typename T>
T* alloc_list(MemoryAllocator* a, size_t n) {
  // A zero-length list still gets a valid, distinct pointer.
  T* p = a->allocate_list<T>(n == 0 ? 1 : n);
  if (p != nullptr)
    for (size_t i = 0; i < (n == 0 ? 1 : n); ++i) new (&p[i]) T();
  return p;
}

#define ET_ALLOC_OR_RETURN(ptr, expr)                                                                                  \
  do {                                                                                                                 \
    (ptr) = (expr);                                                                                                    \
    ET_CHECK_OR_RETURN((ptr) != nullptr, MemoryAllocationFailed, "the method allocator is full: give it more memory"); \
  } while (0)

// Full operator name ("aten::add.out") into `buf` for messages.
void operator_name(const fb::Operator* op, char* buf, size_t n) {
  const char* name = op && op->name() ? op->name()->c_str() : "?";
  const char* overload = op && op->overload() ? op->overload()->c_str() : "";
  std::snprintf(buf, n, "%s%s%s", name, *overload ? "." : "", overload);
}

struct TensorSource {
  const Program& program;
  MemoryManager* mm;
  const fb::ExecutionPlan* plan;
  const NamedDataMap* external;  // the .ptd the program's external tensors come from, or null
};

Error parse_tensor(const TensorSource& src, size_t value_index, const fb::Tensor* t, Tensor* out) {
  MemoryAllocator* a = src.mm->method_allocator;
  auto type = static_cast<ScalarType>(t->scalar_type());
  ET_CHECK_OR_RETURN(is_valid_scalar_type(type), InvalidProgram, "tensor value %zu has unknown scalar type %d",
                     value_index, static_cast<int>(t->scalar_type()));
  // Enums from the file hold any byte; only the named ones have a meaning.
  const auto dynamism = static_cast<uint8_t>(t->shape_dynamism());
  ET_CHECK_OR_RETURN(dynamism <= static_cast<uint8_t>(TensorShapeDynamism::DynamicUnbound), InvalidProgram,
                     "tensor value %zu has unknown shape dynamism %u", value_index, static_cast<unsigned>(dynamism));
  const auto* sizes = t->sizes();
  const auto* order = t->dim_order();
  size_t dim = sizes ? sizes->size() : 0;
  size_t order_dim = order ? order->size() : 0;
  ET_CHECK_OR_RETURN(dim <= kTensorDimensionLimit, InvalidProgram, "tensor value %zu has %zu dims; the limit is %zu",
                     value_index, dim, kTensorDimensionLimit);
  ET_CHECK_OR_RETURN(order_dim == dim, InvalidProgram, "tensor value %zu has %zu sizes but %zu dim_order entries",
                     value_index, dim, order_dim);
  SizesType* s;
  DimOrderType* d;
  StridesType* st;
  ET_ALLOC_OR_RETURN(s, alloc_list<SizesType>(a, dim));
  ET_ALLOC_OR_RETURN(d, alloc_list<DimOrderType>(a, dim));
  ET_ALLOC_OR_RETURN(st, alloc_list<StridesType>(a, dim));
  uint32_t seen = 0;
  uint64_t nbytes = element_size(type);
  uint64_t span = 1;
  for (size_t i = 0; i < dim; ++i) {
    int32_t size = sizes->Get(i);
    uint8_t o = order->Get(i);
    ET_CHECK_OR_RETURN(size >= 0, InvalidProgram, "tensor value %zu has negative size %d", value_index, size);
    ET_CHECK_OR_RETURN(o < dim && !(seen & (1u << o)), InvalidProgram,
                       "tensor value %zu has a dim_order that is not a permutation", value_index);
    seen |= 1u << o;
    // Strides are 32-bit, so the non-zero sizes' product is bounded even for an empty tensor.
    span *= size == 0 ? 1 : uint64_t(size);
    ET_CHECK_OR_RETURN(span <= INT32_MAX, InvalidProgram, "tensor value %zu has more than 2^31 elements", value_index);
    nbytes *= uint64_t(size);
    s[i] = size;
    d[i] = o;
  }

  void* data = nullptr;
  size_t capacity = 0;
  const auto* alloc = t->allocation_info();
  const auto* extra = t->extra_tensor_info();
  uint32_t buffer_idx = t->data_buffer_idx();
  bool from_file = buffer_idx > 0;
  if (extra != nullptr && extra->location() == fb::TensorDataLocation::EXTERNAL) {
    ET_CHECK_OR_RETURN(alloc == nullptr && extra->fully_qualified_name() != nullptr, InvalidProgram,
                       "external tensor value %zu has planned memory or no key", value_index);
    const char* key = extra->fully_qualified_name()->c_str();
    ET_CHECK_OR_RETURN(src.external != nullptr, NotFound,
                       "tensor value %zu ('%s') is in a .ptd file: load it with data_path/--data_path", value_index,
                       key);
    Result<const void*> bytes = src.external->get_tensor(key, type, Span<const int32_t>(s, dim),
                                                         Span<const uint8_t>(d, dim), static_cast<size_t>(nbytes));
    if (!bytes.ok()) return bytes.error();
    // Tensor data is read-only by contract; the cast only fits the shared TensorImpl type.
    data = const_cast<void*>(*bytes);
    capacity = static_cast<size_t>(nbytes);
    from_file = true;
  } else if (alloc != nullptr) {
    uint32_t id = alloc->memory_id();
    size_t n_planned = src.mm->planned_buffers.size();
    ET_CHECK_OR_RETURN(id >= 1 && id <= n_planned, InvalidProgram,
                       "tensor value %zu uses memory arena %u; the method has %zu", value_index, id, n_planned);
    uint64_t offset = uint64_t(alloc->memory_offset_low()) | uint64_t(alloc->memory_offset_high()) << 32;
    Span<uint8_t> arena = src.mm->planned_buffers[id - 1];
    ET_CHECK_OR_RETURN(in_bounds(offset, nbytes, arena.size()), InvalidProgram,
                       "tensor value %zu (offset %llu, %llu bytes) overruns arena %u (%zu bytes)", value_index,
                       static_cast<unsigned long long>(offset), static_cast<unsigned long long>(nbytes), id,
                       arena.size());
    data = arena.data() + offset;
    capacity = static_cast<size_t>(nbytes);
    if (buffer_idx > 0) {
      // A mutable buffer (e.g. a module buffer updated in place) starts from file data.
      size_t table = extra ? static_cast<size_t>(extra->mutable_data_segments_idx()) : 0;
      Result<const uint8_t*> init = src.program.mutable_data(table, buffer_idx, capacity);
      if (!init.ok()) return init.error();
      std::memcpy(data, *init, capacity);
    }
  } else if (buffer_idx > 0) {
    Result<const uint8_t*> constant = src.program.constant_data(buffer_idx, static_cast<size_t>(nbytes));
    if (!constant.ok()) return constant.error();
    capacity = static_cast<size_t>(nbytes);
    if (src.program.in_program_table(*constant)) {
      // Inline (legacy) constants sit among the tables the runtime keeps reading, which a
      // malformed program's kernel could overwrite through them: give them their own copy.
      uint8_t* copy;
      ET_ALLOC_OR_RETURN(copy, a->allocate_list<uint8_t>(capacity == 0 ? 1 : capacity));
      std::memcpy(copy, *constant, capacity);
      data = copy;
    } else {
      // Constants are read-only by contract; the const_cast only fits the shared TensorImpl type.
      data = const_cast<uint8_t*>(*constant);
    }
  }
  // A bool byte other than 0/1 has no meaning (and reading it as bool is undefined).
  if (type == ScalarType::Bool && data != nullptr && from_file) {
    const uint8_t* bytes = static_cast<const uint8_t*>(data);
    for (uint64_t i = 0; i < nbytes; ++i)
      ET_CHECK_OR_RETURN(bytes[i] <= 1, InvalidProgram, "bool tensor value %zu holds byte %u; bools must be 0 or 1",
                         value_index, static_cast<unsigned>(bytes[i]));
  }
  // Kernels read elements directly; a misaligned tensor is a corrupt plan or file.
  ET_CHECK_OR_RETURN(reinterpret_cast<uintptr_t>(data) % element_size(type) == 0, InvalidProgram,
                     "tensor value %zu's data is not aligned to its %zu-byte elements", value_index,
                     element_size(type));
  TensorImpl* impl;
  ET_ALLOC_OR_RETURN(impl, a->allocate_list<TensorImpl>(1));
  new (impl) TensorImpl(type, dim, s, d, st, data, capacity, static_cast<TensorShapeDynamism>(dynamism));
  if (extra != nullptr && extra->device_type() != fb::DeviceType::CPU) {
    const auto device = static_cast<int8_t>(extra->device_type());
    ET_CHECK_OR_RETURN(
        device > 0 && static_cast<size_t>(device) < etensor::kNumDeviceTypes && extra->device_index() >= 0,
        InvalidProgram, "tensor value %zu is on unknown device %d:%d", value_index, device,
        static_cast<int>(extra->device_index()));
    impl->set_device(static_cast<etensor::DeviceType>(device), extra->device_index());
  }
  *out = Tensor(impl);
  return Error::Ok;
}

// The program's named data (NamedData entries over segments), as backends see it at init.
class ProgramNamedData final : public NamedDataMap {
 public:
  ProgramNamedData(const Program& program, const NamedDataMap* external) : program_(program), external_(external) {}
  Result<FreeableBuffer> get_data(const char* key) const override {
    const fb::NamedData* e = find(key);
    if (e == nullptr) {
      if (external_ != nullptr) return external_->get_data(key);
      ET_LOG(Error, "the program has no named data '%s'", key);
      return Error::NotFound;
    }
    Result<Span<const uint8_t>> segment = program_.segment(e->segment_index());
    if (!segment.ok()) return segment.error();
    return FreeableBuffer(segment->data(), segment->size());
  }
  // A nested program (ExecutorBackend with external_constants) finds its weights here. The program's
  // named data records no layout, so only the byte count is checked; the .ptd's map checks its own.
  Result<const void*> get_tensor(const char* key, ScalarType type, Span<const int32_t> sizes,
                                 Span<const uint8_t> dim_order, size_t nbytes) const override {
    const fb::NamedData* e = find(key);
    if (e == nullptr) {
      if (external_ != nullptr) return external_->get_tensor(key, type, sizes, dim_order, nbytes);
      ET_LOG(Error, "the program has no named data '%s'", key);
      return Error::NotFound;
    }
    Result<Span<const uint8_t>> segment = program_.segment(e->segment_index());
    if (!segment.ok()) return segment.error();
    ET_CHECK_OR_RETURN(segment->size() == nbytes, InvalidExternalData,
                       "named data '%s' holds %zu bytes; the tensor needs %zu", key, segment->size(), nbytes);
    return static_cast<const void*>(segment->data());
  }
  Result<size_t> get_num_keys() const override {
    const auto* entries = program_.flatbuffer()->named_data();
    return static_cast<size_t>(entries ? entries->size() : 0);
  }
  Result<const char*> get_key(size_t index) const override {
    const auto* entries = program_.flatbuffer()->named_data();
    ET_CHECK_OR_RETURN(entries != nullptr && index < entries->size() && entries->Get(index)->key() != nullptr,
                       InvalidArgument, "named data %zu is out of range or has no key", index);
    return entries->Get(index)->key()->c_str();
  }

 private:
  // The program's own entry named `key`, or null.
  const fb::NamedData* find(const char* key) const {
    const auto* entries = program_.flatbuffer()->named_data();
    for (size_t i = 0; entries != nullptr && i < entries->size(); ++i) {
      const fb::NamedData* e = entries->Get(i);
      if (e != nullptr && e->key() != nullptr && std::strcmp(e->key()->c_str(), key) == 0) return e;
    }
    return nullptr;
  }

  const Program& program_;
  const NamedDataMap* external_;
};

// Resolves list items (value indices) to EValue pointers; -1 means None where allowed.
Error list_items(const flatbuffers::Vector<int32_t>* items, EValue* values, size_t n_values, bool allow_none,
                 size_t value_index, MemoryAllocator* a, EValue*** out) {
  size_t n = items ? items->size() : 0;
  EValue** p;
  ET_ALLOC_OR_RETURN(p, alloc_list<EValue*>(a, n));
  for (size_t j = 0; j < n; ++j) {
    int32_t item = items->Get(j);
    if (item == -1 && allow_none) {
      p[j] = nullptr;
      continue;
    }
    ET_CHECK_OR_RETURN(item >= 0 && static_cast<size_t>(item) < n_values, InvalidProgram,
                       "list value %zu refers to value %d; the method has %zu", value_index, item, n_values);
    p[j] = &values[item];
  }
  *out = p;
  return Error::Ok;
}

Error list_items(const flatbuffers::Vector<int64_t>* items, EValue* values, size_t n_values, size_t value_index,
                 MemoryAllocator* a, EValue*** out) {
  size_t n = items ? items->size() : 0;
  EValue** p;
  ET_ALLOC_OR_RETURN(p, alloc_list<EValue*>(a, n));
  for (size_t j = 0; j < n; ++j) {
    int64_t item = load_item(items, j);
    ET_CHECK_OR_RETURN(item >= 0 && static_cast<uint64_t>(item) < n_values, InvalidProgram,
                       "int list value %zu refers to value %lld; the method has %zu", value_index,
                       static_cast<long long>(item), n_values);
    p[j] = &values[item];
  }
  *out = p;
  return Error::Ok;
}

}  // namespace

void (*Method::run_load_passes_)(Method&, MemoryAllocator*) = nullptr;

Error Method::init(const Program& program, MemoryManager* mm) {
  const fb::ExecutionPlan* plan = meta_.flatbuffer();
  temp_allocator_ = mm->temp_allocator;
  size_t n_planned = meta_.num_memory_planned_buffers();
  ET_CHECK_OR_RETURN(mm->planned_buffers.size() >= n_planned, InvalidArgument,
                     "method '%s' needs %zu planned buffers; %zu were given", meta_.name(), n_planned,
                     mm->planned_buffers.size());
  for (size_t i = 0; i < n_planned; ++i) {
    Result<int64_t> want = meta_.memory_planned_buffer_size(i);
    if (!want.ok()) return want.error();
    ET_CHECK_OR_RETURN(static_cast<uint64_t>(*want) <= mm->planned_buffers[i].size(), InvalidArgument,
                       "planned buffer %zu holds %zu bytes; the method needs %lld", i, mm->planned_buffers[i].size(),
                       static_cast<long long>(*want));
  }
  // Tensors may only use the declared part of each arena, whatever the caller gave.
  Span<uint8_t>* arenas;
  ET_ALLOC_OR_RETURN(arenas, alloc_list<Span<uint8_t>>(mm->method_allocator, n_planned));
  for (size_t i = 0; i < n_planned; ++i)
    arenas[i] = Span<uint8_t>(mm->planned_buffers[i].data(), static_cast<size_t>(*meta_.memory_planned_buffer_size(i)));
  MemoryManager bounded = *mm;
  bounded.planned_buffers = Span<Span<uint8_t>>(arenas, n_planned);

  ET_TRY(init_values(program, &bounded));

  const auto* inputs = plan->inputs();
  const auto* outputs = plan->outputs();
  num_inputs_ = inputs ? inputs->size() : 0;
  num_outputs_ = outputs ? outputs->size() : 0;
  ET_ALLOC_OR_RETURN(input_index_, alloc_list<uint32_t>(mm->method_allocator, num_inputs_));
  ET_ALLOC_OR_RETURN(output_index_, alloc_list<uint32_t>(mm->method_allocator, num_outputs_));
  ET_ALLOC_OR_RETURN(input_bound_, alloc_list<bool>(mm->method_allocator, num_inputs_));
  ET_ALLOC_OR_RETURN(input_borrowed_, alloc_list<bool>(mm->method_allocator, num_inputs_));
  ET_ALLOC_OR_RETURN(output_state_, alloc_list<uint8_t>(mm->method_allocator, num_outputs_));
  for (size_t i = 0; i < num_inputs_; ++i) {
    int32_t v = inputs->Get(i);
    ET_CHECK_OR_RETURN(v >= 0 && static_cast<size_t>(v) < num_values_, InvalidProgram,
                       "input %zu refers to value %d; the method has %zu", i, v, num_values_);
    input_index_[i] = static_cast<uint32_t>(v);
  }
  for (size_t i = 0; i < num_outputs_; ++i) {
    int32_t v = outputs->Get(i);
    ET_CHECK_OR_RETURN(v >= 0 && static_cast<size_t>(v) < num_values_, InvalidProgram,
                       "output %zu refers to value %d; the method has %zu", i, v, num_values_);
    output_index_[i] = static_cast<uint32_t>(v);
  }
  ET_TRY(init_steps(program, mm));
  // A method loaded to log intermediate outputs (numeric debugging) runs as the file describes it:
  // each instruction's logged output is its own node's, which fusing, folding or relayouting at load
  // would merge. Profiling alone keeps the rewrites: it times what a plain run runs.
  bool debugging = event_tracer_ != nullptr &&
                   event_tracer_->event_tracer_debug_level() >= EventTracerDebugLogLevel::kIntermediateOutputs;
  if (run_load_passes_ != nullptr && !debugging) run_load_passes_(*this, mm->method_allocator);
  return check_tensor_memory();
}

Error Method::init_values(const Program& program, MemoryManager* mm) {
  const fb::ExecutionPlan* plan = meta_.flatbuffer();
  MemoryAllocator* a = mm->method_allocator;
  const auto* values = plan->values();
  num_values_ = values ? values->size() : 0;
  ET_ALLOC_OR_RETURN(values_, alloc_list<EValue>(a, num_values_));
  TensorSource src{program, mm, plan, external_};
  for (size_t i = 0; i < num_values_; ++i) {
    const fb::EValue* v = values->Get(i);
    if (v == nullptr) continue;
    // The verifier accepts a union whose type is set but whose table is absent.
    ET_CHECK_OR_RETURN(v->val_type() == fb::KernelTypes::NONE || v->val() != nullptr, InvalidProgram,
                       "value %zu has a type but no content", i);
    switch (v->val_type()) {
      case fb::KernelTypes::NONE:
      case fb::KernelTypes::Null: break;
      case fb::KernelTypes::Int: values_[i] = EValue(static_cast<int64_t>(v->val_as_Int()->int_val())); break;
      case fb::KernelTypes::Bool: values_[i] = EValue(static_cast<bool>(v->val_as_Bool()->bool_val())); break;
      case fb::KernelTypes::Double: values_[i] = EValue(static_cast<double>(v->val_as_Double()->double_val())); break;
      case fb::KernelTypes::String: {
        const auto* s = v->val_as_String()->string_val();
        values_[i] = EValue(s ? std::string_view(s->c_str(), s->size()) : std::string_view());
        break;
      }
      case fb::KernelTypes::Tensor: {
        Tensor t;
        ET_TRY(parse_tensor(src, i, v->val_as_Tensor(), &t));
        values_[i] = EValue(t);
        break;
      }
      case fb::KernelTypes::IntList: {
        const auto* items = v->val_as_IntList()->items();
        EValue** boxed;
        int64_t* unboxed;
        ET_TRY(list_items(items, values_, num_values_, i, a, &boxed));
        ET_ALLOC_OR_RETURN(unboxed, alloc_list<int64_t>(a, items ? items->size() : 0));
        values_[i] = EValue(BoxedList<int64_t>(boxed, unboxed, items ? items->size() : 0));
        break;
      }
      case fb::KernelTypes::DoubleList: {
        const auto* items = v->val_as_DoubleList()->items();
        size_t n = items ? items->size() : 0;
        double* p;
        ET_ALLOC_OR_RETURN(p, alloc_list<double>(a, n));
        for (size_t j = 0; j < n; ++j) p[j] = load_item(items, j);
        values_[i] = EValue(Span<const double>(p, n));
        break;
      }
      case fb::KernelTypes::BoolList: {
        // Copied and normalised: a byte other than 0/1 is not a valid bool.
        const auto* items = v->val_as_BoolList()->items();
        size_t n = items ? items->size() : 0;
        bool* p;
        ET_ALLOC_OR_RETURN(p, alloc_list<bool>(a, n));
        for (size_t j = 0; j < n; ++j) p[j] = reinterpret_cast<const uint8_t*>(items->data())[j] != 0;
        values_[i] = EValue(Span<const bool>(p, n));
        break;
      }
      case fb::KernelTypes::TensorList: {
        const auto* items = v->val_as_TensorList()->items();
        EValue** boxed;
        Tensor* unboxed;
        ET_TRY(list_items(items, values_, num_values_, false, i, a, &boxed));
        ET_ALLOC_OR_RETURN(unboxed, alloc_list<Tensor>(a, items ? items->size() : 0));
        values_[i] = EValue(BoxedList<Tensor>(boxed, unboxed, items ? items->size() : 0));
        break;
      }
      case fb::KernelTypes::OptionalTensorList: {
        const auto* items = v->val_as_OptionalTensorList()->items();
        EValue** boxed;
        std::optional<Tensor>* unboxed;
        ET_TRY(list_items(items, values_, num_values_, true, i, a, &boxed));
        ET_ALLOC_OR_RETURN(unboxed, alloc_list<std::optional<Tensor>>(a, items ? items->size() : 0));
        values_[i] = EValue(BoxedList<std::optional<Tensor>>(boxed, unboxed, items ? items->size() : 0));
        break;
      }
      default:
        ET_LOG(Error, "value %zu has unknown type %d", i, static_cast<int>(v->val_type()));
        return Error::InvalidProgram;
    }
  }
  return check_lists();
}

// Lists may name values defined after them, so item types are checked once all exist.
Error Method::check_lists() {
  const auto* values = meta_.flatbuffer()->values();
  for (size_t i = 0; i < num_values_; ++i) {
    const fb::EValue* v = values->Get(i);
    if (v == nullptr) continue;
    if (v->val_type() == fb::KernelTypes::IntList) {
      const auto* items = v->val_as_IntList()->items();
      for (size_t j = 0; items && j < items->size(); ++j)
        ET_CHECK_OR_RETURN(values_[load_item(items, j)].isInt(), InvalidProgram,
                           "int list value %zu item %zu is a %s, not an int", i, j,
                           tag_name(values_[load_item(items, j)].tag()));
    } else if (v->val_type() == fb::KernelTypes::TensorList || v->val_type() == fb::KernelTypes::OptionalTensorList) {
      bool optional = v->val_type() == fb::KernelTypes::OptionalTensorList;
      const auto* items = optional ? v->val_as_OptionalTensorList()->items() : v->val_as_TensorList()->items();
      for (size_t j = 0; items && j < items->size(); ++j) {
        int32_t item = items->Get(j);
        if (optional && item == -1) continue;
        ET_CHECK_OR_RETURN(values_[item].isTensor() || (optional && values_[item].isNone()), InvalidProgram,
                           "tensor list value %zu item %zu is a %s, not a tensor", i, j, tag_name(values_[item].tag()));
      }
    }
  }
  return Error::Ok;
}

// Every tensor a kernel can touch must have memory; only inputs and outputs may get it later.
// The view op's output is not planned: it shares its input's memory, which the
// kernel points it at when it runs. Pointing it there now keeps it valid even if a
// malformed program reads it before the view runs.
Error Method::bind_view_outputs() {
  const auto* operators = meta_.flatbuffer()->operators();
  for (size_t pc = 0; pc < num_steps_; ++pc) {
    const Step& s = steps_[pc];
    if (s.kind != Step::Kind::Kernel || s.a < 3) continue;
    const fb::Operator* op = operators->Get(s.b);
    if (op->name() == nullptr || op->name()->string_view() != "executorch_prim::et_view") continue;
    EValue* self = s.args[0];
    EValue* out = s.args[2];
    if (!self->isTensor() || !out->isTensor()) continue;
    TensorImpl* from = self->toTensor().unsafeGetTensorImpl();
    TensorImpl* to = out->toTensor().unsafeGetTensorImpl();
    if (to->data() != nullptr || from->data() == nullptr) continue;
    ET_CHECK_OR_RETURN(to->nbytes() <= from->capacity_bytes() && to->element_size() == from->element_size(),
                       InvalidProgram, "view instruction %zu's output is larger than its input", pc);
    to->set_data(from->data());
    to->set_capacity_bytes(from->capacity_bytes());
  }
  return Error::Ok;
}

Error Method::check_tensor_memory() {
  ET_TRY(bind_view_outputs());
  for (size_t i = 0; i < num_inputs_; ++i) input_bound_[i] = true;
  for (size_t i = 0; i < num_values_; ++i) {
    if (!values_[i].isTensor()) continue;
    TensorImpl* t = values_[i].toTensor().unsafeGetTensorImpl();
    if (t->data() != nullptr || t->nbytes() == 0) continue;
    bool is_input = false, is_output = false;
    for (size_t k = 0; k < num_inputs_; ++k) {
      if (input_index_[k] == i) {
        input_bound_[k] = false;
        input_borrowed_[k] = true;
        is_input = true;
      }
    }
    // An output that is also an input has the input's memory.
    for (size_t k = 0; k < num_outputs_ && !is_input; ++k) {
      if (output_index_[k] == i) {
        output_state_[k] = kUnbound;
        is_output = true;
      }
    }
    ET_CHECK_OR_RETURN(is_input || is_output, InvalidProgram,
                       "tensor value %zu has no planned memory and no constant data", i);
    // Its sizes are at their upper bounds until it runs: the bytes a caller's buffer must hold.
    if (is_output) t->set_capacity_bytes(t->nbytes());
  }
  return Error::Ok;
}

Error Method::init_delegate(const Program& program, MemoryManager* mm, size_t index) {
  const fb::BackendDelegate* d = meta_.flatbuffer()->delegates()->Get(index);
  ET_CHECK_OR_RETURN(d != nullptr && d->id() != nullptr && d->processed() != nullptr, InvalidProgram,
                     "delegate %zu of method '%s' has no backend id or payload", index, meta_.name());
  const char* id = d->id()->c_str();
  BackendInterface* backend = get_backend_class(id);
  ET_CHECK_OR_RETURN(backend != nullptr, NotFound,
                     "method '%s' needs backend '%s' (delegate %zu), which is not registered: link the "
                     "library that registers '%s' into this application (whole-archive, so its static "
                     "registration is kept)",
                     meta_.name(), id, index, id);
  ET_CHECK_OR_RETURN(backend->is_available(), NotSupported,
                     "backend '%s' is registered but not available on this machine", id);
  const fb::BackendDelegateDataReference* ref = d->processed();
  const void* data = nullptr;
  size_t size = 0;
  if (ref->location() == fb::DataLocation::INLINE) {
    const auto* inline_data = program.flatbuffer()->backend_delegate_data();
    size_t n = inline_data ? inline_data->size() : 0;
    ET_CHECK_OR_RETURN(ref->index() < n && inline_data->Get(ref->index())->data() != nullptr, InvalidProgram,
                       "delegate %zu ('%s') uses inline data %u; the program has %zu", index, id, ref->index(), n);
    data = inline_data->Get(ref->index())->data()->data();
    size = inline_data->Get(ref->index())->data()->size();
  } else {
    Result<Span<const uint8_t>> segment = program.segment(ref->index());
    if (!segment.ok()) return segment.error();
    data = segment->data();
    size = segment->size();
  }
  const auto* specs = d->compile_specs();
  size_t n_specs = specs ? specs->size() : 0;
  CompileSpec* compile_specs;
  ET_ALLOC_OR_RETURN(compile_specs, alloc_list<CompileSpec>(mm->method_allocator, n_specs));
  for (size_t i = 0; i < n_specs; ++i) {
    const fb::CompileSpec* spec = specs->Get(i);
    ET_CHECK_OR_RETURN(spec != nullptr && spec->key() != nullptr, InvalidProgram,
                       "compile spec %zu of delegate %zu ('%s') has no key", i, index, id);
    compile_specs[i].key = spec->key()->c_str();
    compile_specs[i].value =
        SizedBuffer{spec->value() ? spec->value()->data() : nullptr, spec->value() ? spec->value()->size() : 0};
  }
  FreeableBuffer processed(data, size);
  ProgramNamedData named(program, external_);
  BackendInitContext context(mm->method_allocator, &named, meta_.name());
  Result<DelegateHandle*> handle = backend->init(context, &processed, ArrayRef<CompileSpec>(compile_specs, n_specs));
  if (!handle.ok()) {
    ET_LOG(Error, "backend '%s' failed to initialise delegate %zu of method '%s': %s", id, index, meta_.name(),
           error_name(handle.error()));
    return handle.error();
  }
  delegates_.slots[index] = DelegateSlot{backend, *handle, id};
  return Error::Ok;
}

Error Method::init_op_event_names(MemoryAllocator* a, const void* operators_table, size_t n_ops) {
  const auto* operators = static_cast<const flatbuffers::Vector<flatbuffers::Offset<fb::Operator>>*>(operators_table);
  ET_ALLOC_OR_RETURN(op_event_names_, alloc_list<const char*>(a, n_ops));
  for (size_t i = 0; i < n_ops; ++i) {
    char full[160];
    operator_name(operators->Get(i), full, sizeof(full));
    const char* bare = std::strstr(full, "::");
    bare = bare != nullptr ? bare + 2 : full;
    size_t n = std::strlen("native_call_") + std::strlen(bare) + 1;
    char* name;
    ET_ALLOC_OR_RETURN(name, a->allocate_list<char>(n));
    std::snprintf(name, n, "native_call_%s", bare);
    op_event_names_[i] = name;
  }
  return Error::Ok;
}

Error Method::init_steps(const Program& program, MemoryManager* mm) {
  const fb::ExecutionPlan* plan = meta_.flatbuffer();
  MemoryAllocator* a = mm->method_allocator;
  const auto* chains = plan->chains();
  const auto* operators = plan->operators();
  size_t n_ops = operators ? operators->size() : 0;
  num_steps_ = meta_.num_instructions();
  ET_ALLOC_OR_RETURN(steps_, alloc_list<Step>(a, num_steps_));
  size_t n_delegates = plan->delegates() ? plan->delegates()->size() : 0;
  ET_ALLOC_OR_RETURN(delegates_.slots, alloc_list<DelegateSlot>(a, n_delegates));
  delegates_.count = n_delegates;
  OpFunction* resolved;
  ET_ALLOC_OR_RETURN(resolved, alloc_list<OpFunction>(a, n_ops));
  // Named at load whether or not a tracer is set now: a host may attach one later (set_event_tracer).
  ET_TRY(init_op_event_names(a, operators, n_ops));

  size_t pc = 0;
  for (size_t c = 0; chains && c < chains->size(); ++c) {
    const auto* instructions = chains->Get(c)->instructions();
    size_t base = pc;
    size_t n = instructions ? instructions->size() : 0;
    for (size_t k = 0; k < n; ++k, ++pc) {
      const fb::Instruction* ins = instructions->Get(k);
      Step& s = steps_[pc];
      auto type = ins && ins->instr_args() ? ins->instr_args_type() : fb::InstructionArguments::NONE;
      switch (type) {
        case fb::InstructionArguments::KernelCall: {
          const auto* call = ins->instr_args_as_KernelCall();
          int32_t op = call->op_index();
          ET_CHECK_OR_RETURN(op >= 0 && static_cast<size_t>(op) < n_ops, InvalidProgram,
                             "instruction %zu calls operator %d; the method has %zu", pc, op, n_ops);
          if (resolved[op] == nullptr) {
            const fb::Operator* o = operators->Get(op);
            std::string_view name = o->name() ? o->name()->string_view() : std::string_view();
            std::string_view overload = o->overload() ? o->overload()->string_view() : std::string_view();
            resolved[op] = get_op_function(name, overload);
            if (resolved[op] == nullptr) {
              char full[128];
              operator_name(o, full, sizeof(full));
              ET_LOG(Error,
                     "operator %s is not registered in this runtime: rebuild it with the op selected "
                     "(add %s to -DEXECUTORCH_SELECT_OPS_LIST, or select by model with "
                     "-DEXECUTORCH_SELECT_OPS_MODEL=<this .pte>) or link a kernel library providing it",
                     full, full);
              return Error::OperatorMissing;
            }
          }
          const auto* args = call->args();
          size_t n_args = args ? args->size() : 0;
          EValue** arg_ptrs;
          ET_TRY(list_items(args, values_, num_values_, false, pc, a, &arg_ptrs));
          s = Step{Step::Kind::Kernel, static_cast<uint32_t>(n_args), static_cast<uint32_t>(op), resolved[op],
                   arg_ptrs};
          break;
        }
        case fb::InstructionArguments::MoveCall: {
          const auto* call = ins->instr_args_as_MoveCall();
          int32_t from = call->move_from(), to = call->move_to();
          ET_CHECK_OR_RETURN(
              from >= 0 && static_cast<size_t>(from) < num_values_ && to >= 0 && static_cast<size_t>(to) < num_values_,
              InvalidProgram, "move instruction %zu has value %d -> %d out of range", pc, from, to);
          s = Step{Step::Kind::Move, static_cast<uint32_t>(from), static_cast<uint32_t>(to), nullptr, nullptr};
          break;
        }
        case fb::InstructionArguments::JumpFalseCall: {
          const auto* call = ins->instr_args_as_JumpFalseCall();
          int32_t cond = call->cond_value_index(), dest = call->destination_instruction();
          ET_CHECK_OR_RETURN(cond >= 0 && static_cast<size_t>(cond) < num_values_, InvalidProgram,
                             "jump instruction %zu tests value %d out of range", pc, cond);
          // A destination equal to the chain length jumps past its last instruction.
          ET_CHECK_OR_RETURN(dest >= 0 && static_cast<size_t>(dest) <= n, InvalidProgram,
                             "jump instruction %zu targets %d; its chain has %zu instructions", pc, dest, n);
          s = Step{Step::Kind::JumpFalse, static_cast<uint32_t>(cond), static_cast<uint32_t>(base + dest), nullptr,
                   nullptr};
          break;
        }
        case fb::InstructionArguments::FreeCall: {
          int32_t v = ins->instr_args_as_FreeCall()->value_index();
          ET_CHECK_OR_RETURN(v >= 0 && static_cast<size_t>(v) < num_values_, InvalidProgram,
                             "free instruction %zu names value %d out of range", pc, v);
          s = Step{Step::Kind::Free, static_cast<uint32_t>(v), 0, nullptr, nullptr};
          break;
        }
        case fb::InstructionArguments::DelegateCall: {
          const auto* call = ins->instr_args_as_DelegateCall();
          int32_t d = call->delegate_index();
          ET_CHECK_OR_RETURN(d >= 0 && static_cast<size_t>(d) < n_delegates, InvalidProgram,
                             "instruction %zu calls delegate %d; the method has %zu", pc, d, n_delegates);
          if (delegates_.slots[d].backend == nullptr) ET_TRY(init_delegate(program, mm, static_cast<size_t>(d)));
          const auto* args = call->args();
          EValue** arg_ptrs;
          ET_TRY(list_items(args, values_, num_values_, false, pc, a, &arg_ptrs));
          s = Step{Step::Kind::Delegate, static_cast<uint32_t>(args ? args->size() : 0), static_cast<uint32_t>(d),
                   nullptr, arg_ptrs};
          break;
        }
        default:
          ET_LOG(Error, "instruction %zu has unknown type %d", pc, static_cast<int>(type));
          return Error::InvalidProgram;
      }
    }
  }
  return Error::Ok;
}

Error Method::set_input_tensor(size_t index, ScalarType type, Span<const int64_t> sizes, const void* data,
                               size_t nbytes) {
  ET_CHECK_OR_RETURN(index < num_inputs_, InvalidArgument, "input %zu is out of range (%zu inputs)", index,
                     num_inputs_);
  EValue& v = values_[input_index_[index]];
  ET_CHECK_OR_RETURN(v.isTensor(), InvalidArgument, "input %zu is a %s, not a tensor", index, tag_name(v.tag()));
  TensorImpl* t = v.toTensor().unsafeGetTensorImpl();
  ET_CHECK_OR_RETURN(type == t->scalar_type(), InvalidArgument, "input %zu has dtype %s; got %s", index,
                     scalar_type_name(t->scalar_type()), scalar_type_name(type));
  ET_CHECK_OR_RETURN(sizes.size() == t->dim(), InvalidArgument, "input %zu has %zu dims; got %zu", index, t->dim(),
                     sizes.size());
  if (type == ScalarType::Bool && data != nullptr) {
    const uint8_t* bytes = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < nbytes; ++i)
      ET_CHECK_OR_RETURN(bytes[i] <= 1, InvalidArgument, "input %zu: bool data holds byte %u; bools must be 0 or 1",
                         index, static_cast<unsigned>(bytes[i]));
  }
  bool borrowed = input_borrowed_[index];
  if (borrowed) t->set_capacity_bytes(nbytes);
  Error e = t->resize(sizes);
  ET_CHECK_OR_RETURN(
      e == Error::Ok, InvalidArgument, "input %zu: sizes do not match the method (%s): %s", index,
      t->shape_dynamism() == TensorShapeDynamism::Static ? "static shape" : "exceed the exported upper bounds",
      error_name(e));
  ET_CHECK_OR_RETURN(nbytes == t->nbytes(), InvalidArgument, "input %zu: %zu data bytes given; the sizes need %zu",
                     index, nbytes, t->nbytes());
  if (borrowed) {
    ET_CHECK_OR_RETURN(reinterpret_cast<uintptr_t>(data) % t->element_size() == 0, InvalidArgument,
                       "input %zu: data is not aligned to its %zu-byte elements", index, t->element_size());
    t->set_data(const_cast<void*>(data));
    input_bound_[index] = true;
  } else if (nbytes > 0) {
    ET_CHECK_OR_RETURN(data != nullptr, InvalidArgument, "input %zu: data is null", index);
    std::memmove(t->data(), data, nbytes);
  }
  return Error::Ok;
}

Error Method::set_input(size_t index, const EValue& value) {
  ET_CHECK_OR_RETURN(index < num_inputs_, InvalidArgument, "input %zu is out of range (%zu inputs)", index,
                     num_inputs_);
  EValue& v = values_[input_index_[index]];
  ET_CHECK_OR_RETURN(value.isScalar() && value.tag() == v.tag(), InvalidArgument,
                     "input %zu is a %s; got a %s (tensors go through set_input_tensor)", index, tag_name(v.tag()),
                     tag_name(value.tag()));
  v = value;
  return Error::Ok;
}

Error Method::set_output_data_ptr(void* buffer, size_t size, size_t output_idx) {
  ET_CHECK_OR_RETURN(output_idx < num_outputs_, InvalidArgument, "output %zu is out of range (%zu outputs)", output_idx,
                     num_outputs_);
  ET_CHECK_OR_RETURN(output_state_[output_idx] != kOwnMemory, InvalidArgument,
                     "output %zu has the program's memory; only outputs exported with alloc_graph_output=False "
                     "take a caller's buffer",
                     output_idx);
  uint32_t v = output_index_[output_idx];
  TensorImpl* t = values_[v].toTensor().unsafeGetTensorImpl();
  ET_CHECK_OR_RETURN(buffer != nullptr && size >= t->capacity_bytes(), InvalidArgument,
                     "output %zu needs a buffer of %zu bytes (its upper-bound sizes); got %zu", output_idx,
                     t->capacity_bytes(), buffer == nullptr ? size_t(0) : size);
  ET_CHECK_OR_RETURN(reinterpret_cast<uintptr_t>(buffer) % t->element_size() == 0, InvalidArgument,
                     "output %zu: the buffer is not aligned to its %zu-byte elements", output_idx, t->element_size());
  t->set_data(buffer);
  for (size_t k = 0; k < num_outputs_; ++k)  // every output naming this value
    if (output_index_[k] == v) output_state_[k] = kBound;
  return Error::Ok;
}

Result<const EValue*> Method::get_output(size_t index) const {
  ET_CHECK_OR_RETURN(index < num_outputs_, InvalidArgument, "output %zu is out of range (%zu outputs)", index,
                     num_outputs_);
  return &values_[output_index_[index]];
}

Result<const EValue*> Method::get_input(size_t index) const {
  ET_CHECK_OR_RETURN(index < num_inputs_, InvalidArgument, "input %zu is out of range (%zu inputs)", index,
                     num_inputs_);
  return &values_[input_index_[index]];
}

Error Method::execute() {
  for (size_t i = 0; i < num_inputs_; ++i)
    ET_CHECK_OR_RETURN(input_bound_[i], InvalidState,
                       "input %zu has no data: set it with set_input_tensor before execute", i);
  for (size_t i = 0; i < num_outputs_; ++i)
    ET_CHECK_OR_RETURN(output_state_[i] != kUnbound, InvalidState,
                       "output %zu has no memory (exported with alloc_graph_output=False): bind a buffer with "
                       "set_output_data_ptr before execute",
                       i);
  if (event_tracer_ == nullptr) return run_steps<false>();
  EventTracer* tracer = event_tracer_;
  tracer->create_event_block("Execute");
  tracer->set_chain_debug_handle(kUnsetChainId, 0);
  EventTracerEntry run = tracer->start_profiling("Method::execute", kUnsetChainId, 0);
  Error e = run_steps<true>();
  tracer->set_chain_debug_handle(kUnsetChainId, 0);
  if (e != Error::Ok) return e;
  tracer->end_profiling(run);
  if (tracer->event_tracer_debug_level() >= EventTracerDebugLogLevel::kProgramOutputs)
    for (size_t i = 0; i < num_outputs_; ++i)
      tracer->log_evalue(values_[output_index_[i]], LoggedEValueType::kProgramOutput);
  return Error::Ok;
}

// The instruction loop; the traced instantiation also reports each instruction to the tracer.
template <bool kTraced>
Error Method::run_steps() {
  EventTracer* tracer = kTraced ? event_tracer_ : nullptr;
  const bool log_values =
      kTraced && tracer->event_tracer_debug_level() >= EventTracerDebugLogLevel::kIntermediateOutputs;
  size_t pc = 0;
  uint64_t budget = instruction_limit_ == 0 ? UINT64_MAX : instruction_limit_;
  while (pc < num_steps_) {
    if (budget-- == 0) {
      ET_LOG(Error,
             "method '%s' ran %llu instructions without finishing (instruction %zu next): it loops, or runs "
             "longer than the limit; raise it with Method::set_instruction_limit (executor_runner "
             "--max_instructions N, 0 for none) if it is meant to",
             meta_.name(), static_cast<unsigned long long>(instruction_limit_), pc);
      return Error::OutOfResources;
    }
    const Step& s = steps_[pc];
    EventTracerEntry outer;
    // Free steps (and kernels folded away at load, which become Free) do no work worth an event.
    if (kTraced && s.kind != Step::Kind::Free) {
      // One chain: instruction ids are positions in it.
      tracer->set_chain_debug_handle(0, static_cast<DebugHandle>(pc));
      static const char* const kNames[] = {"OPERATOR_CALL", "MOVE_CALL", "JF_CALL", "FREE_CALL", "DELEGATE_CALL"};
      outer = tracer->start_profiling(kNames[static_cast<int>(s.kind)], 0, static_cast<DebugHandle>(pc));
    }
    switch (s.kind) {
      case Step::Kind::Kernel: {
        KernelRuntimeContext context(temp_allocator_, s.state);
        EventTracerEntry inner;
        if (kTraced) inner = tracer->start_profiling(op_event_names_[s.b], 0, static_cast<DebugHandle>(pc));
        s.op(context, Span<EValue*>(s.args, s.a));
        if (kTraced) {
          if (log_values && s.a > 0 && context.failure_state() == Error::Ok)
            log_value(*s.args[s.a - 1], LoggedEValueType::kIntermediateOutput);
          tracer->end_profiling(inner);
        }
        if (temp_allocator_ != nullptr) temp_allocator_->reset();
        if (context.failure_state() != Error::Ok) {
          char name[128];
          operator_name(meta_.flatbuffer()->operators()->Get(s.b), name, sizeof(name));
          ET_LOG(Error, "kernel %s failed at instruction %zu: %s", name, pc, error_name(context.failure_state()));
          return context.failure_state();
        }
        ++pc;
        break;
      }
      case Step::Kind::Move:
        values_[s.b] = values_[s.a];
        ++pc;
        break;
      case Step::Kind::JumpFalse: {
        const EValue& cond = values_[s.a];
        bool truth;
        if (cond.isBool()) {
          truth = cond.toBool();
        } else {
          Tensor t = cond.toTensor();
          ET_CHECK_OR_RETURN(cond.isTensor() && t.scalar_type() == ScalarType::Bool, InvalidProgram,
                             "jump instruction %zu tests a %s, not a bool", pc, tag_name(cond.tag()));
          // All elements must hold; bytes are read as integers since any byte may appear.
          const uint8_t* p = t.const_data_ptr<uint8_t>();
          truth = true;
          for (int64_t i = 0; i < t.numel() && truth; ++i) truth = p[i] != 0;
        }
        if (kTraced) tracer->end_profiling(outer);
        if (truth) {
          ++pc;
          continue;
        }
        pc = s.b;
        continue;
      }
      case Step::Kind::Free: ++pc; continue;
      case Step::Kind::Delegate: {
        const DelegateSlot& slot = delegates_.slots[s.b];
        BackendExecutionContext context(temp_allocator_, meta_.name(), tracer);
        Error e = slot.backend->execute(context, slot.handle, Span<EValue*>(s.args, s.a));
        if (temp_allocator_ != nullptr) temp_allocator_->reset();
        if (e != Error::Ok) {
          ET_LOG(Error, "delegate %u (backend '%s') failed at instruction %zu: %s", s.b, slot.id, pc, error_name(e));
          return e;
        }
        if (log_values) {
          tracer->set_chain_debug_handle(0, static_cast<DebugHandle>(pc));
          for (uint32_t i = 0; i < s.a; ++i) log_value(*s.args[i], LoggedEValueType::kIntermediateOutput);
        }
        ++pc;
        break;
      }
    }
    if (kTraced) tracer->end_profiling(outer);
  }
  return Error::Ok;
}

template Error Method::run_steps<false>();
template Error Method::run_steps<true>();

void Method::log_value(const EValue& v, LoggedEValueType type) { event_tracer_->log_evalue(v, type); }

}  // namespace runtime
}  // namespace executorch
