// aten::convolution.out for 1-D and 2-D float32 NCHW convolutions, forward and transposed (16-bit floats widened);
// 2-D ones with constant weights run the channels-last kernels over weights packed at load. Also
// convolution_backward.out, the gradients of a forward convolution.
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/conv.h"
#include "kernels/cpu/conv_nhwc.h"
#include "kernels/cpu/parallel.h"
#include "kernels/portable/load_passes.h"
#include "kernels/portable/util/kernel_util.h"
#include "kernels/portable/util/load_pass_util.h"
#include "kernels/portable/util/widen.h"

namespace executorch {
namespace kernels {
namespace {

// A per-spatial-dimension list argument: one value for all dims, or one per dim.
bool spatial_param(Span<const int64_t> list, size_t spatial, size_t i, int64_t fallback, int64_t* out) {
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
                  args_ok(args, {Tag::Tensor, Tag::Tensor, Tag::None, Tag::ListInt, Tag::ListInt, Tag::ListInt,
                                 Tag::Bool, Tag::ListInt, Tag::Int, Tag::Tensor}),
                  InvalidArgument);
  const Tensor in = args[0]->toTensor(), weight = args[1]->toTensor(), out = args[9]->toTensor();
  const std::optional<Tensor> bias = args[2]->toOptionalTensor();
  const bool transposed = args[6]->toBool();
  const int64_t groups = args[8]->toInt();
  ET_KERNEL_CHECK_MSG(ctx,
                      in.scalar_type() == ScalarType::Float && weight.scalar_type() == ScalarType::Float &&
                          out.scalar_type() == ScalarType::Float && (!bias || bias->scalar_type() == ScalarType::Float),
                      InvalidType, , "convolution: only float32 is supported");
  ET_KERNEL_CHECK_MSG(ctx, (in.dim() == 3 || in.dim() == 4) && weight.dim() == in.dim(), NotSupported, ,
                      "convolution: only 1-D and 2-D convolutions (rank %zd)", in.dim());
  ET_KERNEL_CHECK_MSG(ctx, in.is_contiguous() && weight.is_contiguous() && out.is_contiguous(), NotSupported, ,
                      "convolution: only contiguous (NCHW) tensors");
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
  const Span<const int64_t> lists[4] = {args[3]->toIntList(), args[4]->toIntList(), args[5]->toIntList(),
                                        args[7]->toIntList()};
  const int64_t fallback[4] = {1, 0, 1, 0};
  for (int k = 0; k < 4; ++k)
    for (size_t i = 0; i < spatial; ++i)
      ET_KERNEL_CHECK_MSG(ctx, spatial_param(lists[k], spatial, i, fallback[k], &p[k][i]), InvalidArgument, ,
                          "convolution: bad stride/padding/dilation list");
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
                          s.dilation_w > 0 && s.pad_h >= 0 && s.pad_w >= 0 && s.in_channels % groups == 0,
                      InvalidArgument, , "convolution: invalid groups/stride/padding/dilation");
  int64_t out_sizes[4] = {s.batch, 0, 0, 0};
  if (!transposed) {
    s.out_channels = weight.size(0);
    ET_KERNEL_CHECK_MSG(ctx, s.out_channels % groups == 0 && weight.size(1) * groups == s.in_channels, InvalidArgument,
                        , "convolution: weight does not match input channels");
    ET_KERNEL_CHECK_MSG(ctx, s.out_h() > 0 && s.out_w() > 0, InvalidArgument, ,
                        "convolution: input smaller than the (dilated) kernel");
    out_sizes[1] = s.out_channels;
    out_sizes[2] = is1d ? s.out_w() : s.out_h();
    out_sizes[3] = s.out_w();
  } else {
    ET_KERNEL_CHECK_MSG(ctx, weight.size(0) == s.in_channels, InvalidArgument, ,
                        "convolution: transposed weight must be [C_in, C_out / groups, ...]");
    s.out_channels = weight.size(1) * groups;
    const int64_t oh =
        is1d ? 1 : (s.in_h - 1) * s.stride_h - 2 * s.pad_h + s.dilation_h * (s.kernel_h - 1) + p[3][hi] + 1;
    const int64_t ow = (s.in_w - 1) * s.stride_w - 2 * s.pad_w + s.dilation_w * (s.kernel_w - 1) + p[3][wi] + 1;
    ET_KERNEL_CHECK_MSG(ctx, oh > 0 && ow > 0, InvalidArgument, , "convolution: transposed output would be empty");
    out_sizes[1] = s.out_channels;
    out_sizes[2] = is1d ? ow : oh;
    out_sizes[3] = ow;
  }
  ET_KERNEL_CHECK_MSG(ctx, !bias || bias->numel() == s.out_channels, InvalidArgument, ,
                      "convolution: bias must have one value per output channel");
  if (!resize_out(ctx, out, {out_sizes, static_cast<size_t>(in.dim())})) return;
  const float* b = bias ? bias->const_data_ptr<float>() : nullptr;
  if (transposed) {
    cpu::conv_transpose2d(s, is1d ? 1 : out_sizes[2], out_sizes[in.dim() - 1], in.const_data_ptr<float>(),
                          weight.const_data_ptr<float>(), b, out.mutable_data_ptr<float>());
    return;
  }
  // Scratch from the temp allocator; without it the direct algorithms run (slower, no memory).
  float* workspace = nullptr;
  const size_t floats = cpu::conv2d_workspace_floats(s);
  if (floats > 0) {
    auto mem = ctx.allocate_temp(floats * sizeof(float), 64);
    if (mem.ok()) workspace = static_cast<float*>(*mem);
  }
  cpu::conv2d(s, in.const_data_ptr<float>(), weight.const_data_ptr<float>(), b, out.mutable_data_ptr<float>(),
              workspace);
}

// convolution_backward.out(grad_output, input, weight, bias_sizes?, stride, padding, dilation,
// transposed, output_padding, groups, output_mask, *, out0, out1, out2): the gradients of a forward
// 1-D or 2-D convolution with respect to its input, weight and bias (each computed when its
// output_mask entry is set). Every output gradient element is spread over the input and weight
// elements its window touched.
void convolution_backward_out(KernelRuntimeContext& ctx, Args args) {
  if (has_half_tensor(args, 14)) return call_widened(ctx, args, 14, 3, convolution_backward_out);
  ET_KERNEL_CHECK(
      ctx,
      args_ok(args, {Tag::Tensor, Tag::Tensor, Tag::Tensor, Tag::None, Tag::ListInt, Tag::ListInt, Tag::ListInt,
                     Tag::Bool, Tag::ListInt, Tag::Int, Tag::ListBool, Tag::Tensor, Tag::Tensor, Tag::Tensor}),
      InvalidArgument);
  const Tensor grad = args[0]->toTensor(), in = args[1]->toTensor(), weight = args[2]->toTensor();
  const Tensor gin = args[11]->toTensor(), gw = args[12]->toTensor(), gb = args[13]->toTensor();
  const Span<const bool> mask = args[10]->toBoolList();
  const int64_t groups = args[9]->toInt();
  ET_KERNEL_CHECK_MSG(ctx, !args[7]->toBool(), NotSupported, ,
                      "convolution_backward: transposed convolutions are not supported");
  ET_KERNEL_CHECK_MSG(ctx, mask.size() == 3, InvalidArgument, , "convolution_backward: output_mask needs 3 entries");
  for (const Tensor* t : {&grad, &in, &weight})
    ET_KERNEL_CHECK_MSG(ctx, t->scalar_type() == ScalarType::Float && t->is_contiguous(), InvalidType, ,
                        "convolution_backward: only contiguous float32 tensors");
  ET_KERNEL_CHECK_MSG(ctx, (in.dim() == 3 || in.dim() == 4) && weight.dim() == in.dim() && grad.dim() == in.dim(),
                      NotSupported, , "convolution_backward: only 1-D and 2-D convolutions");
  const size_t spatial = static_cast<size_t>(in.dim() - 2);
  const bool is1d = spatial == 1;
  int64_t p[3][2] = {};  // stride, padding, dilation per spatial dim
  const Span<const int64_t> lists[3] = {args[4]->toIntList(), args[5]->toIntList(), args[6]->toIntList()};
  const int64_t fallback[3] = {1, 0, 1};
  constexpr int64_t kMaxParam = int64_t(1) << 24;
  for (int k = 0; k < 3; ++k)
    for (size_t i = 0; i < spatial; ++i)
      ET_KERNEL_CHECK_MSG(ctx,
                          spatial_param(lists[k], spatial, i, fallback[k], &p[k][i]) && p[k][i] <= kMaxParam &&
                              p[k][i] >= (k == 1 ? 0 : 1),
                          InvalidArgument, , "convolution_backward: bad stride/padding/dilation list");
  const int64_t n = in.size(0), cin = in.size(1), cout = weight.size(0);
  const int64_t h = is1d ? 1 : in.size(2), w = in.size(-1);
  const int64_t kh = is1d ? 1 : weight.size(2), kw = weight.size(-1);
  const int64_t sh = is1d ? 1 : p[0][0], sw = p[0][spatial - 1], ph = is1d ? 0 : p[1][0], pw = p[1][spatial - 1];
  const int64_t dh = is1d ? 1 : p[2][0], dw = p[2][spatial - 1];
  ET_KERNEL_CHECK_MSG(
      ctx,
      groups > 0 && groups <= kMaxParam && cin % groups == 0 && cout % groups == 0 && weight.size(1) * groups == cin,
      InvalidArgument, , "convolution_backward: weight and groups do not match the input channels");
  const int64_t oh = (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1, ow = (w + 2 * pw - dw * (kw - 1) - 1) / sw + 1;
  ET_KERNEL_CHECK_MSG(ctx,
                      grad.size(0) == n && grad.size(1) == cout && (is1d || grad.size(2) == oh) &&
                          grad.size(-1) == ow && oh > 0 && ow > 0,
                      InvalidArgument, , "convolution_backward: grad_output does not have the convolution's shape");
  const Tensor* outs[3] = {&gin, &gw, &gb};
  for (int k = 0; k < 3; ++k)
    ET_KERNEL_CHECK_MSG(ctx, !mask[k] || outs[k]->scalar_type() == ScalarType::Float, InvalidType, ,
                        "convolution_backward: gradients are float32");
  if (mask[0] && !resize_out(ctx, gin, in)) return;
  if (mask[1] && !resize_out(ctx, gw, weight)) return;
  if (mask[2] && !resize_out(ctx, gb, {&cout, 1})) return;
  for (int k = 0; k < 3; ++k)
    ET_KERNEL_CHECK_MSG(ctx, !mask[k] || outs[k]->is_contiguous(), NotSupported, ,
                        "convolution_backward: gradients must be contiguous");
  const float* g = grad.const_data_ptr<float>();
  const float* x = in.const_data_ptr<float>();
  const float* wt = weight.const_data_ptr<float>();
  float* dx = mask[0] ? gin.mutable_data_ptr<float>() : nullptr;
  float* dw_ = mask[1] ? gw.mutable_data_ptr<float>() : nullptr;
  float* db = mask[2] ? gb.mutable_data_ptr<float>() : nullptr;
  if (dx) std::memset(dx, 0, static_cast<size_t>(gin.numel()) * sizeof(float));
  if (dw_) std::memset(dw_, 0, static_cast<size_t>(gw.numel()) * sizeof(float));
  const int64_t cin_g = cin / groups, cout_g = cout / groups;
  for (int64_t co = 0; co < cout; ++co) {
    const int64_t c0 = (co / cout_g) * cin_g;  // the group's first input channel
    double bias_sum = 0;
    for (int64_t b = 0; b < n; ++b) {
      const float* gp = g + (b * cout + co) * oh * ow;
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xo = 0; xo < ow; ++xo) {
          const float go = gp[y * ow + xo];
          bias_sum += go;
          for (int64_t ci = 0; ci < cin_g; ++ci) {
            const int64_t plane = (b * cin + c0 + ci) * h * w;
            const int64_t wbase = (co * cin_g + ci) * kh * kw;
            for (int64_t i = 0; i < kh; ++i) {
              const int64_t iy = y * sh - ph + i * dh;
              if (iy < 0 || iy >= h) continue;
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t ix = xo * sw - pw + j * dw;
                if (ix < 0 || ix >= w) continue;
                if (dx) dx[plane + iy * w + ix] += go * wt[wbase + i * kw + j];
                if (dw_) dw_[wbase + i * kw + j] += go * x[plane + iy * w + ix];
              }
            }
          }
        }
    }
    if (db) db[co] = static_cast<float>(bias_sum);
  }
}

