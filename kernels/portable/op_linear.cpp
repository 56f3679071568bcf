// Matrix products on float32: aten::mm.out, aten::bmm.out, aten::addmm.out.
#include "kernels/portable/cpu/gemm.h"
#include "kernels/portable/util/copy.h"
#include "kernels/portable/util/kernel_util.h"

namespace executorch {
namespace kernels {
namespace {

// Packing scratch for one m x n x k product, or null (sgemm then runs unpacked).
float* gemm_workspace(KernelRuntimeContext& ctx, int64_t m, int64_t n, int64_t k) {
  auto mem = ctx.allocate_temp(cpu::sgemm_workspace_floats(m, n, k) * sizeof(float), 64);
  return mem.ok() ? static_cast<float*>(*mem) : nullptr;
}

// The last two dims of `t` as a matrix (strides honour any dim order), batch `b` in.
cpu::ConstMatrix matrix_of(const Tensor& t, int64_t b) {
  const int64_t d = t.dim();
  const float* base = t.const_data_ptr<float>() + (d == 3 ? b * t.stride(0) : 0);
  return {base, t.stride(d - 2), t.stride(d - 1)};
}

bool all_float(const Tensor& a, const Tensor& b, const Tensor& c) {
  return a.scalar_type() == ScalarType::Float && b.scalar_type() == ScalarType::Float &&
         c.scalar_type() == ScalarType::Float;
}

void mm_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Tensor, Tag::Tensor}),
                  InvalidArgument);
  const Tensor a = args[0]->toTensor(), b = args[1]->toTensor(), out = args[2]->toTensor();
  ET_KERNEL_CHECK_MSG(ctx, all_float(a, b, out), InvalidType, , "mm: only float32");
  ET_KERNEL_CHECK_MSG(ctx, a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0),
                      InvalidArgument, , "mm: needs [m, k] x [k, n]");
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  const int64_t sizes[2] = {m, n};
  if (!resize_out(ctx, out, {sizes, 2})) return;
  ET_KERNEL_CHECK_MSG(ctx, out.is_contiguous(), NotSupported, , "mm: output must be contiguous");
  cpu::sgemm(m, n, k, 1.f, matrix_of(a, 0), matrix_of(b, 0), 0.f, nullptr,
             out.mutable_data_ptr<float>(), n, gemm_workspace(ctx, m, n, k));
}

void bmm_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Tensor, Tag::Tensor}),
                  InvalidArgument);
  const Tensor a = args[0]->toTensor(), b = args[1]->toTensor(), out = args[2]->toTensor();
  ET_KERNEL_CHECK_MSG(ctx, all_float(a, b, out), InvalidType, , "bmm: only float32");
  ET_KERNEL_CHECK_MSG(ctx,
                      a.dim() == 3 && b.dim() == 3 && a.size(0) == b.size(0) &&
                          a.size(2) == b.size(1),
                      InvalidArgument, , "bmm: needs [b, m, k] x [b, k, n]");
  const int64_t batch = a.size(0), m = a.size(1), k = a.size(2), n = b.size(2);
  const int64_t sizes[3] = {batch, m, n};
  if (!resize_out(ctx, out, {sizes, 3})) return;
  ET_KERNEL_CHECK_MSG(ctx, out.is_contiguous(), NotSupported, , "bmm: output must be contiguous");
  float* ws = gemm_workspace(ctx, m, n, k);
  float* o = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < batch; ++i)
    cpu::sgemm(m, n, k, 1.f, matrix_of(a, i), matrix_of(b, i), 0.f, nullptr, o + i * m * n, n, ws);
}

// out = beta * self + alpha * (mat1 @ mat2), self broadcast to [m, n].
void addmm_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx,
                  args_ok(args, {Tag::Tensor, Tag::Tensor, Tag::Tensor,
                                             Tag::ListScalar, Tag::ListScalar, Tag::Tensor}),
                  InvalidArgument);
  const Tensor self = args[0]->toTensor(), a = args[1]->toTensor(), b = args[2]->toTensor();
  const Tensor out = args[5]->toTensor();
  const float beta = static_cast<float>(args[3]->toScalarDouble());
  const float alpha = static_cast<float>(args[4]->toScalarDouble());
  ET_KERNEL_CHECK_MSG(ctx, all_float(a, b, out) && self.scalar_type() == ScalarType::Float,
                      InvalidType, , "addmm: only float32");
  ET_KERNEL_CHECK_MSG(ctx, a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0),
                      InvalidArgument, , "addmm: needs [m, k] x [k, n]");
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  ET_KERNEL_CHECK_MSG(ctx,
                      self.dim() <= 2 && (self.dim() < 1 || self.size(-1) == n || self.size(-1) == 1) &&
                          (self.dim() < 2 || self.size(0) == m || self.size(0) == 1),
                      InvalidArgument, , "addmm: self does not broadcast to [m, n]");
  const int64_t sizes[2] = {m, n};
  if (!resize_out(ctx, out, {sizes, 2})) return;
  ET_KERNEL_CHECK_MSG(ctx, out.is_contiguous(), NotSupported, , "addmm: output must be contiguous");
  float* o = out.mutable_data_ptr<float>();
  if (beta != 0.f) {
    // Strides of self over [m, n], zero along broadcast dims.
    const float* s = self.const_data_ptr<float>();
    const int64_t rs = self.dim() == 2 && self.size(0) == m && m > 1 ? self.stride(0) : 0;
    const int64_t cs = self.dim() >= 1 && self.size(-1) == n && n > 1 ? self.stride(-1) : 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) o[i * n + j] = beta * s[i * rs + j * cs];
  }
  cpu::sgemm(m, n, k, alpha, matrix_of(a, 0), matrix_of(b, 0), beta == 0.f ? 0.f : 1.f, nullptr, o,
             n, gemm_workspace(ctx, m, n, k));
}

}  // namespace

// Registrations are generated from kernels/portable/functions.yaml (only the selected kernels).
#include "portable_registrations/op_linear.inc"

}  // namespace kernels
}  // namespace executorch
