// Convolutions: Conv2d (NHWC, groups >= 1), DepthwiseConv2d (1HWO filters, channel multiplier >= 1)
// and ConvTranspose2d (OHWI filters). With packed weights (compile() packs them where the NHWC
// micro-kernels take the geometry) they run on kernels/cpu/conv_nhwc.h, in float or int8;
// otherwise on the generic loops here (im2col + GEMM, a depthwise loop over channels, a scatter).
#include <cinttypes>
#include <cstring>

#include "backends/xnnpack/runtime/ops/ops.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/quantized.h"

namespace executorch {
namespace backends {
namespace xnnpack {
namespace {

using kernels::cpu::ConstMatrix;
using kernels::cpu::parallel_for;

bool is_pointwise(const ConvParams& p) {
  return p.kernel_h == 1 && p.kernel_w == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_top == 0 &&
         p.pad_left == 0 && p.pad_bottom == 0 && p.pad_right == 0 && p.groups == 1;
}

int64_t transposed_out(int64_t in, int64_t pad_before, int64_t pad_after, int64_t kernel, int64_t dilation,
                       int64_t stride, int64_t adjustment) {
  const int64_t span = stride * (in - 1) + adjustment + dilation * (kernel - 1) + 1 - pad_before - pad_after;
  return in == 0 || span < 0 ? 0 : span;
}

// ---- kernels --------------------------------------------------------------------------------

// out[N, OH, OW, OC] = conv(in[N, H, W, groups * group_in], weights[OC, KH, KW, group_in]) + bias.
void conv_nhwc(const ConvParams& p, int64_t n, int64_t h, int64_t w, int64_t oh, int64_t ow, const float* in,
               const float* weights, const float* bias, float* out, float lo, float hi, float* scratch) {
  const int64_t c = p.groups * p.group_in, oc = p.groups * p.group_out;
  const int64_t rows = n * oh * ow, k = p.kernel_h * p.kernel_w * p.group_in;
  if (rows == 0) return;
  if (is_pointwise(p)) {
    gemm_rows(rows, oc, k, in, c, ConstMatrix{weights, 1, k}, out, oc, scratch);
    bias_clamp(out, rows, oc, oc, bias, lo, hi);
    return;
  }
  float* cols = scratch;
  float* gemm_ws = scratch + rows * k;
  for (int64_t g = 0; g < p.groups; ++g) {
    // One row per output pixel: the (kh, kw, channel) patch, zeros where it falls in the padding.
    parallel_for(0, rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(k, 1)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / (oh * ow), y = (r / ow) % oh, x = r % ow;
        float* dst = cols + r * k;
        for (int64_t ky = 0; ky < p.kernel_h; ++ky) {
          const int64_t iy = y * p.stride_h - p.pad_top + ky * p.dilation_h;
          for (int64_t kx = 0; kx < p.kernel_w; ++kx, dst += p.group_in) {
            const int64_t ix = x * p.stride_w - p.pad_left + kx * p.dilation_w;
            if (iy < 0 || iy >= h || ix < 0 || ix >= w) {
              std::memset(dst, 0, sizeof(float) * p.group_in);
            } else {
              std::memcpy(dst, in + ((b * h + iy) * w + ix) * c + g * p.group_in, sizeof(float) * p.group_in);
            }
          }
        }
      }
    });
    gemm_rows(rows, p.group_out, k, cols, k, ConstMatrix{weights + g * p.group_out * k, 1, k}, out + g * p.group_out,
              oc, gemm_ws);
  }
  bias_clamp(out, rows, oc, oc, bias, lo, hi);
}

// Depthwise: weights[KH, KW, OC] with OC = C * multiplier.
void depthwise_nhwc(const ConvParams& p, int64_t n, int64_t h, int64_t w, int64_t oh, int64_t ow, const float* in,
                    const float* weights, const float* bias, float* out, float lo, float hi) {
  const int64_t c = p.groups, mult = p.group_out, oc = c * mult;
  parallel_for(0, n * oh, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / oh, y = r % oh;
      for (int64_t x = 0; x < ow; ++x) {
        float* o = out + ((b * oh + y) * ow + x) * oc;
        if (bias) {
          std::memcpy(o, bias, sizeof(float) * oc);
        } else {
          std::memset(o, 0, sizeof(float) * oc);
        }
        for (int64_t ky = 0; ky < p.kernel_h; ++ky) {
          const int64_t iy = y * p.stride_h - p.pad_top + ky * p.dilation_h;
          if (iy < 0 || iy >= h) continue;
          for (int64_t kx = 0; kx < p.kernel_w; ++kx) {
            const int64_t ix = x * p.stride_w - p.pad_left + kx * p.dilation_w;
            if (ix < 0 || ix >= w) continue;
            const float* src = in + ((b * h + iy) * w + ix) * c;
            const float* wk = weights + (ky * p.kernel_w + kx) * oc;
            if (mult == 1) {
              for (int64_t ch = 0; ch < oc; ++ch) o[ch] += src[ch] * wk[ch];
            } else {
              for (int64_t ch = 0; ch < oc; ++ch) o[ch] += src[ch / mult] * wk[ch];
            }
          }
        }
        for (int64_t ch = 0; ch < oc; ++ch) o[ch] = clampf(o[ch], lo, hi);
      }
    }
  });
}