// What pack_convolutions() prepares for one call site.
struct PackedConv {
  cpu::ConvNhwc geometry;
  const void* packed;
  float out_min, out_max;  // a following ReLU/hardtanh/clamp folded into the call
  bool output_over_input;  // the output tensor may share memory with the input: write via temp
};

// convolution.out over weights pack_convolutions() packed: NHWC tensors are read and written in
// place; NCHW ones, and an output sharing memory with the input, go through temp memory (the
// load pass checked there is enough).
void convolution_packed_out(KernelRuntimeContext& ctx, Args args) {
  const auto* pc = static_cast<const PackedConv*>(ctx.call_state());
  const Tensor in = args[0]->toTensor(), out = args[9]->toTensor();
  const cpu::ConvNhwc& g = pc->geometry;
  ET_KERNEL_CHECK_MSG(ctx,
                      in.scalar_type() == ScalarType::Float && in.dim() == 4 && in.size(1) == g.in_channels() &&
                          (in.is_contiguous() || channels_last(in)) && (out.is_contiguous() || channels_last(out)),
                      InvalidArgument, , "convolution: input does not match the packed weights");
  const int64_t n = in.size(0), h = in.size(2), w = in.size(3), oh = g.out_h(h), ow = g.out_w(w);
  ET_KERNEL_CHECK_MSG(ctx, oh > 0 && ow > 0, InvalidArgument, , "convolution: input smaller than the (dilated) kernel");
  const int64_t sizes[4] = {n, g.out_channels(), oh, ow};
  if (!resize_out(ctx, out, {sizes, 4})) return;
  const float* x = in.const_data_ptr<float>();
  float* y = out.mutable_data_ptr<float>();
  float* x_nhwc = nullptr;
  float* y_nhwc = nullptr;
  if (!channels_last(in)) {
    auto mem = ctx.allocate_temp(in.nbytes(), 64);
    ET_KERNEL_CHECK_MSG(ctx, mem.ok(), MemoryAllocationFailed, ,
                        "convolution: no temp memory for its input (%zu bytes)", in.nbytes());
    x_nhwc = static_cast<float*>(*mem);
    transpose_planes(x, x_nhwc, n, g.in_channels(), h * w);
    x = x_nhwc;
  }
  if (!channels_last(out) || pc->output_over_input) {
    auto mem = ctx.allocate_temp(out.nbytes(), 64);
    ET_KERNEL_CHECK_MSG(ctx, mem.ok(), MemoryAllocationFailed, ,
                        "convolution: no temp memory for its output (%zu bytes)", out.nbytes());
    y_nhwc = static_cast<float*>(*mem);
  }
  ET_KERNEL_CHECK_MSG(ctx,
                      cpu::conv2d_nhwc_f32(g, pc->packed, n, h, w, x, y_nhwc ? y_nhwc : y, pc->out_min, pc->out_max),
                      InvalidArgument, , "convolution: the packed kernel refused the shapes");
  if (y_nhwc != nullptr && channels_last(out))
    std::memcpy(y, y_nhwc, out.nbytes());
  else if (y_nhwc != nullptr)
    transpose_planes(y_nhwc, y, n, oh * ow, g.out_channels());
}

