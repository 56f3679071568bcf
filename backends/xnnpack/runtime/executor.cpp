// Shape inference and dispatch of a Plan. Ops that compile() put on the int8 kernels run there
// (integer accumulation, XNNPACK's requantization); other ops with quantized operands dequantize
// them into scratch, run in float and requantize a quantized result (round half to even).
#include "backends/xnnpack/runtime/executor.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "backends/xnnpack/runtime/kernels.h"
#include "kernels/portable/cpu/softmax.h"

namespace executorch {
namespace backends {
namespace xnnpack {

using runtime::Error;
using runtime::EValue;
using runtime::ScalarType;
using runtime::Span;

namespace {

constexpr size_t kAlign = 64;
size_t align_up(size_t n) { return (n + kAlign - 1) & ~(kAlign - 1); }

bool is_quantized(DType t) { return t == DType::kQS8 || t == DType::kQU8 || t == DType::kQD8; }

// Ops that move elements without arithmetic run on any element type, bytewise.
bool moves_bytes(OpKind k) {
  return k == OpKind::kTranspose || k == OpKind::kCopy || k == OpKind::kSlice || k == OpKind::kPad ||
         k == OpKind::kConcat || k == OpKind::kMaxPool;
}

int64_t qd8_rows(const Value& v, const int64_t* dims) {
  int64_t rows = 1;
  for (int d = 0; d < v.rank - v.nonbatch_dims; ++d) rows *= dims[d];
  return rows;
}

Error set_out(const Op& op, Plan& plan, int rank, const int64_t* dims) {
  Value& out = plan.values[op.out];
  ET_CHECK_OR_RETURN(rank == out.rank, InvalidProgram,
                     "XnnpackBackend: node %u (%s) makes a %d-D result; its output value is %d-D", op.node_index,
                     op.name, rank, out.rank);
  int64_t numel = 1;
  for (int d = 0; d < rank; ++d) {
    ET_CHECK_OR_RETURN(dims[d] >= 0 && (dims[d] == 0 || numel <= (int64_t(1) << 40) / dims[d]), InvalidProgram,
                       "XnnpackBackend: node %u (%s) makes an invalid shape", op.node_index, op.name);
    numel *= dims[d];
    out.dims[d] = dims[d];
  }
  ET_CHECK_OR_RETURN(numel <= out.max_numel(), InvalidArgument,
                     "XnnpackBackend: node %u (%s) makes %" PRId64 " elements; the plan holds %" PRId64
                     " (inputs larger than the upper bounds the model was exported with?)",
                     op.node_index, op.name, numel, out.max_numel());
  ET_CHECK_OR_RETURN(out.dtype != DType::kQD8 || qd8_rows(out, out.dims) <= qd8_rows_max(out), InvalidArgument,
                     "XnnpackBackend: node %u (%s) makes more rows than the plan holds quantization parameters for "
                     "(inputs larger than the upper bounds the model was exported with?)",
                     op.node_index, op.name);
  return Error::Ok;
}

Error check_nhwc(const Op& op, const Value& in) {
  ET_CHECK_OR_RETURN(in.rank == 4, InvalidProgram, "XnnpackBackend: node %u (%s) needs a 4-D NHWC input, got %d-D",
                     op.node_index, op.name, in.rank);
  return Error::Ok;
}

Error window_shape(const Op& op, Plan& plan, int64_t out_c) {
  const Value& in = plan.values[op.in[0]];
  ET_TRY(check_nhwc(op, in));
  const ConvParams& p = op.conv;
  const int64_t* d = in.dims;
  const int64_t oh = window_out(d[1], p.pad_top, p.pad_bottom, p.kernel_h, p.dilation_h, p.stride_h);
  const int64_t ow = window_out(d[2], p.pad_left, p.pad_right, p.kernel_w, p.dilation_w, p.stride_w);
  const int64_t dims[4] = {d[0], oh, ow, out_c};
  return set_out(op, plan, 4, dims);
}

}  // namespace

int64_t qd8_rows_max(const Value& v) { return qd8_rows(v, v.max_dims); }

Error infer_shape(const Op& op, Plan& plan) {
  const Value& a = plan.values[op.in[0]];
  const Value& out = plan.values[op.out];
  // Element types: bytewise ops keep them (and their quantization); Convert changes them; the
  // rest compute in float over any float or int8 operands.
  for (int i = 0; i < op.n_in; ++i) {
    const Value& v = plan.values[op.in[i]];
    if (moves_bytes(op.kind)) {
      ET_CHECK_OR_RETURN(v.dtype != DType::kQD8 && out.dtype != DType::kQD8 && v.dtype != DType::kI32 &&
                             (v.dtype == out.dtype || v.dtype == DType::kF32 || out.dtype == DType::kF32),
                         NotImplemented,
                         "XnnpackBackend: node %u (%s) converts between element types it cannot; not supported",
                         op.node_index, op.name);
    } else {
      ET_CHECK_OR_RETURN(v.dtype != DType::kI32 && out.dtype != DType::kI32, NotImplemented,
                         "XnnpackBackend: node %u (%s) on int32 values is not supported", op.node_index, op.name);
    }
  }
  switch (op.kind) {
    case OpKind::kConv: {
      ET_TRY(check_nhwc(op, a));
      const int64_t* d = a.dims;
      ET_CHECK_OR_RETURN(d[3] == op.conv.groups * op.conv.group_in, InvalidProgram,
                         "XnnpackBackend: node %u (%s) expects %" PRId64 " input channels, got %" PRId64, op.node_index,
                         op.name, op.conv.groups * op.conv.group_in, d[3]);
      return window_shape(op, plan, op.conv.groups * op.conv.group_out);
    }
    case OpKind::kConvTranspose: {
      ET_TRY(check_nhwc(op, a));
      ET_CHECK_OR_RETURN(a.dims[3] == op.conv.groups * op.conv.group_in, InvalidProgram,
                         "XnnpackBackend: node %u (%s) expects %" PRId64 " input channels, got %" PRId64, op.node_index,
                         op.name, op.conv.groups * op.conv.group_in, a.dims[3]);
      const ConvParams& p = op.conv;
      const int64_t dims[4] = {
          a.dims[0], transposed_out(a.dims[1], p.pad_top, p.pad_bottom, p.kernel_h, p.dilation_h, p.stride_h, p.adj_h),
          transposed_out(a.dims[2], p.pad_left, p.pad_right, p.kernel_w, p.dilation_w, p.stride_w, p.adj_w),
          p.groups * p.group_out};
      return set_out(op, plan, 4, dims);
    }
    case OpKind::kDepthwiseConv:
      ET_TRY(check_nhwc(op, a));
      ET_CHECK_OR_RETURN(a.dims[3] == op.conv.groups, InvalidProgram,
                         "XnnpackBackend: node %u (%s) expects %" PRId64 " input channels, got %" PRId64, op.node_index,
                         op.name, op.conv.groups, a.dims[3]);
      return window_shape(op, plan, op.conv.groups * op.conv.group_out);
    case OpKind::kMaxPool:
    case OpKind::kAvgPool: ET_TRY(check_nhwc(op, a)); return window_shape(op, plan, a.dims[3]);
    case OpKind::kGlobalAvgPool: {
      ET_TRY(check_nhwc(op, a));
      const int64_t keep[4] = {a.dims[0], 1, 1, a.dims[3]};
      const int64_t flat[2] = {a.dims[0], a.dims[3]};
      return out.rank == 4 ? set_out(op, plan, 4, keep) : set_out(op, plan, 2, flat);
    }
    case OpKind::kFullyConnected: {
      ET_CHECK_OR_RETURN(a.rank >= 1 && a.dims[a.rank - 1] == op.conv.group_in, InvalidProgram,
                         "XnnpackBackend: node %u (%s) expects rows of %" PRId64 " inputs", op.node_index, op.name,
                         op.conv.group_in);
      int64_t dims[kMaxDims];
      std::copy(a.dims, a.dims + a.rank, dims);
      dims[a.rank - 1] = op.conv.group_out;
      return set_out(op, plan, a.rank, dims);
    }
    case OpKind::kBinary:
    case OpKind::kBatchMatMul: {
      const Value& b = plan.values[op.in[1]];
      const bool bmm = op.kind == OpKind::kBatchMatMul;
      const int rank = std::max(a.rank, b.rank);
      ET_CHECK_OR_RETURN(!bmm || (a.rank >= 2 && b.rank >= 2), InvalidProgram,
                         "XnnpackBackend: node %u (%s) needs matrices of at least 2 dims", op.node_index, op.name);
      int64_t dims[kMaxDims];
      const int batch = bmm ? rank - 2 : rank;
      for (int d = 0; d < batch; ++d) {
        const int da = d - (rank - a.rank), db = d - (rank - b.rank);
        const int64_t x = da >= 0 ? a.dims[da] : 1, y = db >= 0 ? b.dims[db] : 1;
        ET_CHECK_OR_RETURN(x == y || x == 1 || y == 1, InvalidProgram,
                           "XnnpackBackend: node %u (%s) cannot broadcast %" PRId64 " with %" PRId64 " (dim %d)",
                           op.node_index, op.name, x, y, d);
        dims[d] = x == 1 ? y : x;
      }
      if (bmm) {
        const bool tb = (op.flags & 1) != 0;
        const int64_t m = a.dims[a.rank - 2], k = a.dims[a.rank - 1];
        const int64_t kb = tb ? b.dims[b.rank - 1] : b.dims[b.rank - 2],
                      n = tb ? b.dims[b.rank - 2] : b.dims[b.rank - 1];
        ET_CHECK_OR_RETURN(k == kb, InvalidProgram,
                           "XnnpackBackend: node %u (%s) multiplies k=%" PRId64 " by k=%" PRId64, op.node_index,
                           op.name, k, kb);
        dims[rank - 2] = m, dims[rank - 1] = n;
      }
      return set_out(op, plan, rank, dims);
    }
    case OpKind::kUnary:
    case OpKind::kSoftmax:
    case OpKind::kConvert:
      ET_CHECK_OR_RETURN(op.kind != OpKind::kSoftmax || a.rank >= 1, InvalidProgram,
                         "XnnpackBackend: node %u (%s) on a scalar", op.node_index, op.name);
      return set_out(op, plan, a.rank, a.dims);
    case OpKind::kCopy: {
      if (op.flags == 0) return set_out(op, plan, a.rank, a.dims);
      int64_t dims[kMaxDims], known = 1, inferred = -1;
      for (int d = 0; d < op.n_params; ++d) {
        dims[d] = op.params[d];
        if (dims[d] == 0) {
          ET_CHECK_OR_RETURN(inferred < 0, InvalidProgram, "XnnpackBackend: node %u (%s) infers more than one dim",
                             op.node_index, op.name);
          inferred = d;
        } else {
          // The shape's entries come from the file (up to 2^32 - 1 each): their product may not fit.
          ET_CHECK_OR_RETURN(!__builtin_mul_overflow(known, dims[d], &known), InvalidProgram,
                             "XnnpackBackend: node %u (%s) reshapes into more than 2^63 elements", op.node_index,
                             op.name);
        }
      }
      const int64_t numel = a.numel();
      if (inferred >= 0) {
        ET_CHECK_OR_RETURN(known > 0 && numel % known == 0, InvalidArgument,
                           "XnnpackBackend: node %u (%s) cannot reshape %" PRId64 " elements", op.node_index, op.name,
                           numel);
        dims[inferred] = numel / known;
        known = numel;
      }
      ET_CHECK_OR_RETURN(known == numel, InvalidArgument,
                         "XnnpackBackend: node %u (%s) reshapes %" PRId64 " elements into %" PRId64, op.node_index,
                         op.name, numel, known);
      return set_out(op, plan, op.n_params, dims);
    }
    case OpKind::kTranspose: {
      ET_CHECK_OR_RETURN(op.n_params == a.rank, InvalidProgram,
                         "XnnpackBackend: node %u (%s) permutes %d dims of a %d-D value", op.node_index, op.name,
                         op.n_params, a.rank);
      bool seen[kMaxDims] = {};
      int64_t dims[kMaxDims];
      for (int d = 0; d < a.rank; ++d) {
        const int64_t p = op.params[d];
        ET_CHECK_OR_RETURN(p >= 0 && p < a.rank && !seen[p], InvalidProgram,
                           "XnnpackBackend: node %u (%s) has an invalid permutation", op.node_index, op.name);
        seen[p] = true;
        dims[d] = a.dims[p];
      }
      return set_out(op, plan, a.rank, dims);
    }
    case OpKind::kSlice: {
      ET_CHECK_OR_RETURN(op.n_params == a.rank && a.rank >= 1, InvalidProgram,
                         "XnnpackBackend: node %u (%s) slices %d dims of a %d-D value", op.node_index, op.name,
                         op.n_params, a.rank);
      int64_t dims[kMaxDims];
      for (int d = 0; d < a.rank; ++d) {
        const int64_t off = op.params[d], size = op.params2[d] == 0 ? a.dims[d] - off : op.params2[d];
        ET_CHECK_OR_RETURN(off <= a.dims[d] && size >= 0 && size <= a.dims[d] - off, InvalidArgument,
                           "XnnpackBackend: node %u (%s) slices [%" PRId64 ", +%" PRId64 ") of a dim of %" PRId64,
                           op.node_index, op.name, off, size, a.dims[d]);
        dims[d] = size;
      }
      return set_out(op, plan, a.rank, dims);
    }
    case OpKind::kPad: {
      ET_CHECK_OR_RETURN(op.n_params == a.rank && a.rank >= 1, InvalidProgram,
                         "XnnpackBackend: node %u (%s) pads %d dims of a %d-D value", op.node_index, op.name,
                         op.n_params, a.rank);
      int64_t dims[kMaxDims];
      for (int d = 0; d < a.rank; ++d) dims[d] = a.dims[d] + op.params[d] + op.params2[d];
      return set_out(op, plan, a.rank, dims);
    }
    case OpKind::kConcat: {
      ET_CHECK_OR_RETURN(op.axis < a.rank, InvalidProgram,
                         "XnnpackBackend: node %u (%s) joins along dim %" PRId64 " of %d-D values", op.node_index,
                         op.name, op.axis, a.rank);
      int64_t dims[kMaxDims];
      std::copy(a.dims, a.dims + a.rank, dims);
      for (int i = 1; i < op.n_in; ++i) {
        const Value& v = plan.values[op.in[i]];
        ET_CHECK_OR_RETURN(v.rank == a.rank, InvalidProgram, "XnnpackBackend: node %u (%s) joins values of other ranks",
                           op.node_index, op.name);
        for (int d = 0; d < a.rank; ++d) {
          ET_CHECK_OR_RETURN(d == op.axis || v.dims[d] == a.dims[d], InvalidProgram,
                             "XnnpackBackend: node %u (%s) joins values whose dim %d differs", op.node_index, op.name,
                             d);
        }
        dims[op.axis] += v.dims[op.axis];
      }
      return set_out(op, plan, a.rank, dims);
    }
  }
  return Error::Internal;
}

namespace {

// Floats an op's kernel needs as workspace beyond its (float) operands.
size_t kernel_floats(const Op& op, const Plan& plan) {
  if (op.packed != nullptr) return 0;
  const Value& a = plan.values[op.in[0]];
  const Value& out = plan.values[op.out];
  switch (op.kind) {
    case OpKind::kConv: {
      const int64_t* d = a.dims;
      return conv_scratch_floats(op.conv, d[0], d[1], d[2], out.dims[1], out.dims[2]);
    }
    case OpKind::kFullyConnected:
      return fc_scratch_floats(a.numel() / std::max<int64_t>(1, op.conv.group_in), op.conv.group_in, op.conv.group_out);
    case OpKind::kBatchMatMul:
      return bmm_scratch_floats(out.dims[out.rank - 2], out.dims[out.rank - 1], a.dims[a.rank - 1]);
    default: return 0;
  }
}

bool float_compute(const Op& op) { return !moves_bytes(op.kind); }

}  // namespace

// An input of a data-movement op whose element type or quantization differs from the output's is
// converted into scratch first (the exporter folds a quantize or dequantize into these ops).
bool needs_requantize(const Value& in, const Value& out) {
  return in.dtype != out.dtype ||
         (is_quantized(in.dtype) && (in.scale != out.scale || in.zero_point != out.zero_point));
}

Error scratch_bytes(const Op& op, const Plan& plan, size_t* need) {
  if (op.compute == Compute::kQd8) {
    const Value& a = plan.values[op.in[0]];
    *need = kernels::cpu::fully_connected_qd8_scratch_bytes(a.numel() / op.conv.group_in, op.conv.group_in);
    return Error::Ok;
  }
  if (op.compute == Compute::kQs8) {
    *need = 0;
    return Error::Ok;
  }
  size_t total = 0;
  if (moves_bytes(op.kind)) {
    for (int i = 0; i < op.n_in; ++i) {
      const Value& v = plan.values[op.in[i]];
      const Value& out = plan.values[op.out];
      if (needs_requantize(v, out)) total += align_up(static_cast<size_t>(v.numel()) * dtype_size(out.dtype));
    }
  }
  if (float_compute(op)) {
    for (int i = 0; i < op.n_in; ++i) {
      const Value& v = plan.values[op.in[i]];
      if (is_quantized(v.dtype)) total += align_up(static_cast<size_t>(v.numel()) * 4);
    }
    const Value& out = plan.values[op.out];
    if (is_quantized(out.dtype)) total += align_up(static_cast<size_t>(out.numel()) * 4);
  }
  total += kernel_floats(op, plan) * 4;
  *need = total;
  return Error::Ok;
}

namespace {

// The float view of a value for float_compute ops: itself, or dequantized into scratch.
const float* as_float(const Value& v, uint8_t** scratch) {
  if (v.dtype == DType::kF32) return static_cast<const float*>(v.data);
  float* f = reinterpret_cast<float*>(*scratch);
  *scratch += align_up(static_cast<size_t>(v.numel()) * 4);
  if (v.dtype == DType::kQD8) {
    const int64_t rows = qd8_rows(v, v.dims), n = v.numel();
    dequantize_rows(static_cast<const int8_t*>(v.data), rows, rows ? n / rows : 0, v.row_scale, v.row_zero_point, f);
  } else {
    dequantize(v.data, v.numel(), v.scale, v.zero_point, v.dtype == DType::kQS8, f);
  }
  return f;
}

void store_float(const float* f, Value& out) {
  const int64_t n = out.numel();
  switch (out.dtype) {
    case DType::kF32:
      if (f != out.data) std::memmove(out.data, f, static_cast<size_t>(n) * 4);
      break;
    case DType::kQS8: quantize(f, n, out.scale, out.zero_point, -128, 127, out.data, true); break;
    case DType::kQU8: quantize(f, n, out.scale, out.zero_point, 0, 255, out.data, false); break;
    case DType::kQD8: {
      const int64_t rows = qd8_rows(out, out.dims);
      quantize_rows(f, rows, rows ? n / rows : 0, static_cast<int8_t*>(out.data), out.row_scale, out.row_zero_point);
      break;
    }
    case DType::kI32: break;
  }
}

ScalarType scalar_type_of(DType t) {
  switch (t) {
    case DType::kF32: return ScalarType::Float;
    case DType::kI32: return ScalarType::Int;
    case DType::kQU8: return ScalarType::Byte;
    default: return ScalarType::Char;
  }
}

Error bind_output(const Op& op, Plan& plan, Span<EValue*> args) {
  Value& out = plan.values[op.out];
  if (!out.is_output) return Error::Ok;
  runtime::Tensor t = args[out.external]->toTensor();
  int64_t sizes[kMaxDims];
  std::copy(out.dims, out.dims + out.rank, sizes);
  const bool scalar = t.dim() == 0 && out.rank == 1 && out.dims[0] == 1;
  ET_CHECK_OR_RETURN(t.dim() == out.rank || scalar, InvalidArgument,
                     "XnnpackBackend: output %u of the call is %" PRId64 "-D; the graph makes %d-D", out.external,
                     t.dim(), out.rank);
  if (!scalar) ET_TRY(t.resize(Span<const int64_t>(sizes, static_cast<size_t>(out.rank))));
  out.data = t.mutable_data_ptr();
  // The kernels read their inputs while writing: an output the memory plan laid over an input (only a
  // malformed file does) is refused rather than computed from half-overwritten data.
  const uintptr_t o0 = reinterpret_cast<uintptr_t>(out.data), o1 = o0 + t.nbytes();
  for (uint32_t vi : plan.inputs) {
    const runtime::Tensor in = args[plan.values[vi].external]->toTensor();
    const uintptr_t i0 = reinterpret_cast<uintptr_t>(in.const_data_ptr()), i1 = i0 + in.nbytes();
    ET_CHECK_OR_RETURN(o1 <= i0 || i1 <= o0, InvalidProgram,
                       "XnnpackBackend: output %u of the call shares memory with input %u; the file's memory plan is "
                       "corrupt, re-export it",
                       out.external, plan.values[vi].external);
  }
  return Error::Ok;
}

// An op compile() put on the int8 kernels (packed weights; requantization in the kernel).
Error run_int8(const Op& op, Plan& plan) {
  namespace cpu = kernels::cpu;
  Value& out = plan.values[op.out];
  const Value& a = plan.values[op.in[0]];
  const int8_t* x = static_cast<const int8_t*>(a.data);
  int8_t* y = static_cast<int8_t*>(out.data);
  bool ok = false;
  switch (op.kind) {
    case OpKind::kConv:
    case OpKind::kDepthwiseConv:
      ok = out.numel() == 0 || cpu::conv2d_nhwc_qs8(to_conv_nhwc(op.conv), op.packed, a.dims[0], a.dims[1], a.dims[2],
                                                    x, y, op.qmin, op.qmax);
      break;
    case OpKind::kFullyConnected: {
      const int64_t k = op.conv.group_in, n = op.conv.group_out, rows = a.numel() / k;
      if (rows == 0) return Error::Ok;
      ok = op.compute == Compute::kQs8
               ? cpu::fully_connected_qs8(op.packed, rows, x, k, y, n, op.qmin, op.qmax)
               : cpu::fully_connected_qd8(op.packed, rows, static_cast<const float*>(a.data), k,
                                          static_cast<float*>(out.data), n, op.out_min, op.out_max, plan.scratch);
      break;
    }
    case OpKind::kBinary: {
      const Value& b = plan.values[op.in[1]];
      const BinaryKind kind = static_cast<BinaryKind>(op.sub);
      if (kind == BinaryKind::kAdd && b.rank == a.rank && std::equal(a.dims, a.dims + a.rank, b.dims) &&
          cpu::add_qs8(a.numel(), x, static_cast<const int8_t*>(b.data), y, add_quant(op, plan), op.qmin, op.qmax,
                       cpu::best_int8_isa())) {
        return Error::Ok;
      }
      int64_t ad[kMaxDims], bd[kMaxDims];
      for (int d = 0; d < out.rank; ++d) {
        const int da = d - (out.rank - a.rank), db = d - (out.rank - b.rank);
        ad[d] = da >= 0 ? a.dims[da] : 1;
        bd[d] = db >= 0 ? b.dims[db] : 1;
      }
      Qs8BinaryParams p;
      p.a_mul = static_cast<int32_t>(op.params[0]), p.b_mul = static_cast<int32_t>(op.params[1]);
      p.shift = static_cast<int32_t>(op.params[2]), p.bias = static_cast<int32_t>(op.params[3]);
      p.scale = op.alpha;
      qs8_binary(kind, p, out.rank, ad, x, bd, static_cast<const int8_t*>(b.data), out.dims, y, a.zero_point,
                 b.zero_point, out.zero_point, op.qmin, op.qmax);
      ok = true;
      break;
    }
    case OpKind::kGlobalAvgPool:
      ok = out.numel() == 0 || a.dims[1] * a.dims[2] == 0 ||
           cpu::global_avg_pool_nhwc_qs8(a.dims[0], a.dims[1] * a.dims[2], a.dims[3], x, a.scale, a.zero_point, y,
                                         out.scale, out.zero_point, op.qmin, op.qmax);
      break;
    case OpKind::kUnary: {  // a clamp in one quantization
      const int64_t n = a.numel();
      for (int64_t i = 0; i < n; ++i) y[i] = std::min(std::max(x[i], op.qmin), op.qmax);
      ok = true;
      break;
    }
    default: break;
  }
  ET_CHECK_OR_RETURN(ok, Internal, "XnnpackBackend: node %u (%s): the int8 kernel refused its shapes", op.node_index,
                     op.name);
  return Error::Ok;
}

Error run_op(const Op& op, Plan& plan) {
  if (op.compute != Compute::kFloat) return run_int8(op, plan);
  Value& out = plan.values[op.out];
  const Value& a = plan.values[op.in[0]];
  if (moves_bytes(op.kind)) {
    const size_t elem = dtype_size(out.dtype);
    const void* data[5];
    uint8_t* s = plan.scratch;
    for (int i = 0; i < op.n_in; ++i) {
      const Value& v = plan.values[op.in[i]];
      data[i] = v.data;
      if (!needs_requantize(v, out)) continue;
      const int64_t n = v.numel();
      // Into scratch, through float: q_out = round(deq_in(q) / s_out) + zp_out.
      float f;
      for (int64_t j = 0; j < n; ++j) {
        if (v.dtype == DType::kF32) {
          f = static_cast<const float*>(v.data)[j];
        } else {
          dequantize(static_cast<const uint8_t*>(v.data) + j, 1, v.scale, v.zero_point, v.dtype == DType::kQS8, &f);
        }
        if (out.dtype == DType::kF32) {
          reinterpret_cast<float*>(s)[j] = f;
        } else {
          const bool is_signed = out.dtype == DType::kQS8;
          quantize(&f, 1, out.scale, out.zero_point, is_signed ? -128 : 0, is_signed ? 127 : 255, s + j, is_signed);
        }
      }
      data[i] = s;
      s += align_up(static_cast<size_t>(n) * elem);
    }
    switch (op.kind) {
      case OpKind::kCopy:
        if (out.data != data[0]) std::memmove(out.data, data[0], static_cast<size_t>(a.numel()) * elem);
        return Error::Ok;
      case OpKind::kTranspose: transpose(elem, a.rank, a.dims, op.params, data[0], out.data); return Error::Ok;
      case OpKind::kSlice: slice(elem, a.rank, a.dims, op.params, out.dims, data[0], out.data); return Error::Ok;
      case OpKind::kPad: {
        uint8_t value[4];
        if (out.dtype == DType::kF32) {
          std::memcpy(value, &op.alpha, 4);
        } else {
          quantize(&op.alpha, 1, out.scale, out.zero_point, out.dtype == DType::kQS8 ? -128 : 0,
                   out.dtype == DType::kQS8 ? 127 : 255, value, out.dtype == DType::kQS8);
        }
        pad(elem, a.rank, a.dims, op.params, out.dims, value, data[0], out.data);
        return Error::Ok;
      }
      case OpKind::kConcat: {
        const int64_t* dims[5];
        for (int i = 0; i < op.n_in; ++i) dims[i] = plan.values[op.in[i]].dims;
        concat(elem, a.rank, op.axis, op.n_in, dims, data, out.data);
        return Error::Ok;
      }
      case OpKind::kMaxPool:
        if (out.dtype == DType::kF32) {
          max_pool_nhwc(op.conv, a.dims[0], a.dims[1], a.dims[2], a.dims[3], out.dims[1], out.dims[2],
                        static_cast<const float*>(data[0]), static_cast<float*>(out.data), op.out_min, op.out_max);
        } else if (out.dtype == DType::kQS8) {
          max_pool_nhwc(op.conv, a.dims[0], a.dims[1], a.dims[2], a.dims[3], out.dims[1], out.dims[2],
                        static_cast<const int8_t*>(data[0]), static_cast<int8_t*>(out.data), op.out_min, op.out_max);
        } else {
          max_pool_nhwc(op.conv, a.dims[0], a.dims[1], a.dims[2], a.dims[3], out.dims[1], out.dims[2],
                        static_cast<const uint8_t*>(data[0]), static_cast<uint8_t*>(out.data), op.out_min, op.out_max);
        }
        return Error::Ok;
      default: return Error::Internal;
    }
  }
  uint8_t* s = plan.scratch;
  const float* in[5] = {};
  for (int i = 0; i < op.n_in; ++i) in[i] = as_float(plan.values[op.in[i]], &s);
  float* o;
  if (out.dtype == DType::kF32) {
    o = static_cast<float*>(out.data);
  } else {
    o = reinterpret_cast<float*>(s);
    s += align_up(static_cast<size_t>(out.numel()) * 4);
  }
  float* ws = reinterpret_cast<float*>(s);
  switch (op.kind) {
    case OpKind::kConv:
    case OpKind::kDepthwiseConv:
      if (op.packed != nullptr) {
        ET_CHECK_OR_RETURN(kernels::cpu::conv2d_nhwc_f32(to_conv_nhwc(op.conv), op.packed, a.dims[0], a.dims[1],
                                                         a.dims[2], in[0], o, op.out_min, op.out_max) ||
                               out.numel() == 0,
                           Internal, "XnnpackBackend: node %u (%s): the packed convolution refused its shapes",
                           op.node_index, op.name);
        break;
      }
      if (op.kind == OpKind::kDepthwiseConv) {
        depthwise_nhwc(op.conv, a.dims[0], a.dims[1], a.dims[2], out.dims[1], out.dims[2], in[0], op.weights, op.bias,
                       o, op.out_min, op.out_max);
      } else {
        const int64_t* d = a.dims;
        conv_nhwc(op.conv, d[0], d[1], d[2], out.dims[1], out.dims[2], in[0], op.weights, op.bias, o, op.out_min,
                  op.out_max, ws);
      }
      break;
    case OpKind::kConvTranspose:
      conv_transpose_nhwc(op.conv, a.dims[0], a.dims[1], a.dims[2], out.dims[1], out.dims[2], in[0], op.weights,
                          op.bias, o, op.out_min, op.out_max);
      break;
    case OpKind::kFullyConnected:
      if (op.packed != nullptr) {
        const int64_t rows = a.numel() / op.conv.group_in;
        ET_CHECK_OR_RETURN(rows == 0 || kernels::cpu::fully_connected_f32(op.packed, rows, in[0], op.conv.group_in, o,
                                                                          op.conv.group_out, op.out_min, op.out_max),
                           Internal,
                           "XnnpackBackend: node %u (%s): the packed fully connected layer refused its shapes",
                           op.node_index, op.name);
        break;
      }
      fully_connected(a.numel() / op.conv.group_in, op.conv.group_in, op.conv.group_out, in[0], op.weights,
                      (op.flags & 1) != 0, op.bias, o, op.out_min, op.out_max, ws);
      break;
    case OpKind::kBinary: {
      const Value& b = plan.values[op.in[1]];
      int64_t ad[kMaxDims], bd[kMaxDims];
      for (int d = 0; d < out.rank; ++d) {
        const int da = d - (out.rank - a.rank), db = d - (out.rank - b.rank);
        ad[d] = da >= 0 ? a.dims[da] : 1;
        bd[d] = db >= 0 ? b.dims[db] : 1;
      }
      binary(static_cast<BinaryKind>(op.sub), out.rank, ad, in[0], bd, in[1], out.dims, o, op.out_min, op.out_max);
      break;
    }
    case OpKind::kBatchMatMul: {
      const Value& b = plan.values[op.in[1]];
      int64_t ad[kMaxDims], bd[kMaxDims];
      for (int d = 0; d < out.rank; ++d) {
        const int da = d - (out.rank - a.rank), db = d - (out.rank - b.rank);
        ad[d] = da >= 0 ? a.dims[da] : 1;
        bd[d] = db >= 0 ? b.dims[db] : 1;
      }
      batch_matmul(out.rank, ad, bd, out.dims, in[0], in[1], (op.flags & 1) != 0, o, ws);
      break;
    }
    case OpKind::kUnary:
      unary(static_cast<UnaryKind>(op.sub), in[0], o, a.numel(), op.alpha, op.out_min, op.out_max);
      break;
    case OpKind::kSoftmax: {
      const int64_t n = a.dims[a.rank - 1];
      kernels::cpu::softmax(in[0], o, n ? a.numel() / n : 0, n, 1, false);
      break;
    }
    case OpKind::kAvgPool:
      avg_pool_nhwc(op.conv, a.dims[0], a.dims[1], a.dims[2], a.dims[3], out.dims[1], out.dims[2], in[0], o, op.out_min,
                    op.out_max);
      break;
    case OpKind::kGlobalAvgPool:
      global_avg_pool_nhwc(a.dims[0], a.dims[1] * a.dims[2], a.dims[3], in[0], o, op.out_min, op.out_max);
      break;
    case OpKind::kConvert:
      // Quantizing output: straight from the (float view of the) input.
      if (out.dtype != DType::kF32) {
        store_float(in[0], out);
        return Error::Ok;
      }
      if (o != in[0]) std::memmove(o, in[0], static_cast<size_t>(a.numel()) * 4);
      break;
    default: return Error::Internal;
  }
  if (out.dtype != DType::kF32) store_float(o, out);
  return Error::Ok;
}

// A node's delegate event, named "<kind> #<n>" as the payload's node kinds are counted.
runtime::EventTracerEntry start_event(const Op& op, runtime::EventTracer* tracer) {
  char name[64];  // the tracer copies it
  const char* kind = std::strncmp(op.name, "XNN", 3) == 0 ? op.name + 3 : op.name;
  std::snprintf(name, sizeof(name), "%s #%u", kind, static_cast<unsigned>(op.kind_ordinal));
  return tracer->start_profiling_delegate(name, runtime::kUnsetDelegateDebugIntId);
}

// The op's shapes for this call, its scratch checked against the plan's, its output bound.
Error prepare(const Op& op, Plan& plan, Span<EValue*> args) {
  ET_TRY(infer_shape(op, plan));
  size_t need = 0;
  ET_TRY(scratch_bytes(op, plan, &need));
  ET_CHECK_OR_RETURN(need <= plan.scratch_bytes, InvalidArgument,
                     "XnnpackBackend: node %u (%s) needs %zu bytes of scratch; the plan holds %zu", op.node_index,
                     op.name, need, plan.scratch_bytes);
  return bind_output(op, plan, args);
}

// A depthwise convolution and the pointwise one reading its output (Op::fuse_next), in one call.
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

}  // namespace

Error execute(Plan& plan, Span<EValue*> args, runtime::EventTracer* tracer) {
  const size_t n_ext = plan.inputs.size() + plan.outputs.size();
  ET_CHECK_OR_RETURN(args.size() >= n_ext && args.size() >= plan.num_externs, InvalidArgument,
                     "XnnpackBackend: the call passes %zu values; the graph has %zu inputs and outputs", args.size(),
                     n_ext);
  for (uint32_t vi : plan.inputs) {
    Value& v = plan.values[vi];
    const EValue* arg = args[v.external];
    ET_CHECK_OR_RETURN(arg != nullptr && arg->isTensor(), InvalidArgument,
                       "XnnpackBackend: argument %u of the call is not a tensor", v.external);
    runtime::Tensor t = arg->toTensor();
    ET_CHECK_OR_RETURN(t.scalar_type() == scalar_type_of(v.dtype), InvalidArgument,
                       "XnnpackBackend: argument %u has dtype %d; the graph expects %d", v.external,
                       static_cast<int>(t.scalar_type()), static_cast<int>(scalar_type_of(v.dtype)));
    // The format writes a scalar as [1].
    const bool scalar = t.dim() == 0 && v.rank == 1 && v.max_dims[0] == 1;
    ET_CHECK_OR_RETURN((t.dim() == v.rank || scalar) && t.is_contiguous(), InvalidArgument,
                       "XnnpackBackend: argument %u is a %" PRId64
                       "-D%s tensor; the graph expects a contiguous %d-D one",
                       v.external, t.dim(), t.is_contiguous() ? "" : " non-contiguous", v.rank);
    for (int d = 0; d < v.rank; ++d) v.dims[d] = scalar ? 1 : t.size(d);
    v.data = t.mutable_data_ptr();
  }
  for (uint32_t vi : plan.outputs) {
    const EValue* arg = args[plan.values[vi].external];
    ET_CHECK_OR_RETURN(
        arg != nullptr && arg->isTensor() && arg->toTensor().scalar_type() == scalar_type_of(plan.values[vi].dtype),
        InvalidArgument, "XnnpackBackend: output argument %u is not a tensor of the graph's dtype",
        plan.values[vi].external);
  }
  for (size_t i = 0; i < plan.ops.size(); ++i) {
    const Op& op = plan.ops[i];
    runtime::EventTracerEntry event;
    if (tracer != nullptr) event = start_event(op, tracer);
    ET_TRY(prepare(op, plan, args));
    if (op.fuse_next) {
      // The pair's time is the depthwise node's event; the pointwise node's follows, empty.
      const Op& pw = plan.ops[++i];
      ET_TRY(prepare(pw, plan, args));
      ET_TRY(run_dw_pw(op, pw, plan));
      if (tracer != nullptr) {
        tracer->end_profiling_delegate(event);
        event = start_event(pw, tracer);
      }
    } else {
      ET_TRY(run_op(op, plan));
    }
    if (tracer != nullptr) tracer->end_profiling_delegate(event);
  }
  return Error::Ok;
}

}  // namespace xnnpack
}  // namespace backends
}  // namespace executorch
