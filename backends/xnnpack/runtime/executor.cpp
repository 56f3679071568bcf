// Running a Plan: each op's output shape for the call, then its kernel (ops/<family>.cpp, through the
// OpImpl its define step set). Ops compile() put on the int8 kernels run there (integer
// accumulation, XNNPACK's requantization); data-movement ops run on their operands' own bytes; the
// rest compute in float, quantized operands dequantized into scratch around them and a quantized
// result requantized (round half to even).
#include "backends/xnnpack/runtime/executor.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "backends/xnnpack/runtime/ops/ops.h"
#include "kernels/cpu/quantized.h"

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

// An input of a data-movement op whose element type or quantization differs from the output's is
// converted into scratch first (the exporter folds a quantize or dequantize into these ops).
bool needs_requantize(const Value& in, const Value& out) {
  return in.dtype != out.dtype ||
         (is_quantized(in.dtype) && (in.scale != out.scale || in.zero_point != out.zero_point));
}

}  // namespace

Error infer_shape(const Op& op, Plan& plan) {
  const Value& out = plan.values[op.out];
  // Element types: bytewise ops keep them (and their quantization); Convert changes them; the
  // rest compute in float over any float or int8 operands.
  for (int i = 0; i < op.n_in; ++i) {
    const Value& v = plan.values[op.in[i]];
    if (op.impl->moves_bytes) {
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
  return op.impl->infer(op, plan);
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
  const Value& out = plan.values[op.out];
  for (int i = 0; i < op.n_in; ++i) {
    const Value& v = plan.values[op.in[i]];
    if (op.impl->moves_bytes) {
      if (needs_requantize(v, out)) total += align_up(static_cast<size_t>(v.numel()) * dtype_size(out.dtype));
    } else if (is_quantized(v.dtype)) {
      total += align_up(static_cast<size_t>(v.numel()) * 4);
    }
  }
  if (!op.impl->moves_bytes && is_quantized(out.dtype)) total += align_up(static_cast<size_t>(out.numel()) * 4);
  if (op.impl->workspace_floats != nullptr) total += op.impl->workspace_floats(op, plan) * 4;
  *need = total;
  return Error::Ok;
}

namespace {

// The float view of a value for float-computing ops: itself, or dequantized into scratch.
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

// A bytewise op's inputs in the output's element type: as they are, or converted into scratch
// through float (q_out = round(deq_in(q) / s_out) + zp_out).
void bytes_in(const Op& op, Plan& plan, const void** data) {
  const Value& out = plan.values[op.out];
  const size_t elem = dtype_size(out.dtype);
  uint8_t* s = plan.scratch;
  for (int i = 0; i < op.n_in; ++i) {
    const Value& v = plan.values[op.in[i]];
    data[i] = v.data;
    if (!needs_requantize(v, out)) continue;
    const int64_t n = v.numel();
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
}

Error run_op(const Op& op, Plan& plan) {
  const OpImpl& impl = *op.impl;
  if (op.compute != Compute::kFloat) {
    ET_CHECK_OR_RETURN(impl.run_int8 != nullptr, Internal, "XnnpackBackend: node %u (%s) has no int8 kernel",
                       op.node_index, op.name);
    return impl.run_int8(op, plan);
  }
  Value& out = plan.values[op.out];
  if (impl.moves_bytes) {
    const void* data[5];
    bytes_in(op, plan, data);
    return impl.run_bytes(op, plan, data, dtype_size(out.dtype));
  }
  uint8_t* s = plan.scratch;
  const float* in[5] = {};
  for (int i = 0; i < op.n_in; ++i) in[i] = as_float(plan.values[op.in[i]], &s);
  if (impl.run_float == nullptr) {  // the identity (Convert): the float input, in the output's type
    store_float(in[0], out);
    return Error::Ok;
  }
  float* o;
  if (out.dtype == DType::kF32) {
    o = static_cast<float*>(out.data);
  } else {
    o = reinterpret_cast<float*>(s);
    s += align_up(static_cast<size_t>(out.numel()) * 4);
  }
  ET_TRY(impl.run_float(op, plan, in, o, reinterpret_cast<float*>(s)));
  if (out.dtype != DType::kF32) store_float(o, out);
  return Error::Ok;
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