// The instruction after `pc` (frees aside) when it is the only other one naming pc's result;
// else 0. Writing a later instruction's output at `pc` is safe only with nothing in between: an
// instruction there could own that memory under the memory plan.
size_t sole_reader(runtime::MethodRewriter& m, size_t pc) {
  const Args a = m.args(pc);
  size_t pcs[3];
  if (a[10] != a[9] || m.aliased(a[9]) || m.uses(a[9], pcs, 3) != 2 || pcs[0] != pc) return 0;
  for (size_t k = pc + 1; k < pcs[1]; ++k)
    if (!m.does_nothing(k)) return 0;
  return pcs[1];
}

// Whether `out` may take convolution `pc`'s result in place of its own output (same shape and
// dtype). When its memory meets the input's, `state` learns that the result must go through
// temp memory: the memory plan may give a tensor first written one instruction later the memory
// of one read for the last time here.
bool can_write(runtime::MethodRewriter& m, size_t pc, const EValue* out, PackedConv* state) {
  const Args a = m.args(pc);
  if (!out->isTensor() || m.is_constant(out)) return false;
  const Tensor in = a[0]->toTensor(), conv = a[9]->toTensor(), t = out->toTensor();
  if (t.scalar_type() != ScalarType::Float || !same_shape(t, conv) || t.const_data_ptr() == nullptr ||
      t.shape_dynamism() != conv.shape_dynamism())
    return false;
  if (in.const_data_ptr() == nullptr || overlap(in.const_data_ptr(), in.nbytes(), t.const_data_ptr(), t.nbytes()))
    state->output_over_input = true;
  return true;
}

