// _softmax.out and _log_softmax.out along one dim of a float32 tensor (16-bit floats widened).
#include "kernels/cpu/softmax.h"
#include "kernels/portable/util/kernel_util.h"
#include "kernels/portable/util/widen.h"

namespace executorch {
namespace kernels {
namespace {

void softmax_out(KernelRuntimeContext& ctx, Args args);
void log_softmax_out(KernelRuntimeContext& ctx, Args args);

// (self, int dim, bool half_to_float, *, out)
void softmax_kernel(KernelRuntimeContext& ctx, Args args, bool log) {
  if (has_half_tensor(args, 4)) return call_widened(ctx, args, 4, 1, log ? log_softmax_out : softmax_out);
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Int, Tag::Bool, Tag::Tensor}), InvalidArgument);
  const Tensor in = args[0]->toTensor(), out = args[3]->toTensor();
  ET_KERNEL_CHECK_MSG(ctx, in.scalar_type() == ScalarType::Float && out.scalar_type() == ScalarType::Float, InvalidType,
                      , "softmax: only float32");
  ET_KERNEL_CHECK_MSG(ctx, in.is_contiguous(), NotSupported, , "softmax: input must be contiguous");
  int64_t dim;
  ET_KERNEL_CHECK_MSG(ctx, normalize_dim(args[1]->toInt(), in.dim(), &dim), InvalidArgument, ,
                      "softmax: dim out of range");
  if (!resize_out(ctx, out, in)) return;
  ET_KERNEL_CHECK_MSG(ctx, out.is_contiguous(), NotSupported, , "softmax: output must be contiguous");
  int64_t outer = 1, inner = 1;
  const int64_t n = in.dim() == 0 ? 1 : in.size(dim);
  for (int64_t d = 0; d < dim; ++d) outer *= in.size(d);
  for (int64_t d = dim + 1; d < in.dim(); ++d) inner *= in.size(d);
  cpu::softmax(in.const_data_ptr<float>(), out.mutable_data_ptr<float>(), outer, n, inner, log);
}

void softmax_out(KernelRuntimeContext& ctx, Args args) { softmax_kernel(ctx, args, false); }
void log_softmax_out(KernelRuntimeContext& ctx, Args args) { softmax_kernel(ctx, args, true); }

}  // namespace

// Registrations are generated from kernels/portable/functions.yaml (only the selected kernels).
#include "portable_registrations/op_softmax.inc"

}  // namespace kernels
}  // namespace executorch