// out[N, OH, OW, OC] = transposed conv(in[N, H, W, groups * group_in], weights[OC, KH, KW, group_in]) + bias:
// each input pixel scatters its kernel-sized patch to stride-spaced output positions.
void conv_transpose_nhwc(const ConvParams& p, int64_t n, int64_t h, int64_t w, int64_t oh, int64_t ow, const float* in,
                         const float* weights, const float* bias, float* out, float lo, float hi) {
  const int64_t c = p.groups * p.group_in, oc = p.groups * p.group_out;
  for (int64_t px = 0; px < n * oh * ow; ++px) {
    for (int64_t o = 0; o < oc; ++o) out[px * oc + o] = bias ? bias[o] : 0.0f;
  }
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t iy = 0; iy < h; ++iy) {
      for (int64_t ix = 0; ix < w; ++ix) {
        const float* x = in + ((b * h + iy) * w + ix) * c;
        for (int64_t ky = 0; ky < p.kernel_h; ++ky) {
          const int64_t oy = iy * p.stride_h - p.pad_top + ky * p.dilation_h;
          if (oy < 0 || oy >= oh) continue;
          for (int64_t kx = 0; kx < p.kernel_w; ++kx) {
            const int64_t ox = ix * p.stride_w - p.pad_left + kx * p.dilation_w;
            if (ox < 0 || ox >= ow) continue;
            float* y = out + ((b * oh + oy) * ow + ox) * oc;
            for (int64_t g = 0; g < p.groups; ++g) {
              for (int64_t o = 0; o < p.group_out; ++o) {
                const int64_t oc_idx = g * p.group_out + o;
                const float* wk = weights + ((oc_idx * p.kernel_h + ky) * p.kernel_w + kx) * p.group_in;
                const float* xg = x + g * p.group_in;
                float acc = 0.0f;
                for (int64_t i = 0; i < p.group_in; ++i) acc += xg[i] * wk[i];
                y[oc_idx] += acc;
              }
            }
          }
        }
      }
    }
  }
  for (int64_t i = 0; i < n * oh * ow * oc; ++i) out[i] = std::min(std::max(out[i], lo), hi);
}

// ---- the node kinds -------------------------------------------------------------------------

Error check_channels(const Op& op, const Value& a, int64_t expected) {
  ET_CHECK_OR_RETURN(a.dims[3] == expected, InvalidProgram,
                     "XnnpackBackend: node %u (%s) expects %" PRId64 " input channels, got %" PRId64, op.node_index,
                     op.name, expected, a.dims[3]);
  return Error::Ok;
}

Error infer_conv(const Op& op, Plan& plan) {
  const Value& a = plan.values[op.in[0]];
  ET_TRY(check_nhwc(op, a));
  const int64_t in_c = op.kind == OpKind::kDepthwiseConv ? op.conv.groups : op.conv.groups * op.conv.group_in;
  ET_TRY(check_channels(op, a, in_c));
  return window_shape(op, plan, op.conv.groups * op.conv.group_out);
}

Error infer_conv_transpose(const Op& op, Plan& plan) {
  const Value& a = plan.values[op.in[0]];
  ET_TRY(check_nhwc(op, a));
  ET_TRY(check_channels(op, a, op.conv.groups * op.conv.group_in));
  const ConvParams& p = op.conv;
  const int64_t dims[4] = {
      a.dims[0], transposed_out(a.dims[1], p.pad_top, p.pad_bottom, p.kernel_h, p.dilation_h, p.stride_h, p.adj_h),
      transposed_out(a.dims[2], p.pad_left, p.pad_right, p.kernel_w, p.dilation_w, p.stride_w, p.adj_w),
      p.groups * p.group_out};
  return set_out(op, plan, 4, dims);
}

