// Matrix products: FullyConnected (constant [out, in] filter, or [in, out] with the transpose flag;
// packed for the float, QS8 or QD8 kernels of kernels/cpu where compile() chose them) and
// BatchMatrixMultiply (two run-time operands, batch dims broadcast).
#include <cinttypes>

#include "backends/xnnpack/runtime/ops/ops.h"
#include "kernels/cpu/quantized.h"

namespace executorch {
namespace backends {
namespace xnnpack {
namespace {

using kernels::cpu::ConstMatrix;

Error infer_fc(const Op& op, Plan& plan) {
  const Value& a = plan.values[op.in[0]];
  ET_CHECK_OR_RETURN(a.rank >= 1 && a.dims[a.rank - 1] == op.conv.group_in, InvalidProgram,
                     "XnnpackBackend: node %u (%s) expects rows of %" PRId64 " inputs", op.node_index, op.name,
                     op.conv.group_in);
  int64_t dims[kMaxDims];
  std::copy(a.dims, a.dims + a.rank, dims);
  dims[a.rank - 1] = op.conv.group_out;
  return set_out(op, plan, a.rank, dims);
}

size_t fc_workspace(const Op& op, const Plan& plan) {
  if (op.packed != nullptr) return 0;
  const Value& a = plan.values[op.in[0]];
  return gemm_scratch(a.numel() / std::max<int64_t>(1, op.conv.group_in), op.conv.group_out, op.conv.group_in);
}

// out[rows, oc] = in[rows, ic] * W^T + bias, W [oc, ic] (or [ic, oc] when transposed).
Error run_fc(const Op& op, Plan& plan, const float* const* in, float* o, float* ws) {
  const Value& a = plan.values[op.in[0]];
  const int64_t ic = op.conv.group_in, oc = op.conv.group_out, rows = a.numel() / ic;
  if (op.packed != nullptr) {
    ET_CHECK_OR_RETURN(
        rows == 0 || kernels::cpu::fully_connected_f32(op.packed, rows, in[0], ic, o, oc, op.out_min, op.out_max),
        Internal, "XnnpackBackend: node %u (%s): the packed fully connected layer refused its shapes", op.node_index,
        op.name);
    return Error::Ok;
  }
  if (rows == 0) return Error::Ok;
  const ConstMatrix b =
      (op.flags & kFlagTransposeWeights) ? ConstMatrix{op.weights, oc, 1} : ConstMatrix{op.weights, 1, ic};
  gemm_rows(rows, oc, ic, in[0], ic, b, o, oc, ws);
  bias_clamp(o, rows, oc, oc, op.bias, op.out_min, op.out_max);
  return Error::Ok;
}

// QS8 (int8 rows and weights) or QD8 (float rows the kernel quantizes, int8 / 4-bit weights).
Error run_fc_int8(const Op& op, Plan& plan) {
  namespace cpu = kernels::cpu;
  const Value& a = plan.values[op.in[0]];
  Value& out = plan.values[op.out];
  const int64_t k = op.conv.group_in, n = op.conv.group_out, rows = a.numel() / k;
  if (rows == 0) return Error::Ok;
  const bool ok =
      op.compute == Compute::kQs8
          ? cpu::fully_connected_qs8(op.packed, rows, static_cast<const int8_t*>(a.data), k,
                                     static_cast<int8_t*>(out.data), n, op.qmin, op.qmax)
          : cpu::fully_connected_qd8(op.packed, rows, static_cast<const float*>(a.data), k,
                                     static_cast<float*>(out.data), n, op.out_min, op.out_max, plan.scratch);
  ET_CHECK_OR_RETURN(ok, Internal, "XnnpackBackend: node %u (%s): the int8 kernel refused its shapes", op.node_index,
                     op.name);
  return Error::Ok;
}

Error infer_bmm(const Op& op, Plan& plan) {
  const Value& a = plan.values[op.in[0]];
  const Value& b = plan.values[op.in[1]];
  const int rank = std::max(a.rank, b.rank);
  ET_CHECK_OR_RETURN(a.rank >= 2 && b.rank >= 2, InvalidProgram,
                     "XnnpackBackend: node %u (%s) needs matrices of at least 2 dims", op.node_index, op.name);
  int64_t dims[kMaxDims];
  ET_TRY(broadcast_shape(op, a, b, rank - 2, dims));  // the batch dims
  const bool tb = (op.flags & kFlagTransposeWeights) != 0;
  const int64_t m = a.dims[a.rank - 2], k = a.dims[a.rank - 1];
  const int64_t kb = tb ? b.dims[b.rank - 1] : b.dims[b.rank - 2], n = tb ? b.dims[b.rank - 2] : b.dims[b.rank - 1];
  ET_CHECK_OR_RETURN(k == kb, InvalidProgram, "XnnpackBackend: node %u (%s) multiplies k=%" PRId64 " by k=%" PRId64,
                     op.node_index, op.name, k, kb);
  dims[rank - 2] = m, dims[rank - 1] = n;
  return set_out(op, plan, rank, dims);
}

size_t bmm_workspace(const Op& op, const Plan& plan) {
  const Value& a = plan.values[op.in[0]];
  const Value& out = plan.values[op.out];
  return gemm_scratch(out.dims[out.rank - 2], out.dims[out.rank - 1], a.dims[a.rank - 1]);
}

// Batched A[.., m, k] x B[.., k, n] (B[.., n, k] with the transpose flag), batch dims broadcast.
Error run_bmm(const Op& op, Plan& plan, const float* const* in, float* o, float* ws) {
  const Value& out = plan.values[op.out];
  const int rank = out.rank;
  int64_t ad[kMaxDims], bd[kMaxDims];
  broadcast_dims(rank, plan.values[op.in[0]], plan.values[op.in[1]], ad, bd);
  const int64_t* od = out.dims;
  const int64_t m = od[rank - 2], n = od[rank - 1], k = ad[rank - 1];
  const bool transpose_b = (op.flags & kFlagTransposeWeights) != 0;
  int64_t batches = 1;
  for (int d = 0; d < rank - 2; ++d) batches *= od[d];
  for (int64_t bi = 0; bi < batches; ++bi) {
    // Offsets of this batch in A and B, whose batch dims may be 1 (broadcast).
    int64_t rem = bi, a_off = 0, b_off = 0, a_stride = m * k, b_stride = k * n;
    for (int d = rank - 3; d >= 0; --d) {
      const int64_t idx = rem % od[d];
      rem /= od[d];
      a_off += (ad[d] == 1 ? 0 : idx) * a_stride;
      b_off += (bd[d] == 1 ? 0 : idx) * b_stride;
      a_stride *= ad[d];
      b_stride *= bd[d];
    }
    const ConstMatrix bm = transpose_b ? ConstMatrix{in[1] + b_off, 1, k} : ConstMatrix{in[1] + b_off, n, 1};
    gemm_rows(m, n, k, in[0] + a_off, k, bm, o + bi * m * n, n, ws);
  }
  return Error::Ok;
}

const OpImpl kFullyConnected = {false, infer_fc, fc_workspace, run_fc, nullptr, run_fc_int8};
const OpImpl kBatchMatMul = {false, infer_bmm, bmm_workspace, run_bmm, nullptr, nullptr};

Error define_fc(NodeContext& ctx, Op& op, const fb::XNNFullyConnected* f) {
  op.flags = f->flags();
  ET_CHECK_OR_RETURN((f->flags() & ~kFlagTransposeWeights) == 0, NotImplemented,
                     "XnnpackBackend: node %u (%s) has unsupported flags 0x%x", op.node_index, op.name, f->flags());
  ET_TRY(ctx.input(op, f->input1_id(), "input"));
  ET_TRY(ctx.output(op, f->output_id()));
  uint32_t fi;
  ET_TRY(ctx.lookup(f->filter_id(), op, "filter", &fi));
  const Value& w = ctx.value(fi);
  ET_CHECK_OR_RETURN(w.rank == 2, InvalidProgram, "XnnpackBackend: node %u (%s): the filter is not 2-D", op.node_index,
                     op.name);
  const bool transposed = (f->flags() & kFlagTransposeWeights) != 0;
  const int64_t oc = transposed ? w.max_dims[1] : w.max_dims[0];
  const int64_t ic = transposed ? w.max_dims[0] : w.max_dims[1];
  op.conv.group_in = ic;
  op.conv.group_out = oc;
  return ctx.weights(op, f->filter_id(), f->bias_id(), oc, ic);
}

Error define_bmm(NodeContext& ctx, Op& op, const fb::_XNNNode2x1* n) {
  op.flags = n->flags();
  ET_CHECK_OR_RETURN((n->flags() & ~kFlagTransposeWeights) == 0, NotImplemented,
                     "XnnpackBackend: node %u (%s) has unsupported flags 0x%x", op.node_index, op.name, n->flags());
  return two_inputs(ctx, op, n);
}

}  // namespace

bool define_gemm(NodeContext& ctx, const fb::XNode* node, Op& op, Error* err) {
  using U = fb::XNodeUnion;
  switch (node->xnode_union_type()) {
    case U::XNNFullyConnected:
      op.kind = OpKind::kFullyConnected, op.impl = &kFullyConnected;
      *err = define_fc(ctx, op, node->xnode_union_as_XNNFullyConnected());
      return true;
    case U::XNNBatchMatrixMultiply:
      op.kind = OpKind::kBatchMatMul, op.impl = &kBatchMatMul;
      *err = define_bmm(ctx, op, node->xnode_union_as_XNNBatchMatrixMultiply());
      return true;
    default: return false;
  }
}

}  // namespace xnnpack
}  // namespace backends
}  // namespace executorch
