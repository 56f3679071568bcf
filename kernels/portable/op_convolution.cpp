// aten::convolution.out for 1-D and 2-D float32 NCHW convolutions, forward and transposed (16-bit floats widened).
#include "kernels/portable/cpu/conv.h"
#include "kernels/portable/util/kernel_util.h"
#include "kernels/portable/util/widen.h"

namespace executorch {
namespace kernels {
namespace {

// A per-spatial-dimension list argument: one value for all dims, or one per dim.
bool spatial_param(Span<const int64_t> list, size_t spatial, size_t i, int64_t fallback,
                   int64_t* out) {
  if (list.size() == 0) {
    *out = fallback;
    return true;
  }
  if (list.size() != 1 && list.size() != spatial) return false;
  *out = list[list.size() == 1 ? 0 : i];
  return true;
}

void convolution_out(KernelRuntimeContext& ctx, Args args) {
  if (has_half_tensor(args, 10)) return call_widened(ctx, args, 10, 1, convolution_out);
  ET_KERNEL_CHECK(ctx,
                  args_ok(args, {Tag::Tensor, Tag::Tensor, Tag::None, Tag::ListInt,
                                             Tag::ListInt, Tag::ListInt, Tag::Bool, Tag::ListInt,
                                             Tag::Int, Tag::Tensor}),
                  InvalidArgument);
  const Tensor in = args[0]->toTensor(), weight = args[1]->toTensor(), out = args[9]->toTensor();
  const std::optional<Tensor> bias = args[2]->toOptionalTensor();
  const bool transposed = args[6]->toBool();
  const int64_t groups = args[8]->toInt();
  ET_KERNEL_CHECK_MSG(ctx,
                      in.scalar_type() == ScalarType::Float &&
                          weight.scalar_type() == ScalarType::Float &&
                          out.scalar_type() == ScalarType::Float &&
                          (!bias || bias->scalar_type() == ScalarType::Float),
                      InvalidType, , "convolution: only float32 is supported");
  ET_KERNEL_CHECK_MSG(ctx, (in.dim() == 3 || in.dim() == 4) && weight.dim() == in.dim(),
                      NotSupported, , "convolution: only 1-D and 2-D convolutions (rank %zd)",
                      in.dim());
  ET_KERNEL_CHECK_MSG(ctx, in.is_contiguous() && weight.is_contiguous() && out.is_contiguous(),
                      NotSupported, , "convolution: only contiguous (NCHW) tensors");
  const size_t spatial = static_cast<size_t>(in.dim() - 2);
  const bool is1d = spatial == 1;
  cpu::Conv2dShape s{};
  s.batch = in.size(0);
  s.in_channels = in.size(1);
  s.in_h = is1d ? 1 : in.size(2);
  s.in_w = in.size(-1);
  s.kernel_h = is1d ? 1 : weight.size(2);
  s.kernel_w = weight.size(-1);
  s.groups = groups;
  int64_t p[4][2] = {};  // stride, padding, dilation, output_padding per spatial dim
  const Span<const int64_t> lists[4] = {args[3]->toIntList(), args[4]->toIntList(),
                                        args[5]->toIntList(), args[7]->toIntList()};
  const int64_t fallback[4] = {1, 0, 1, 0};
  for (int k = 0; k < 4; ++k)
    for (size_t i = 0; i < spatial; ++i)
      ET_KERNEL_CHECK_MSG(ctx, spatial_param(lists[k], spatial, i, fallback[k], &p[k][i]),
                          InvalidArgument, , "convolution: bad stride/padding/dilation list");
  const size_t hi = 0, wi = spatial - 1;
  s.stride_h = is1d ? 1 : p[0][hi];
  s.stride_w = p[0][wi];
  s.pad_h = is1d ? 0 : p[1][hi];
  s.pad_w = p[1][wi];
  s.dilation_h = is1d ? 1 : p[2][hi];
  s.dilation_w = p[2][wi];
  // Bounded so the size arithmetic below cannot overflow on a malformed program.
  constexpr int64_t kMaxParam = int64_t(1) << 24;
  for (int k = 0; k < 4; ++k)
    for (size_t i = 0; i < spatial; ++i)
      ET_KERNEL_CHECK_MSG(ctx, p[k][i] >= -kMaxParam && p[k][i] <= kMaxParam, InvalidArgument, ,
                          "convolution: stride/padding/dilation out of range");
  ET_KERNEL_CHECK_MSG(ctx,
                      groups > 0 && groups <= kMaxParam && s.stride_h > 0 && s.stride_w > 0 && s.dilation_h > 0 &&
                          s.dilation_w > 0 && s.pad_h >= 0 && s.pad_w >= 0 &&
                          s.in_channels % groups == 0,
                      InvalidArgument, , "convolution: invalid groups/stride/padding/dilation");
  int64_t out_sizes[4] = {s.batch, 0, 0, 0};
  if (!transposed) {
    s.out_channels = weight.size(0);
    ET_KERNEL_CHECK_MSG(ctx,
                        s.out_channels % groups == 0 &&
                            weight.size(1) * groups == s.in_channels,
                        InvalidArgument, , "convolution: weight does not match input channels");
    ET_KERNEL_CHECK_MSG(ctx, s.out_h() > 0 && s.out_w() > 0, InvalidArgument, ,
                        "convolution: input smaller than the (dilated) kernel");
    out_sizes[1] = s.out_channels;
    out_sizes[2] = is1d ? s.out_w() : s.out_h();
    out_sizes[3] = s.out_w();
  } else {
    ET_KERNEL_CHECK_MSG(ctx, weight.size(0) == s.in_channels, InvalidArgument, ,
                        "convolution: transposed weight must be [C_in, C_out / groups, ...]");
    s.out_channels = weight.size(1) * groups;
    const int64_t oh = is1d ? 1
                            : (s.in_h - 1) * s.stride_h - 2 * s.pad_h +
                                  s.dilation_h * (s.kernel_h - 1) + p[3][hi] + 1;
    const int64_t ow = (s.in_w - 1) * s.stride_w - 2 * s.pad_w + s.dilation_w * (s.kernel_w - 1) +
                       p[3][wi] + 1;
    ET_KERNEL_CHECK_MSG(ctx, oh > 0 && ow > 0, InvalidArgument, ,
                        "convolution: transposed output would be empty");
    out_sizes[1] = s.out_channels;
    out_sizes[2] = is1d ? ow : oh;
    out_sizes[3] = ow;
  }
  ET_KERNEL_CHECK_MSG(ctx, !bias || bias->numel() == s.out_channels, InvalidArgument, ,
                      "convolution: bias must have one value per output channel");
  if (!resize_out(ctx, out, {out_sizes, static_cast<size_t>(in.dim())})) return;
  const float* b = bias ? bias->const_data_ptr<float>() : nullptr;
  if (transposed) {
    cpu::conv_transpose2d(s, is1d ? 1 : out_sizes[2], out_sizes[in.dim() - 1],
                          in.const_data_ptr<float>(), weight.const_data_ptr<float>(), b,
                          out.mutable_data_ptr<float>());
    return;
  }
  // Scratch from the temp allocator; without it the direct algorithms run (slower, no memory).
  float* workspace = nullptr;
  const size_t floats = cpu::conv2d_workspace_floats(s);
  if (floats > 0) {
    auto mem = ctx.allocate_temp(floats * sizeof(float), 64);
    if (mem.ok()) workspace = static_cast<float*>(*mem);
  }
  cpu::conv2d(s, in.const_data_ptr<float>(), weight.const_data_ptr<float>(), b,
              out.mutable_data_ptr<float>(), workspace);
}

}  // namespace

// Registrations are generated from kernels/portable/functions.yaml (only the selected kernels).
#include "portable_registrations/op_convolution.inc"

}  // namespace kernels
}  // namespace executorch