size_t conv_workspace(const Op& op, const Plan& plan) {
  if (op.packed != nullptr || op.kind != OpKind::kConv) return 0;
  const Value& a = plan.values[op.in[0]];
  const Value& out = plan.values[op.out];
  const int64_t rows = a.dims[0] * out.dims[1] * out.dims[2],
                k = op.conv.kernel_h * op.conv.kernel_w * op.conv.group_in;
  const size_t cols = is_pointwise(op.conv) ? 0 : static_cast<size_t>(rows * k);
  return cols + gemm_scratch(rows, op.conv.group_out, k);
}

Error run_conv(const Op& op, Plan& plan, const float* const* in, float* o, float* ws) {
  const Value& a = plan.values[op.in[0]];
  const Value& out = plan.values[op.out];
  const int64_t* d = a.dims;
  if (op.packed != nullptr) {
    ET_CHECK_OR_RETURN(kernels::cpu::conv2d_nhwc_f32(to_conv_nhwc(op.conv), op.packed, d[0], d[1], d[2], in[0], o,
                                                     op.out_min, op.out_max) ||
                           out.numel() == 0,
                       Internal, "XnnpackBackend: node %u (%s): the packed convolution refused its shapes",
                       op.node_index, op.name);
  } else if (op.kind == OpKind::kDepthwiseConv) {
    depthwise_nhwc(op.conv, d[0], d[1], d[2], out.dims[1], out.dims[2], in[0], op.weights, op.bias, o, op.out_min,
                   op.out_max);
  } else {
    conv_nhwc(op.conv, d[0], d[1], d[2], out.dims[1], out.dims[2], in[0], op.weights, op.bias, o, op.out_min,
              op.out_max, ws);
  }
  return Error::Ok;
}

Error run_conv_transpose(const Op& op, Plan& plan, const float* const* in, float* o, float*) {
  const Value& a = plan.values[op.in[0]];
  const Value& out = plan.values[op.out];
  conv_transpose_nhwc(op.conv, a.dims[0], a.dims[1], a.dims[2], out.dims[1], out.dims[2], in[0], op.weights, op.bias, o,
                      op.out_min, op.out_max);
  return Error::Ok;
}

// QS8 convolution on packed int8 weights, requantizing in the kernel.
Error run_conv_qs8(const Op& op, Plan& plan) {
  const Value& a = plan.values[op.in[0]];
  Value& out = plan.values[op.out];
  ET_CHECK_OR_RETURN(
      out.numel() == 0 || kernels::cpu::conv2d_nhwc_qs8(to_conv_nhwc(op.conv), op.packed, a.dims[0], a.dims[1],
                                                        a.dims[2], static_cast<const int8_t*>(a.data),
                                                        static_cast<int8_t*>(out.data), op.qmin, op.qmax),
      Internal, "XnnpackBackend: node %u (%s): the int8 kernel refused its shapes", op.node_index, op.name);
  return Error::Ok;
}

const OpImpl kConv = {false, infer_conv, conv_workspace, run_conv, nullptr, run_conv_qs8};
const OpImpl kConvTranspose = {false, infer_conv_transpose, nullptr, run_conv_transpose, nullptr, nullptr};