// A ReLU/hardtanh/clamp right after convolution `pc` and its only reader: the convolution clamps
// and writes the activation's output itself, and the activation's instruction goes.
bool fold_activation(runtime::MethodRewriter& m, size_t pc, PackedConv* state) {
  const Args a = m.args(pc);
  const size_t next = sole_reader(m, pc);
  if (next == 0) return false;
  const runtime::OpFunction op = m.kernel(next);
  const Args b = m.args(next);
  if (op == nullptr || b.size() < 2 || b[0] != a[9] || b[b.size() - 1] != b[b.size() - 2] ||
      !b[b.size() - 1]->isTensor())
    return false;
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  if (op == runtime::get_op_function("aten::relu", "out") && b.size() == 3) {
    lo = 0.f;
  } else if (op == runtime::get_op_function("aten::hardtanh", "out") && b.size() == 5) {
    if (!constant_scalar(m, b[1], &lo) || !constant_scalar(m, b[2], &hi)) return false;
  } else if (op == runtime::get_op_function("aten::clamp", "out") && b.size() == 5) {
    if ((!b[1]->isNone() && !constant_scalar(m, b[1], &lo)) || (!b[2]->isNone() && !constant_scalar(m, b[2], &hi)))
      return false;
  } else {
    return false;
  }
  if (!(lo <= hi) || !can_write(m, pc, b[b.size() - 1], state)) return false;
  state->out_min = lo;
  state->out_max = hi;
  a[9] = a[10] = b[b.size() - 1];
  m.remove(next);
  return true;
}

