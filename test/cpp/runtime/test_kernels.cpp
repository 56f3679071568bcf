// Float-only add/mul kernels (b may also be a single element) so the runtime tests do
// not depend on the kernel library.
#include "runtime/core/operator_registry.h"

namespace {

using namespace executorch::runtime;

bool same_float_shape(KernelRuntimeContext& ctx, const Tensor& a, const Tensor& b, const Tensor& out) {
  bool ok = a.scalar_type() == ScalarType::Float && b.scalar_type() == ScalarType::Float &&
            out.scalar_type() == ScalarType::Float && (a.numel() == b.numel() || b.numel() == 1);
  if (ok) ok = out.resize(a.sizes()) == Error::Ok;
  if (!ok) ctx.fail(Error::InvalidArgument);
  return ok;
}

void add_out(KernelRuntimeContext& ctx, Span<EValue*> args) {
  ET_KERNEL_CHECK(ctx, args_match(args, {Tag::Tensor, Tag::Tensor, Tag::ListScalar, Tag::Tensor}), InvalidArgument);
  Tensor a = args[0]->toTensor(), b = args[1]->toTensor(), out = args[3]->toTensor();
  if (!same_float_shape(ctx, a, b, out)) return;
  float alpha = static_cast<float>(args[2]->toScalarDouble());
  for (int64_t i = 0; i < out.numel(); ++i)
    out.mutable_data_ptr<float>()[i] =
        a.const_data_ptr<float>()[i] + alpha * b.const_data_ptr<float>()[b.numel() == 1 ? 0 : i];
}

void mul_out(KernelRuntimeContext& ctx, Span<EValue*> args) {
  ET_KERNEL_CHECK(ctx, args_match(args, {Tag::Tensor, Tag::Tensor, Tag::Tensor}), InvalidArgument);
  Tensor a = args[0]->toTensor(), b = args[1]->toTensor(), out = args[2]->toTensor();
  if (!same_float_shape(ctx, a, b, out)) return;
  for (int64_t i = 0; i < out.numel(); ++i)
    out.mutable_data_ptr<float>()[i] = a.const_data_ptr<float>()[i] * b.const_data_ptr<float>()[b.numel() == 1 ? 0 : i];
}

ET_REGISTER_KERNEL("aten::add.out", add_out);
ET_REGISTER_KERNEL("aten::mul.out", mul_out);

}  // namespace