Error define(NodeContext& ctx, Op& op, const fb::_XNNNodeConv* c) {
  ET_CHECK_OR_RETURN((c->flags() & kFlagSamePadding) == 0, NotImplemented,
                     "XnnpackBackend: node %u (%s) asks for TensorFlow SAME padding, which is not supported",
                     op.node_index, op.name);
  ConvParams& p = op.conv;
  p.pad_top = c->padding_top(), p.pad_right = c->padding_right();
  p.pad_bottom = c->padding_bottom(), p.pad_left = c->padding_left();
  p.kernel_h = c->kernel_height(), p.kernel_w = c->kernel_width();
  p.stride_h = c->subsampling_height(), p.stride_w = c->subsampling_width();
  p.dilation_h = c->dilation_height(), p.dilation_w = c->dilation_width();
  p.groups = c->groups(), p.group_in = c->group_input_channels(), p.group_out = c->group_output_channels();
  ET_TRY(check_window(op, p));
  ET_CHECK_OR_RETURN(p.groups >= 1 && p.group_in >= 1 && p.group_out >= 1 && p.groups <= kMaxWindow &&
                         p.group_in <= kMaxWindow && p.group_out <= kMaxWindow,
                     InvalidProgram, "XnnpackBackend: node %u (%s) has invalid groups/channels", op.node_index,
                     op.name);
  ET_CHECK_OR_RETURN(op.kind != OpKind::kDepthwiseConv || p.group_in == 1, InvalidProgram,
                     "XnnpackBackend: node %u (%s): a depthwise convolution has one input channel per group",
                     op.node_index, op.name);
  if (op.kind == OpKind::kConvTranspose) {
    p.adj_h = c->adjustment_height(), p.adj_w = c->adjustment_width();
    ET_CHECK_OR_RETURN(p.adj_h < p.stride_h && p.adj_w < p.stride_w, InvalidProgram,
                       "XnnpackBackend: node %u (%s) has an output adjustment of at least its stride", op.node_index,
                       op.name);
  }
  ET_TRY(ctx.input(op, c->input1_id(), "input"));
  ET_TRY(ctx.output(op, c->output_id()));
  // XNNPACK defines a 1x1, unit-stride, unpadded, ungrouped convolution (more than two channels in and
  // out together) as a fully connected layer, which quantizes a dynamically quantized input per pixel
  // whatever the value says; its other convolutions read one scale per image.
  Value& x = ctx.value(op.in[0]);
  if (op.kind == OpKind::kConv && x.dtype == DType::kQD8 && is_pointwise(p) && p.group_in + p.group_out > 2) {
    x.nonbatch_dims = 1;
  }
  return ctx.weights(op, c->filter_id(), c->bias_id(), p.groups * p.group_out, p.kernel_h * p.kernel_w * p.group_in);
}

}  // namespace

bool define_conv(NodeContext& ctx, const fb::XNode* node, Op& op, Error* err) {
  using U = fb::XNodeUnion;
  switch (node->xnode_union_type()) {
    case U::XNNConv2d:
      op.kind = OpKind::kConv, op.impl = &kConv;
      *err = define(ctx, op, node->xnode_union_as_XNNConv2d());
      return true;
    case U::XNNDepthwiseConv2d:
      op.kind = OpKind::kDepthwiseConv, op.impl = &kConv;
      *err = define(ctx, op, node->xnode_union_as_XNNDepthwiseConv2d());
      return true;
    case U::XNNConvTranspose2d:
      op.kind = OpKind::kConvTranspose, op.impl = &kConvTranspose;
      *err = define(ctx, op, node->xnode_union_as_XNNConvTranspose2d());
      return true;
    default: return false;
  }
}

Error run_dw_pw(const Op& dw, const Op& pw, Plan& plan) {
  const Value& a = plan.values[dw.in[0]];
  Value& mid = plan.values[dw.out];
  Value& out = plan.values[pw.out];
  if (out.numel() == 0) return Error::Ok;
  namespace cpu = kernels::cpu;
  const bool ok = dw.compute == Compute::kFloat
                      ? cpu::conv2d_nhwc_f32_dw_pw(to_conv_nhwc(dw.conv), dw.packed, dw.out_min, dw.out_max,
                                                   to_conv_nhwc(pw.conv), pw.packed, a.dims[0], a.dims[1], a.dims[2],
                                                   static_cast<const float*>(a.data), static_cast<float*>(mid.data),
                                                   static_cast<float*>(out.data), pw.out_min, pw.out_max)
                      : cpu::conv2d_nhwc_qs8_dw_pw(to_conv_nhwc(dw.conv), dw.packed, dw.qmin, dw.qmax,
                                                   to_conv_nhwc(pw.conv), pw.packed, a.dims[0], a.dims[1], a.dims[2],
                                                   static_cast<const int8_t*>(a.data), static_cast<int8_t*>(mid.data),
                                                   static_cast<int8_t*>(out.data), pw.qmin, pw.qmax);
  ET_CHECK_OR_RETURN(ok, Internal,
                     "XnnpackBackend: nodes %u and %u (%s, %s): the packed convolutions refused their shapes",
                     dw.node_index, pw.node_index, dw.name, pw.name);
  return Error::Ok;
}

}  // namespace xnnpack
}  // namespace backends
}  // namespace executorch