// An inference batch norm right after convolution `pc` and its only reader, with constant
// parameters: writes its per-channel scale and shift (y = conv * scale + shift) and returns its
// instruction, or 0.
size_t batch_norm_after(runtime::MethodRewriter& m, size_t pc, int64_t channels, float* scale, float* shift,
                        PackedConv* state) {
  static const runtime::OpFunction bn = runtime::get_op_function("aten::_native_batch_norm_legit_no_training", "out");
  const size_t next = sole_reader(m, pc);
  if (next == 0 || bn == nullptr || m.kernel(next) != bn) return 0;
  const Args b = m.args(next);
  if (b.size() != 11 || b[0] != m.args(pc)[9] || !b[6]->isDouble() || !m.is_constant(b[6])) return 0;
  const float* p[4] = {};  // weight, bias, mean, var
  for (int i = 0; i < 4; ++i) {
    if (b[1 + i]->isNone() && i < 2) continue;
    if (!b[1 + i]->isTensor() || !m.is_constant(b[1 + i])) return 0;
    const Tensor t = b[1 + i]->toTensor();
    if (t.scalar_type() != ScalarType::Float || t.numel() != channels) return 0;
    p[i] = t.const_data_ptr<float>();
  }
  // Its two statistics outputs must be read by nothing else.
  for (int i = 8; i <= 9; ++i) {
    size_t pcs[2];
    if (m.uses(b[i], pcs, 2) != 1) return 0;
  }
  if (!can_write(m, pc, b[7], state)) return 0;
  const float eps = static_cast<float>(b[6]->toDouble());
  for (int64_t c = 0; c < channels; ++c) {
    const float inv = 1.f / std::sqrt(p[3][c] + eps);
    scale[c] = p[0] ? p[0][c] * inv : inv;
    shift[c] = (p[1] ? p[1][c] : 0.f) - p[2][c] * scale[c];
  }
  return next;
}

}  // namespace

