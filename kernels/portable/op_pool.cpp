// Pooling kernels on float32 NCHW (or CHW) tensors, 16-bit floats widened: max (with indices, and its
// gradient), average, adaptive average.
#include "kernels/cpu/pool.h"
#include "kernels/portable/util/kernel_util.h"
#include "kernels/portable/util/widen.h"

namespace executorch {
namespace kernels {
namespace {

// An int[2] argument given as one value or two; empty uses `fallback` (or `copy` when set).
bool pair_arg(Span<const int64_t> list, const int64_t* copy, int64_t fallback, int64_t out[2]) {
  if (list.size() == 0) {
    out[0] = copy ? copy[0] : fallback;
    out[1] = copy ? copy[1] : fallback;
    return true;
  }
  if (list.size() > 2) return false;
  out[0] = list[0];
  out[1] = list[list.size() - 1];
  return true;
}

// Fills the plane geometry of a [N, C, H, W] or [C, H, W] float input; false if unusable.
bool pool_input(KernelRuntimeContext& ctx, const Tensor& in, const Tensor& out, cpu::Pool2dShape* s) {
  ET_KERNEL_CHECK_MSG(ctx, in.scalar_type() == ScalarType::Float && out.scalar_type() == ScalarType::Float, InvalidType,
                      false, "pool2d: only float32");
  ET_KERNEL_CHECK_MSG(ctx, (in.dim() == 3 || in.dim() == 4) && in.is_contiguous() && out.is_contiguous(), NotSupported,
                      false, "pool2d: needs a contiguous 3-D or 4-D tensor");
  s->planes = in.size(-3) * (in.dim() == 4 ? in.size(0) : 1);
  s->in_h = in.size(-2);
  s->in_w = in.size(-1);
  return true;
}

bool resize_pool_out(KernelRuntimeContext& ctx, const Tensor& in, const Tensor& out, int64_t oh, int64_t ow) {
  int64_t sizes[4];
  const size_t n = sizes_of(in, sizes);
  sizes[n - 2] = oh;
  sizes[n - 1] = ow;
  return resize_out(ctx, out, {sizes, n});
}

// Reads kernel/stride/padding/dilation lists into `s` and computes the output size.
bool window_args(KernelRuntimeContext& ctx, const EValue& k, const EValue& st, const EValue& pad, const EValue* dil,
                 bool ceil_mode, cpu::Pool2dShape* s) {
  int64_t kk[2], ss[2], pp[2], dd[2] = {1, 1};
  const bool ok = pair_arg(k.toIntList(), nullptr, 0, kk) && pair_arg(st.toIntList(), kk, 1, ss) &&
                  pair_arg(pad.toIntList(), nullptr, 0, pp) && (!dil || pair_arg(dil->toIntList(), nullptr, 1, dd));
  constexpr int64_t kMaxParam = int64_t(1) << 24;  // keeps the size arithmetic from overflowing
  for (const int64_t* v : {kk, ss, pp, dd})
    ET_KERNEL_CHECK_MSG(ctx, !ok || (v[0] <= kMaxParam && v[1] <= kMaxParam), InvalidArgument, false,
                        "pool2d: window parameters out of range");
  ET_KERNEL_CHECK_MSG(ctx,
                      ok && kk[0] > 0 && kk[1] > 0 && ss[0] > 0 && ss[1] > 0 && pp[0] >= 0 && pp[1] >= 0 && dd[0] > 0 &&
                          dd[1] > 0 && pp[0] * 2 <= kk[0] && pp[1] * 2 <= kk[1],
                      InvalidArgument, false, "pool2d: invalid kernel/stride/padding/dilation");
  s->kernel_h = kk[0], s->kernel_w = kk[1], s->stride_h = ss[0], s->stride_w = ss[1];
  s->pad_h = pp[0], s->pad_w = pp[1], s->dilation_h = dd[0], s->dilation_w = dd[1];
  s->out_h = cpu::pool_output_size(s->in_h, kk[0], ss[0], pp[0], dd[0], ceil_mode);
  s->out_w = cpu::pool_output_size(s->in_w, kk[1], ss[1], pp[1], dd[1], ceil_mode);
  ET_KERNEL_CHECK_MSG(ctx, s->out_h > 0 && s->out_w > 0, InvalidArgument, false,
                      "pool2d: input smaller than the window");
  return true;
}

// max_pool2d_with_indices.out(self, kernel, stride, padding, dilation, ceil_mode, *, out, indices)
void max_pool2d_with_indices_out(KernelRuntimeContext& ctx, Args args) {
  if (has_half_tensor(args, 8)) return call_widened(ctx, args, 8, 2, max_pool2d_with_indices_out);
  ET_KERNEL_CHECK(ctx,
                  args_ok(args, {Tag::Tensor, Tag::ListInt, Tag::ListInt, Tag::ListInt, Tag::ListInt, Tag::Bool,
                                 Tag::Tensor, Tag::Tensor}),
                  InvalidArgument);
  const Tensor in = args[0]->toTensor(), out = args[6]->toTensor(), idx = args[7]->toTensor();
  cpu::Pool2dShape s{};
  if (!pool_input(ctx, in, out, &s) || !window_args(ctx, *args[1], *args[2], *args[3], args[4], args[5]->toBool(), &s))
    return;
  ET_KERNEL_CHECK_MSG(ctx, idx.scalar_type() == ScalarType::Long && idx.is_contiguous(), InvalidType, ,
                      "max_pool2d: indices must be contiguous int64");
  if (!resize_pool_out(ctx, in, out, s.out_h, s.out_w) || !resize_pool_out(ctx, in, idx, s.out_h, s.out_w)) return;
  cpu::max_pool2d(s, in.const_data_ptr<float>(), out.mutable_data_ptr<float>(), idx.mutable_data_ptr<int64_t>());
}

// avg_pool2d.out(self, kernel, stride, padding, ceil_mode, count_include_pad, divisor?, *, out)
void avg_pool2d_out(KernelRuntimeContext& ctx, Args args) {
  if (has_half_tensor(args, 8)) return call_widened(ctx, args, 8, 1, avg_pool2d_out);
  ET_KERNEL_CHECK(ctx,
                  args_ok(args, {Tag::Tensor, Tag::ListInt, Tag::ListInt, Tag::ListInt, Tag::Bool, Tag::Bool, Tag::None,
                                 Tag::Tensor}),
                  InvalidArgument);
  ET_KERNEL_CHECK(ctx, args[6]->isNone() || args[6]->isInt(), InvalidArgument);
  const Tensor in = args[0]->toTensor(), out = args[7]->toTensor();
  cpu::Pool2dShape s{};
  if (!pool_input(ctx, in, out, &s) || !window_args(ctx, *args[1], *args[2], *args[3], nullptr, args[4]->toBool(), &s))
    return;
  const int64_t divisor = args[6]->isInt() ? args[6]->toInt() : 0;
  ET_KERNEL_CHECK_MSG(ctx, args[6]->isNone() || divisor > 0, InvalidArgument, ,
                      "avg_pool2d: divisor_override must be positive");
  if (!resize_pool_out(ctx, in, out, s.out_h, s.out_w)) return;
  cpu::avg_pool2d(s, in.const_data_ptr<float>(), out.mutable_data_ptr<float>(), args[5]->toBool(), divisor);
}

// _adaptive_avg_pool2d.out(self, output_size, *, out)
void adaptive_avg_pool2d_out(KernelRuntimeContext& ctx, Args args) {
  if (has_half_tensor(args, 3)) return call_widened(ctx, args, 3, 1, adaptive_avg_pool2d_out);
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::ListInt, Tag::Tensor}), InvalidArgument);
  const Tensor in = args[0]->toTensor(), out = args[2]->toTensor();
  cpu::Pool2dShape s{};
  if (!pool_input(ctx, in, out, &s)) return;
  int64_t size[2];
  ET_KERNEL_CHECK_MSG(ctx, pair_arg(args[1]->toIntList(), nullptr, 0, size) && size[0] > 0 && size[1] > 0,
                      InvalidArgument, , "adaptive_avg_pool2d: output_size must be positive");
  if (!resize_pool_out(ctx, in, out, size[0], size[1])) return;
  cpu::adaptive_avg_pool2d(s.planes, s.in_h, s.in_w, size[0], size[1], in.const_data_ptr<float>(),
                           out.mutable_data_ptr<float>());
}

