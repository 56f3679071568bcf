// et_test::scale_add.out (out = x * alpha + y, float32): a custom operator's kernel in a library of
// its own, registered through the runtime's public operator registry like any user kernel.
#include <executorch/runtime/core/operator_registry.h>

#include <cstdint>

namespace {

using executorch::runtime::EValue;
using executorch::runtime::KernelRuntimeContext;
using executorch::runtime::ScalarType;
using executorch::runtime::Span;
using executorch::runtime::Tensor;

// args: x, y, alpha, out (the out argument), then the returned value (the same tensor)
void scale_add_out(KernelRuntimeContext& ctx, Span<EValue*> args) {
  ET_KERNEL_CHECK(ctx, args.size() == 5, InvalidProgram);
  ET_KERNEL_CHECK(ctx, args[0]->isTensor() && args[1]->isTensor() && args[2]->isDouble() && args[3]->isTensor(),
                  InvalidArgument);
  Tensor x = args[0]->toTensor();
  Tensor y = args[1]->toTensor();
  Tensor out = args[3]->toTensor();
  ET_KERNEL_CHECK(ctx,
                  x.scalar_type() == ScalarType::Float && y.scalar_type() == ScalarType::Float &&
                      out.scalar_type() == ScalarType::Float,
                  InvalidType);
  ET_KERNEL_CHECK(ctx, x.numel() == y.numel() && x.numel() == out.numel(), InvalidArgument);
  const float alpha = static_cast<float>(args[2]->toDouble());
  const float* a = x.const_data_ptr<float>();
  const float* b = y.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < out.numel(); ++i) o[i] = a[i] * alpha + b[i];
}

ET_REGISTER_KERNEL("et_test::scale_add.out", scale_add_out);

}  // namespace