// Load pass: every 2-D float32 convolution with constant weights, bias and parameters gets its
// weights packed once for the channels-last kernels (conv_nhwc.h) and runs them. An inference
// batch norm right after it is folded into the packed weights and bias (conv * s + t, one
// rounding less than the two ops), then a ReLU/hardtanh/clamp into its output clamp.
size_t pack_convolutions(runtime::MethodRewriter& m, size_t* folded) {
  size_t packed_calls = 0;
  for (size_t pc = 0; pc < m.num_steps(); ++pc) {
    if (m.kernel(pc) != convolution_out) continue;
    const Args a = m.args(pc);
    if (a.size() != 11 || !a[0]->isTensor() || !a[1]->isTensor() || !a[9]->isTensor() || !a[6]->isBool() ||
        a[6]->toBool() || !a[8]->isInt())
      continue;
    const Tensor in = a[0]->toTensor(), weight = a[1]->toTensor(), out = a[9]->toTensor();
    if (in.dim() != 4 || weight.dim() != 4 || in.scalar_type() != ScalarType::Float ||
        weight.scalar_type() != ScalarType::Float || out.scalar_type() != ScalarType::Float ||
        !(weight.is_contiguous() || channels_last(weight)) || !m.is_constant(a[1]) || !m.is_constant(a[8]) ||
        !(a[2]->isNone() || (m.is_constant(a[2]) && a[2]->isTensor())))
      continue;
    const float* bias = nullptr;
    if (a[2]->isTensor()) {
      const Tensor b = a[2]->toTensor();
      if (b.scalar_type() != ScalarType::Float || b.numel() != weight.size(0)) continue;
      bias = b.const_data_ptr<float>();
    }
    cpu::ConvNhwc g;
    if (!conv_geometry(m, a, weight, in.size(1), &g)) continue;
    const cpu::Isa isa = cpu::best_float_isa();
    const size_t bytes = cpu::conv2d_nhwc_f32_packed_bytes(g, isa);
    auto* state = static_cast<PackedConv*>(m.allocate(sizeof(PackedConv), alignof(PackedConv)));
    void* packed = bytes > 0 && state != nullptr ? m.allocate(bytes, 64) : nullptr;
    if (packed == nullptr) continue;
    // Runs may need temp memory for the input and the output (NCHW, or the output over the input).
    m.free_temp();
    if (m.allocate_temp(bytes_of(in), 64) == nullptr || m.allocate_temp(bytes_of(out), 64) == nullptr) continue;
    // OIHW -> OHWI, times a following batch norm's scale; bias plus its shift.
    const int64_t oc = weight.size(0), taps = g.kernel_h * g.kernel_w, gin = g.group_in_channels;
    m.free_temp();
    auto* ohwi = static_cast<float*>(m.allocate_temp(static_cast<size_t>(weight.numel()) * sizeof(float), 64));
    auto* scale = static_cast<float*>(m.allocate_temp(static_cast<size_t>(oc) * sizeof(float), 64));
    auto* shift = static_cast<float*>(m.allocate_temp(static_cast<size_t>(oc) * sizeof(float), 64));
    if (ohwi == nullptr || scale == nullptr || shift == nullptr) continue;
    *state =
        PackedConv{g, packed, -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::infinity(), false};
    const size_t bn = batch_norm_after(m, pc, oc, scale, shift, state);
    const float* w = weight.const_data_ptr<float>();
    const bool hwi = channels_last(weight);  // already OHWI in memory
    for (int64_t o = 0; o < oc; ++o) {  // written in order; OIHW read with a stride of `taps`
      const float f = bn ? scale[o] : 1.f;
      float* dst = ohwi + o * taps * gin;
      const float* src = w + o * taps * gin;
      if (hwi || taps == 1)
        for (int64_t k = 0; k < taps * gin; ++k) dst[k] = src[k] * f;
      else
        for (int64_t t = 0; t < taps; ++t)
          for (int64_t i = 0; i < gin; ++i) dst[t * gin + i] = src[i * taps + t] * f;
      if (bn) shift[o] += bias ? bias[o] * scale[o] : 0.f;
    }
    if (!cpu::conv2d_nhwc_f32_pack(g, cpu::ConvWeights::kOhwi, ohwi, bn ? shift : bias, isa, packed)) continue;
    m.set_kernel(pc, convolution_packed_out, state);
    if (bn) {
      a[9] = a[10] = m.args(bn)[7];
      m.remove(bn);
      ++*folded;
    }
    ++packed_calls;
    if (fold_activation(m, pc, state)) ++*folded;
  }
  return packed_calls;
}

