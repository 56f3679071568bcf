// Operand construction, broadcasting and walk planning for the elementwise maps.
#include "kernels/portable/util/elementwise.h"

#include <cmath>
#include <limits>

namespace executorch {
namespace kernels {

Operand tensor_operand(const Tensor& t) {
  Operand o;
  o.data = t.const_data_ptr();
  o.type = t.scalar_type();
  o.ndim = static_cast<size_t>(t.dim());
  for (size_t d = 0; d < o.ndim && d < kMaxDim; ++d) {
    o.sizes[d] = t.sizes()[d];
    o.strides[d] = t.strides()[d];
  }
  o.row_major = t.is_contiguous();
  return o;
}

bool scalar_operand(const EValue& v, Operand* out) {
  Operand o;
  o.is_scalar = true;
  if (v.isDouble()) {
    o.type = ScalarType::Double;
  } else if (v.isInt()) {
    o.type = ScalarType::Long;
  } else if (v.isBool()) {
    o.type = ScalarType::Bool;
  } else {
    return false;
  }
  o.scalar_d = v.toScalarDouble();
  o.scalar_i = scalar_int(v);
  *out = o;
  return true;
}

Operand double_operand(double v) {
  Operand o;
  o.is_scalar = true;
  o.type = ScalarType::Double;
  o.scalar_d = v;
  o.scalar_i = saturating_int(v);
  return o;
}

bool broadcast_shape(const Operand* ops, size_t n, int64_t* sizes, size_t* ndim) {
  size_t nd = 0;
  for (size_t k = 0; k < n; ++k)
    if (!ops[k].is_scalar && ops[k].ndim > nd) nd = ops[k].ndim;
  if (nd > kMaxDim) return false;
  for (size_t d = 0; d < nd; ++d) sizes[d] = 1;
  for (size_t k = 0; k < n; ++k) {
    if (ops[k].is_scalar) continue;
    const size_t shift = nd - ops[k].ndim;
    for (size_t d = 0; d < ops[k].ndim; ++d) {
      const int64_t s = ops[k].sizes[d];
      int64_t& r = sizes[d + shift];
      if (s == r || s == 1) continue;
      if (r != 1) return false;
      r = s;
    }
  }
  *ndim = nd;
  return true;
}

Walk plan_walk(const Tensor& out, const Operand* ins, size_t n) {
  Walk w;
  w.ndim = static_cast<size_t>(out.dim());
  w.count = n + 1;
  // Output tensors are dense in their dim order, so operands of its sizes and strides (dims of
  // one element aside) are walked at the same offsets, whatever that order is.
  bool linear = true;
  bool dense = true;
  for (size_t d = 0; d < w.ndim; ++d) {
    w.sizes[d] = out.sizes()[d];
    w.strides[0][d] = out.strides()[d];
  }
  for (size_t k = 0; k < n; ++k) {
    const Operand& o = ins[k];
    if (o.is_scalar) {
      // A stride of zero everywhere marks "always offset 0" in the linear walk too.
      for (size_t d = 0; d < kMaxDim; ++d) w.strides[k + 1][d] = 0;
      dense = false;
      continue;
    }
    const size_t shift = w.ndim - o.ndim;
    bool full = o.ndim == w.ndim;
    for (size_t d = 0; d < w.ndim; ++d) {
      const bool present = d >= shift && o.sizes[d - shift] == w.sizes[d];
      w.strides[k + 1][d] = present ? o.strides[d - shift] : 0;
      full = full && present && (w.sizes[d] <= 1 || o.strides[d] == w.strides[0][d]);
    }
    // An operand of one element is offset 0 everywhere, like a scalar.
    int64_t numel = 1;
    for (size_t d = 0; d < o.ndim; ++d) numel *= o.sizes[d];
    if (numel == 1) {
      for (size_t d = 0; d < kMaxDim; ++d) w.strides[k + 1][d] = 0;
      dense = dense && full;
      continue;
    }
    // The linear walk marks a full operand with a nonzero first stride.
    if (full && w.ndim > 0) w.strides[k + 1][0] = w.strides[k + 1][0] == 0 ? 1 : w.strides[k + 1][0];
    linear = linear && full;
  }
  w.linear = linear;
  w.dense = linear && dense;
  return w;
}

bool plan_broadcast_walk(const Operand* ins, size_t n, Walk* w) {
  size_t nd = 0;
  int64_t sizes[kMaxDim];
  if (!broadcast_shape(ins, n, sizes, &nd)) return false;
  w->ndim = nd;
  w->count = n + 1;
  int64_t stride = 1;
  for (size_t d = nd; d > 0; --d) {
    w->sizes[d - 1] = sizes[d - 1];
    w->strides[0][d - 1] = stride;
    stride *= sizes[d - 1];
  }
  for (size_t k = 0; k < n; ++k) {
    const size_t shift = nd - ins[k].ndim;
    for (size_t d = 0; d < nd; ++d)
      w->strides[k + 1][d] = d >= shift && ins[k].sizes[d - shift] == sizes[d] ? ins[k].strides[d - shift] : 0;
  }
  return true;
}

ComputeKind compute_kind(ScalarType out, const Operand* ins, size_t n) {
  bool all_f32 = out == ScalarType::Float;
  bool all_int = is_integral(out, true);
  // Float32 arithmetic serves every mix of Float, Half and BFloat16 (and scalars), as in torch.
  bool all_f16_f32 = all_f32 || is_half(out);
  for (size_t k = 0; k < n; ++k) {
    all_f32 = all_f32 && operand_float32(ins[k]);
    all_int = all_int && operand_integral(ins[k]);
    all_f16_f32 = all_f16_f32 && (operand_float32(ins[k]) || is_half(ins[k].type));
  }
  if (all_f32) return ComputeKind::kFloat32;
  if (all_f16_f32) return ComputeKind::kHalf;
  if (all_int) return ComputeKind::kInt64;
  return ComputeKind::kDouble;
}

double round_to_float(double v) {
  const double fmax = std::numeric_limits<float>::max();
  if (v != v || std::fabs(v) <= fmax) return static_cast<double>(static_cast<float>(v));
  // Past float's largest value, round to nearest still gives it below the halfway point to
  // 2^128 (the ulp there is 2^104); from that point on, infinity.
  const double halfway = std::ldexp(1.0, 128) - std::ldexp(1.0, 103);
  return std::copysign(std::fabs(v) < halfway ? fmax : std::numeric_limits<double>::infinity(), v);
}

double round_to(ScalarType type, double v) {
  switch (type) {
    case ScalarType::Float: return round_to_float(v);
    case ScalarType::Half: return cpu::to_float(cpu::to_half(static_cast<float>(round_to_float(v))));
    case ScalarType::BFloat16: return cpu::to_float(cpu::to_bfloat16(static_cast<float>(round_to_float(v))));
    default: return v;
  }
}

bool number_comparison_type(const Operand* ins, size_t n, ScalarType* type) {
  bool tensor = false, number = false, floating_number = false;
  for (size_t k = 0; k < n; ++k) {
    if (ins[k].is_scalar) {
      number = true;
      floating_number = floating_number || ins[k].type == ScalarType::Double;
    } else if (!tensor) {
      tensor = true;
      *type = ins[k].type;
    } else if (ins[k].type != *type) {
      return false;
    }
  }
  if (!tensor || !number) return false;
  if (*type == ScalarType::Float || *type == ScalarType::Half || *type == ScalarType::BFloat16) return true;
  return floating_number && is_integral(*type, true);
}

void dtype_not_selected(KernelRuntimeContext& ctx, ScalarType out) {
  ET_LOG(Error,
         "elementwise kernel: this dtype combination (output %s) was left out of the build by "
         "EXECUTORCH_DTYPE_SELECTIVE_BUILD; rebuild selecting a model that calls the op with it",
         runtime::scalar_type_name(out));
  ctx.fail(Error::NotSupported);
}

bool prepare_elementwise(KernelRuntimeContext& ctx, const Operand* ins, size_t n, const Tensor& out) {
  if (!is_supported_dtype(out.scalar_type())) {
    ET_LOG(Error, "elementwise kernel: output dtype %s is not supported", runtime::scalar_type_name(out.scalar_type()));
    ctx.fail(Error::InvalidType);
    return false;
  }
  for (size_t k = 0; k < n; ++k) {
    if (!ins[k].is_scalar && !is_supported_dtype(ins[k].type)) {
      ET_LOG(Error, "elementwise kernel: input dtype %s is not supported", runtime::scalar_type_name(ins[k].type));
      ctx.fail(Error::InvalidType);
      return false;
    }
  }
  int64_t sizes[kMaxDim];
  size_t nd = 0;
  if (!check(ctx, broadcast_shape(ins, n, sizes, &nd), "input shapes do not broadcast")) return false;
  return resize_out(ctx, out, {sizes, nd});
}

}  // namespace kernels
}  // namespace executorch
