// Widening 16-bit float tensors to float32 around a float32-only kernel, and narrowing back.
#include "kernels/portable/util/widen.h"

#include "kernels/cpu/half.h"
#include "kernels/portable/util/elementwise.h"

namespace executorch {
namespace kernels {
namespace {

// Longest argument list of the kernels that widen (batch norm: 10 plus the returns).
constexpr size_t kMaxArgs = 16;

bool is_half_tensor(const EValue* v) { return v != nullptr && v->isTensor() && is_half(v->toTensor().scalar_type()); }

template <typename T>
T* temp_list(KernelRuntimeContext& ctx, size_t n) {
  auto mem = ctx.allocate_temp(n * sizeof(T) + 1, alignof(T) > 16 ? alignof(T) : 16);
  return mem.ok() ? static_cast<T*>(*mem) : nullptr;
}

// A float32 TensorImpl shaped like `t` (same sizes, dim order, dynamism) with room for
// `capacity` elements in temp memory; false when temp memory runs out.
bool make_float_like(KernelRuntimeContext& ctx, const Tensor& t, size_t capacity, runtime::TensorImpl* impl) {
  const size_t dim = static_cast<size_t>(t.dim());
  auto* sizes = temp_list<runtime::SizesType>(ctx, dim);
  auto* order = temp_list<runtime::DimOrderType>(ctx, dim);
  auto* strides = temp_list<runtime::StridesType>(ctx, dim);
  float* data = temp_list<float>(ctx, capacity);
  if (!sizes || !order || !strides || !data) return false;
  for (size_t d = 0; d < dim; ++d) {
    sizes[d] = t.sizes()[d];
    order[d] = t.dim_order()[d];
  }
  *impl = runtime::TensorImpl(ScalarType::Float, dim, sizes, order, strides, data, capacity * sizeof(float),
                              t.shape_dynamism());
  return true;
}

}  // namespace

bool has_half_tensor(Args args, size_t nargs) {
  for (size_t i = 0; i < nargs && i < args.size(); ++i)
    if (is_half_tensor(args[i])) return true;
  return false;
}

void call_widened(KernelRuntimeContext& ctx, Args args, size_t nargs, size_t nouts, KernelFn kernel) {
  ET_KERNEL_CHECK_MSG(ctx, nargs <= kMaxArgs && nargs <= args.size() && args.size() <= nargs + 1 && nouts <= nargs,
                      InvalidArgument, , "16-bit float kernel: unexpected argument count %zu", args.size());
  runtime::TensorImpl impls[kMaxArgs];
  EValue values[kMaxArgs];
  EValue* ptrs[kMaxArgs + 1];
  bool widened[kMaxArgs] = {};
  for (size_t i = 0; i < nargs; ++i) {
    ptrs[i] = args[i];
    if (!is_half_tensor(args[i])) continue;
    const Tensor t = args[i]->toTensor();
    const bool is_out = i >= nargs - nouts;
    // An out argument may grow up to its planned capacity; an input needs its elements only.
    size_t capacity = static_cast<size_t>(t.numel());
    if (is_out && t.unsafeGetTensorImpl()->capacity_bytes() / t.element_size() > capacity)
      capacity = t.unsafeGetTensorImpl()->capacity_bytes() / t.element_size();
    ET_KERNEL_CHECK_MSG(ctx, make_float_like(ctx, t, capacity, &impls[i]), MemoryAllocationFailed, ,
                        "16-bit float kernel: no temp memory for a float32 copy of %lld elements",
                        static_cast<long long>(capacity));
    // Tensors here are dense in their dim order, so element i of storage maps to element i.
    if (!is_out) {
      const cpu::Elem e = elem_of(t.scalar_type());
      float* dst = static_cast<float*>(impls[i].data());
      for (int64_t k = 0; k < t.numel(); ++k) dst[k] = cpu::load_elem(t.const_data_ptr(), e, k);
    }
    values[i] = EValue(Tensor(&impls[i]));
    ptrs[i] = &values[i];
    widened[i] = true;
  }
  // The trailing returns repeat the outs; kernels ignore them, so they pass through unchanged.
  size_t n = nargs;
  if (args.size() > nargs) ptrs[n++] = args[nargs];
  kernel(ctx, Args(ptrs, n));
  if (ctx.failure_state() != Error::Ok) return;
  for (size_t i = nargs - nouts; i < nargs; ++i) {
    if (!widened[i]) continue;
    const Tensor out = args[i]->toTensor();
    const Tensor wide(&impls[i]);
    if (!resize_out(ctx, out, wide)) return;
    const cpu::Elem e = elem_of(out.scalar_type());
    const float* src = wide.const_data_ptr<float>();
    for (int64_t k = 0; k < wide.numel(); ++k) cpu::store_elem(out.mutable_data_ptr(), e, k, src[k]);
  }
}

}  // namespace kernels
}  // namespace executorch
