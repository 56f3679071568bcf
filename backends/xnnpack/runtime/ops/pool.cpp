// Pooling: MaxPooling2d (on the operands' own element type: float, or int8 / uint8 whose order is
// the values' order), AvgPooling2d (padding left out of each window's count, as XNNPACK averages)
// and GlobalAvgPooling2d (float, or QS8 in integers as XNNPACK's quantized mean), all NHWC on the
// one pooling implementation, kernels/cpu/pool_nhwc.h.
#include <cmath>

#include "backends/xnnpack/runtime/ops/ops.h"
#include "kernels/cpu/pool_nhwc.h"

namespace executorch {
namespace backends {
namespace xnnpack {
namespace {

namespace cpu = kernels::cpu;

Error refused(const Op& op) {
  ET_LOG(Error, "XnnpackBackend: node %u (%s): the pooling kernel refused its shapes or output bounds", op.node_index,
         op.name);
  return Error::InvalidProgram;
}

Error infer_window(const Op& op, Plan& plan) {
  const Value& a = plan.values[op.in[0]];
  ET_TRY(check_nhwc(op, a));
  return window_shape(op, plan, a.dims[3]);
}

// A uint8 value's bound, as qbound() for int8.
uint8_t qbound_u8(float x, const Value& v, bool upper) {
  if (!std::isfinite(x)) return upper ? 255 : 0;
  const float q = std::nearbyint(x / v.scale) + static_cast<float>(v.zero_point);
  return static_cast<uint8_t>(std::min(255.f, std::max(0.f, q)));
}

Error run_max_pool(const Op& op, Plan& plan, const void* const* in, size_t) {
  const Value& a = plan.values[op.in[0]];
  Value& out = plan.values[op.out];
  if (out.numel() == 0) return Error::Ok;
  const cpu::PoolNhwc p = to_conv_nhwc(op.conv);
  const int64_t* d = a.dims;
  bool ok;
  if (out.dtype == DType::kF32) {
    ok = cpu::max_pool2d_nhwc_f32(p, d[0], d[1], d[2], d[3], static_cast<const float*>(in[0]),
                                  static_cast<float*>(out.data), op.out_min, op.out_max);
  } else if (out.dtype == DType::kQS8) {
    ok = cpu::max_pool2d_nhwc_qs8(p, d[0], d[1], d[2], d[3], static_cast<const int8_t*>(in[0]),
                                  static_cast<int8_t*>(out.data), qbound(op.out_min, out, false),
                                  qbound(op.out_max, out, true));
  } else {
    ok = cpu::max_pool2d_nhwc_qu8(p, d[0], d[1], d[2], d[3], static_cast<const uint8_t*>(in[0]),
                                  static_cast<uint8_t*>(out.data), qbound_u8(op.out_min, out, false),
                                  qbound_u8(op.out_max, out, true));
  }
  return ok ? Error::Ok : refused(op);
}

Error run_avg_pool(const Op& op, Plan& plan, const float* const* in, float* o, float*) {
  const Value& a = plan.values[op.in[0]];
  if (plan.values[op.out].numel() == 0) return Error::Ok;
  const int64_t* d = a.dims;
  return cpu::avg_pool2d_nhwc_f32(to_conv_nhwc(op.conv), d[0], d[1], d[2], d[3], false, in[0], o, op.out_min,
                                  op.out_max)
             ? Error::Ok
             : refused(op);
}

Error infer_global(const Op& op, Plan& plan) {
  const Value& a = plan.values[op.in[0]];
  ET_TRY(check_nhwc(op, a));
  const int64_t keep[4] = {a.dims[0], 1, 1, a.dims[3]};
  const int64_t flat[2] = {a.dims[0], a.dims[3]};
  return plan.values[op.out].rank == 4 ? set_out(op, plan, 4, keep) : set_out(op, plan, 2, flat);
}

// The mean of an image of no pixels is taken as 0 (the output's zero point in int8).
Error run_global(const Op& op, Plan& plan, const float* const* in, float* o, float*) {
  const Value& a = plan.values[op.in[0]];
  const int64_t n = plan.values[op.out].numel(), pixels = a.dims[1] * a.dims[2];
  if (n == 0) return Error::Ok;
  if (pixels == 0) {
    std::fill(o, o + n, clampf(0.f, op.out_min, op.out_max));
    return Error::Ok;
  }
  return cpu::global_avg_pool_nhwc_f32(a.dims[0], pixels, a.dims[3], in[0], o, op.out_min, op.out_max) ? Error::Ok
                                                                                                       : refused(op);
}

Error run_global_qs8(const Op& op, Plan& plan) {
  const Value& a = plan.values[op.in[0]];
  Value& out = plan.values[op.out];
  const int64_t n = out.numel(), pixels = a.dims[1] * a.dims[2];
  int8_t* y = static_cast<int8_t*>(out.data);
  if (n == 0) return Error::Ok;
  if (pixels == 0) {
    std::fill(y, y + n, static_cast<int8_t>(std::min<int32_t>(std::max<int32_t>(out.zero_point, op.qmin), op.qmax)));
    return Error::Ok;
  }
  return cpu::global_avg_pool_nhwc_qs8(a.dims[0], pixels, a.dims[3], static_cast<const int8_t*>(a.data), a.scale,
                                       a.zero_point, y, out.scale, out.zero_point, op.qmin, op.qmax)
             ? Error::Ok
             : refused(op);
}

const OpImpl kMaxPool = {true, infer_window, nullptr, nullptr, run_max_pool, nullptr};
const OpImpl kAvgPool = {false, infer_window, nullptr, run_avg_pool, nullptr, nullptr};
const OpImpl kGlobalAvgPool = {false, infer_global, nullptr, run_global, nullptr, run_global_qs8};

Error define_window(NodeContext& ctx, Op& op, const fb::_XNNPooling2D* pl) {
  ET_CHECK_OR_RETURN((pl->flags() & ~kFlagKeepDims) == 0, NotImplemented,
                     "XnnpackBackend: node %u (%s) has unsupported flags 0x%x", op.node_index, op.name, pl->flags());
  ConvParams& p = op.conv;
  p.pad_top = pl->padding_top(), p.pad_right = pl->padding_right();
  p.pad_bottom = pl->padding_bottom(), p.pad_left = pl->padding_left();
  p.kernel_h = pl->pooling_height(), p.kernel_w = pl->pooling_width();
  p.stride_h = pl->stride_height(), p.stride_w = pl->stride_width();
  p.dilation_h = std::max<int64_t>(1, pl->dilation_height());
  p.dilation_w = std::max<int64_t>(1, pl->dilation_width());
  ET_TRY(check_window(op, p));
  return one_input(ctx, op, pl);
}

}  // namespace

bool define_pool(NodeContext& ctx, const fb::XNode* node, Op& op, Error* err) {
  using U = fb::XNodeUnion;
  switch (node->xnode_union_type()) {
    case U::XNNMaxPooling2d:
      op.kind = OpKind::kMaxPool, op.impl = &kMaxPool;
      *err = define_window(ctx, op, node->xnode_union_as_XNNMaxPooling2d());
      return true;
    case U::XNNAvgPooling2d:
      op.kind = OpKind::kAvgPool, op.impl = &kAvgPool;
      *err = define_window(ctx, op, node->xnode_union_as_XNNAvgPooling2d());
      return true;
    case U::XNNGlobalAvgPooling2d:
      op.kind = OpKind::kGlobalAvgPool, op.impl = &kGlobalAvgPool;
      *err = one_input(ctx, op, node->xnode_union_as_XNNGlobalAvgPooling2d());
      return true;
    default: return false;
  }
}

}  // namespace xnnpack
}  // namespace backends
}  // namespace executorch