// max_pool2d_with_indices_backward.grad_input(grad_output, self, kernel, stride, padding, dilation,
// ceil_mode, indices, *, grad_input): each output gradient added to the input element its window's
// maximum came from (indices count within a plane, as max_pool2d_with_indices writes them).
void max_pool2d_backward_out(KernelRuntimeContext& ctx, Args args) {
  if (has_half_tensor(args, 9)) return call_widened(ctx, args, 9, 1, max_pool2d_backward_out);
  ET_KERNEL_CHECK(ctx,
                  args_ok(args, {Tag::Tensor, Tag::Tensor, Tag::ListInt, Tag::ListInt, Tag::ListInt, Tag::ListInt,
                                 Tag::Bool, Tag::Tensor, Tag::Tensor}),
                  InvalidArgument);
  const Tensor grad = args[0]->toTensor(), in = args[1]->toTensor(), idx = args[7]->toTensor(),
               out = args[8]->toTensor();
  cpu::Pool2dShape s{};
  if (!pool_input(ctx, in, out, &s) || !window_args(ctx, *args[2], *args[3], *args[4], args[5], args[6]->toBool(), &s))
    return;
  ET_KERNEL_CHECK_MSG(ctx, grad.scalar_type() == ScalarType::Float && grad.is_contiguous(), InvalidType, ,
                      "max_pool2d_backward: grad_output must be contiguous float32");
  ET_KERNEL_CHECK_MSG(ctx, idx.scalar_type() == ScalarType::Long && idx.is_contiguous(), InvalidType, ,
                      "max_pool2d_backward: indices must be contiguous int64");
  const int64_t per_plane = s.out_h * s.out_w;
  ET_KERNEL_CHECK_MSG(ctx,
                      grad.dim() == in.dim() && idx.dim() == in.dim() && grad.size(-2) == s.out_h &&
                          grad.size(-1) == s.out_w && grad.numel() == s.planes * per_plane && same_shape(grad, idx),
                      InvalidArgument, , "max_pool2d_backward: grad_output and indices must have the pooled shape");
  if (!resize_out(ctx, out, in)) return;
  const int64_t plane = s.in_h * s.in_w;
  const float* g = grad.const_data_ptr<float>();
  const int64_t* ix = idx.const_data_ptr<int64_t>();
  float* y = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < out.numel(); ++i) y[i] = 0.f;
  for (int64_t p = 0; p < s.planes; ++p) {
    for (int64_t k = 0; k < per_plane; ++k) {
      const int64_t at = ix[p * per_plane + k];
      ET_KERNEL_CHECK_MSG(ctx, at >= 0 && at < plane, InvalidArgument, ,
                          "max_pool2d_backward: index %lld is outside the %lld-element plane",
                          static_cast<long long>(at), static_cast<long long>(plane));
      y[p * plane + at] += g[p * per_plane + k];
    }
  }
}

}  // namespace

// Registrations are generated from kernels/portable/functions.yaml (only the selected kernels).
#include "portable_registrations/op_pool.inc"

}  // namespace kernels
}  // namespace executorch