namespace {

// Elementwise ops whose every tensor argument has one shape: any dim order works if all share it
// (per-tensor quantize and dequantize included: an int8 program's activations pass through them).
bool layout_free(runtime::OpFunction op) {
  static const runtime::OpFunction ops[] = {
      runtime::get_op_function("aten::add", "out"),
      runtime::get_op_function("aten::relu", "out"),
      runtime::get_op_function("aten::hardtanh", "out"),
      runtime::get_op_function("aten::clamp", "out"),
      runtime::get_op_function("quantized_decomposed::quantize_per_tensor", "out"),
      runtime::get_op_function("quantized_decomposed::dequantize_per_tensor", "out")};
  for (runtime::OpFunction o : ops)
    if (o != nullptr && o == op) return true;
  return is_int8_elementwise_kernel(op);
}

bool is_packed_conv(runtime::MethodRewriter& m, size_t pc) {
  return m.kernel(pc) == convolution_packed_out || is_int8_conv_kernel(m.kernel(pc));
}

// Whether tensor `v` may become channels-last: a planned 4-D tensor whose every use is a packed
// convolution, float32 or int8 (as its input or output) or a layout-free op over tensors of its shape.
bool relabel_candidate(runtime::MethodRewriter& m, const EValue* v) {
  constexpr size_t kMaxUses = 16;
  if (!v->isTensor() || m.is_constant(v)) return false;
  const Tensor t = v->toTensor();
  if (t.dim() != 4 || !t.is_contiguous() || t.const_data_ptr() == nullptr || m.aliased(v)) return false;
  size_t pcs[kMaxUses];
  const size_t n = m.uses(v, pcs, kMaxUses);
  if (n == 0 || n > kMaxUses) return false;
  for (size_t u = 0; u < n; ++u) {
    const Args a = m.args(pcs[u]);
    if (is_packed_conv(m, pcs[u])) {
      if (a[1] == v || a[2] == v) return false;
      continue;
    }
    if (!layout_free(m.kernel(pcs[u]))) return false;
    for (EValue* x : a)
      if (x->isTensor() && !same_shape(x->toTensor(), t)) return false;
  }
  return true;
}

}  // namespace

// Load pass: tensors between packed convolutions (through adds and activations) become
// channels-last, so the convolutions read and write them in place instead of converting; a
// layout-free op's tensors change together or not at all.
size_t channels_last_conv_chains(runtime::MethodRewriter& m) {
  // `set` holds the tensors to change, `banned` those that must not: a tensor that cannot change
  // bans every tensor sharing a layout-free op with it, and a banned tensor never comes back, so
  // the loop ends.
  const size_t cap = 4 * m.num_steps() + 1;
  auto* set = static_cast<const EValue**>(m.allocate_temp(cap * sizeof(EValue*), alignof(EValue*)));
  auto* banned = static_cast<const EValue**>(m.allocate_temp(cap * sizeof(EValue*), alignof(EValue*)));
  if (set == nullptr || banned == nullptr) return 0;
  size_t n = 0, nb = 0;
  auto in = [](const EValue** list, size_t count, const EValue* v) {
    for (size_t i = 0; i < count; ++i)
      if (list[i] == v) return true;
    return false;
  };
  auto ban = [&](const EValue* v) {
    for (size_t i = 0; i < n; ++i)
      if (set[i] == v) set[i] = set[--n];
    if (nb < cap && !in(banned, nb, v)) banned[nb++] = v;
  };
  for (size_t pc = 0; pc < m.num_steps(); ++pc) {
    if (!is_packed_conv(m, pc)) continue;
    for (const EValue* v : {m.args(pc)[0], m.args(pc)[9]}) {
      if (in(set, n, v) || in(banned, nb, v)) continue;
      if (!relabel_candidate(m, v))
        ban(v);
      else if (n < cap)
        set[n++] = v;
    }
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t pc = 0; pc < m.num_steps(); ++pc) {
      if (!layout_free(m.kernel(pc))) continue;
      const Args a = m.args(pc);
      bool touches = false, all_ok = true;
      for (EValue* x : a) {
        if (!x->isTensor()) continue;
        touches = touches || in(set, n, x);
        all_ok = all_ok && !in(banned, nb, x) && relabel_candidate(m, x);
      }
      if (!touches) continue;
      for (EValue* x : a) {
        if (!x->isTensor() || in(banned, nb, x)) continue;
        if (!all_ok) {
          ban(x);
          changed = true;
        } else if (!in(set, n, x) && n < cap) {
          set[n++] = x;
          changed = true;
        }
      }
    }
  }
  for (size_t i = 0; i < n; ++i) {
    runtime::TensorImpl* t = set[i]->toTensor().unsafeGetTensorImpl();
    // The Method allocated these arrays; strides follow the new order on resize.
    auto* order = const_cast<runtime::DimOrderType*>(t->dim_order().data());
    order[0] = 0, order[1] = 2, order[2] = 3, order[3] = 1;
    t->resize(t->sizes());
  }
  return n;
}

// Registrations are generated from kernels/portable/functions.yaml (only the selected kernels).
#include "portable_registrations/op_convolution.inc"

}  // namespace kernels
}  // namespace executorch
