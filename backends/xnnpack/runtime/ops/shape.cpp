// Data movement: Copy and StaticReshape (the same bytes under new dims), StaticTranspose,
// StaticSlice, StaticConstantPad and Concatenate2..5. They run on the operands' own element type,
// bytewise; an input in another type or quantization is converted to the output's first.
#include <cinttypes>
#include <cstring>

#include "backends/xnnpack/runtime/ops/ops.h"
#include "kernels/cpu/parallel.h"

namespace executorch {
namespace backends {
namespace xnnpack {
namespace {

using kernels::cpu::parallel_for;

// ---- kernels (elements of `elem` bytes) -------------------------------------------------------

void transpose(size_t elem, int rank, const int64_t* in_dims, const int64_t* perm, const void* in, void* out) {
  int64_t in_str[kMaxDims], out_dims[kMaxDims], str[kMaxDims];
  int64_t s = 1, total = 1;
  for (int d = rank - 1; d >= 0; --d) in_str[d] = s, s *= in_dims[d];
  for (int d = 0; d < rank; ++d) out_dims[d] = in_dims[perm[d]], str[d] = in_str[perm[d]], total *= out_dims[d];
  if (total == 0) return;
  // Moving only dims of size 1 leaves the bytes in place (e.g. NHWC [N, 1, 1, C] back to NCHW).
  int64_t prev = -1;
  bool in_order = true;
  for (int d = 0; d < rank && in_order; ++d) {
    if (out_dims[d] == 1) continue;
    in_order = perm[d] > prev;
    prev = perm[d];
  }
  if (in_order) {
    // memmove: a malformed file's memory plan may overlap an argument with the result.
    std::memmove(out, in, static_cast<size_t>(total) * elem);
    return;
  }
  const int64_t inner = rank ? out_dims[rank - 1] : 1, inner_str = rank ? str[rank - 1] : 1;
  const uint8_t* src = static_cast<const uint8_t*>(in);
  uint8_t* dst = static_cast<uint8_t*>(out);
  // A short last output dim (NCHW -> NHWC with 3 channels: lines of 3) makes per-line overhead
  // dominate: walk lines along the input's contiguous dim instead, reading in order and writing
  // with the output's stride for that dim.
  int64_t along = -1;
  for (int d = 0; d + 1 < rank; ++d)
    if (str[d] == 1 && out_dims[d] >= 16) along = d;
  const auto along_lines = [&](auto zero) {
    using T = decltype(zero);
    int64_t out_str[kMaxDims];
    s = 1;
    for (int d = rank - 1; d >= 0; --d) out_str[d] = s, s *= out_dims[d];
    // When `along` is the next-to-last output dim, a line carries all `inner` values of each of
    // its positions, so the output is written in order too.
    const bool tile = along == rank - 2;
    const int64_t len = out_dims[along], ostep = out_str[along], width = tile ? inner : 1;
    parallel_for(0, total / (len * width), std::max<int64_t>(1, kGrain / (len * width)), [&](int64_t l0, int64_t l1) {
      // Odometer over the output dims but `along` (and the last, for a tile), keeping the input
      // and output offsets.
      int64_t idx[kMaxDims] = {}, off = 0, ooff = 0, rem = l0;
      for (int d = rank - 1; d >= 0; --d) {
        if (d == along || (tile && d == rank - 1)) continue;
        idx[d] = rem % out_dims[d], off += idx[d] * str[d], ooff += idx[d] * out_str[d];
        rem /= out_dims[d];
      }
      for (int64_t l = l0; l < l1; ++l) {
        if (l != l0) {
          for (int d = rank - 1; d >= 0; --d) {
            if (d == along || (tile && d == rank - 1)) continue;
            off += str[d], ooff += out_str[d];
            if (++idx[d] < out_dims[d]) break;
            off -= idx[d] * str[d], ooff -= idx[d] * out_str[d];
            idx[d] = 0;
          }
        }
        const T* sp = reinterpret_cast<const T*>(src) + off;
        T* op = reinterpret_cast<T*>(dst) + ooff;
        if (tile) {
          for (int64_t i = 0; i < len; ++i)
            for (int64_t j = 0; j < inner; ++j) op[i * inner + j] = sp[i + j * inner_str];
        } else {
          for (int64_t i = 0; i < len; ++i) op[i * ostep] = sp[i];
        }
      }
    });
  };
  if ((elem == 4 || elem == 1) && inner < 16 && along >= 0) {
    if (elem == 4) {
      along_lines(float{});
    } else {
      along_lines(uint8_t{});
    }
    return;
  }
  parallel_for(0, total / inner, std::max<int64_t>(1, kGrain / std::max<int64_t>(inner, 1)),
               [&](int64_t l0, int64_t l1) {
                 // The outer index of line l0, then stepped like an odometer (no division per line).
                 int64_t idx[kMaxDims] = {}, off = 0, rem = l0;
                 for (int d = rank - 2; d >= 0; --d)
                   idx[d] = rem % out_dims[d], off += idx[d] * str[d], rem /= out_dims[d];
                 for (int64_t l = l0; l < l1; ++l) {
                   if (l != l0) {
                     for (int d = rank - 2; d >= 0; --d) {
                       off += str[d];
                       if (++idx[d] < out_dims[d]) break;
                       off -= idx[d] * str[d];
                       idx[d] = 0;
                     }
                   }
                   uint8_t* o = dst + l * inner * elem;
                   if (elem == 4) {
                     const float* sp = reinterpret_cast<const float*>(src) + off;
                     float* op = reinterpret_cast<float*>(o);
                     for (int64_t i = 0; i < inner; ++i) op[i] = sp[i * inner_str];
                   } else if (elem == 1) {
                     const uint8_t* sp = src + off;
                     for (int64_t i = 0; i < inner; ++i) o[i] = sp[i * inner_str];
                   } else {
                     for (int64_t i = 0; i < inner; ++i)
                       std::memmove(o + i * elem, src + (off + i * inner_str) * elem, elem);
                   }
                 }
               });
}

void slice(size_t elem, int rank, const int64_t* in_dims, const int64_t* offsets, const int64_t* out_dims,
           const void* in, void* out) {
  int64_t in_str[kMaxDims], total = 1, s = 1;
  for (int d = rank - 1; d >= 0; --d) in_str[d] = s, s *= in_dims[d];
  for (int d = 0; d < rank; ++d) total *= out_dims[d];
  if (total == 0) return;
  const int64_t inner = out_dims[rank - 1];
  const uint8_t* src = static_cast<const uint8_t*>(in);
  uint8_t* dst = static_cast<uint8_t*>(out);
  for (int64_t l = 0; l < total / inner; ++l) {
    int64_t rem = l, off = offsets[rank - 1];
    for (int d = rank - 2; d >= 0; --d) off += (rem % out_dims[d] + offsets[d]) * in_str[d], rem /= out_dims[d];
    std::memmove(dst + l * inner * elem, src + off * elem, inner * elem);
  }
}

void pad(size_t elem, int rank, const int64_t* in_dims, const int64_t* before, const int64_t* out_dims,
         const void* value, const void* in, void* out) {
  int64_t total = 1, in_total = 1;
  for (int d = 0; d < rank; ++d) total *= out_dims[d], in_total *= in_dims[d];
  uint8_t* dst = static_cast<uint8_t*>(out);
  for (int64_t i = 0; i < total; ++i) std::memcpy(dst + i * elem, value, elem);
  if (in_total == 0) return;
  int64_t out_str[kMaxDims], s = 1;
  for (int d = rank - 1; d >= 0; --d) out_str[d] = s, s *= out_dims[d];
  const int64_t inner = in_dims[rank - 1];
  const uint8_t* src = static_cast<const uint8_t*>(in);
  for (int64_t l = 0; l < in_total / inner; ++l) {
    int64_t rem = l, off = before[rank - 1];
    for (int d = rank - 2; d >= 0; --d) off += (rem % in_dims[d] + before[d]) * out_str[d], rem /= in_dims[d];
    std::memmove(dst + off * elem, src + l * inner * elem, inner * elem);
  }
}

void concat(size_t elem, int rank, int64_t axis, int count, const int64_t* const* in_dims, const void* const* in,
            void* out) {
  int64_t outer = 1, out_axis = 0;
  for (int d = 0; d < axis; ++d) outer *= in_dims[0][d];
  int64_t inner = 1;
  for (int d = static_cast<int>(axis) + 1; d < rank; ++d) inner *= in_dims[0][d];
  for (int i = 0; i < count; ++i) out_axis += in_dims[i][axis];
  uint8_t* dst = static_cast<uint8_t*>(out);
  for (int64_t o = 0; o < outer; ++o) {
    int64_t at = 0;
    for (int i = 0; i < count; ++i) {
      const int64_t chunk = in_dims[i][axis] * inner * static_cast<int64_t>(elem);
      std::memmove(dst + (o * out_axis * inner) * elem + at, static_cast<const uint8_t*>(in[i]) + o * chunk, chunk);
      at += chunk;
    }
  }
}

// ---- the node kinds -------------------------------------------------------------------------

// Copy (flags 0: same dims) or reshape (dims from params, one of them 0: inferred).
Error infer_copy(const Op& op, Plan& plan) {
  const Value& a = plan.values[op.in[0]];
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
                         "XnnpackBackend: node %u (%s) reshapes into more than 2^63 elements", op.node_index, op.name);
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
                     "XnnpackBackend: node %u (%s) reshapes %" PRId64 " elements into %" PRId64, op.node_index, op.name,
                     numel, known);
  return set_out(op, plan, op.n_params, dims);
}

Error run_copy(const Op& op, Plan& plan, const void* const* in, size_t elem) {
  Value& out = plan.values[op.out];
  if (out.data != in[0]) std::memmove(out.data, in[0], static_cast<size_t>(plan.values[op.in[0]].numel()) * elem);
  return Error::Ok;
}

Error infer_transpose(const Op& op, Plan& plan) {
  const Value& a = plan.values[op.in[0]];
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

Error run_transpose(const Op& op, Plan& plan, const void* const* in, size_t elem) {
  const Value& a = plan.values[op.in[0]];
  transpose(elem, a.rank, a.dims, op.params, in[0], plan.values[op.out].data);
  return Error::Ok;
}

Error infer_slice(const Op& op, Plan& plan) {
  const Value& a = plan.values[op.in[0]];
  ET_CHECK_OR_RETURN(op.n_params == a.rank && a.rank >= 1, InvalidProgram,
                     "XnnpackBackend: node %u (%s) slices %d dims of a %d-D value", op.node_index, op.name, op.n_params,
                     a.rank);
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

Error run_slice(const Op& op, Plan& plan, const void* const* in, size_t elem) {
  const Value& a = plan.values[op.in[0]];
  Value& out = plan.values[op.out];
  slice(elem, a.rank, a.dims, op.params, out.dims, in[0], out.data);
  return Error::Ok;
}

Error infer_pad(const Op& op, Plan& plan) {
  const Value& a = plan.values[op.in[0]];
  ET_CHECK_OR_RETURN(op.n_params == a.rank && a.rank >= 1, InvalidProgram,
                     "XnnpackBackend: node %u (%s) pads %d dims of a %d-D value", op.node_index, op.name, op.n_params,
                     a.rank);
  int64_t dims[kMaxDims];
  for (int d = 0; d < a.rank; ++d) dims[d] = a.dims[d] + op.params[d] + op.params2[d];
  return set_out(op, plan, a.rank, dims);
}

// The padding value (op.alpha) in the output's element type.
Error run_pad(const Op& op, Plan& plan, const void* const* in, size_t elem) {
  const Value& a = plan.values[op.in[0]];
  Value& out = plan.values[op.out];
  uint8_t value[4];
  if (out.dtype == DType::kF32) {
    std::memcpy(value, &op.alpha, 4);
  } else {
    const bool is_signed = out.dtype == DType::kQS8;
    quantize(&op.alpha, 1, out.scale, out.zero_point, is_signed ? -128 : 0, is_signed ? 127 : 255, value, is_signed);
  }
  pad(elem, a.rank, a.dims, op.params, out.dims, value, in[0], out.data);
  return Error::Ok;
}

Error infer_concat(const Op& op, Plan& plan) {
  const Value& a = plan.values[op.in[0]];
  ET_CHECK_OR_RETURN(op.axis < a.rank, InvalidProgram,
                     "XnnpackBackend: node %u (%s) joins along dim %" PRId64 " of %d-D values", op.node_index, op.name,
                     op.axis, a.rank);
  int64_t dims[kMaxDims];
  std::copy(a.dims, a.dims + a.rank, dims);
  for (int i = 1; i < op.n_in; ++i) {
    const Value& v = plan.values[op.in[i]];
    ET_CHECK_OR_RETURN(v.rank == a.rank, InvalidProgram, "XnnpackBackend: node %u (%s) joins values of other ranks",
                       op.node_index, op.name);
    for (int d = 0; d < a.rank; ++d) {
      ET_CHECK_OR_RETURN(d == op.axis || v.dims[d] == a.dims[d], InvalidProgram,
                         "XnnpackBackend: node %u (%s) joins values whose dim %d differs", op.node_index, op.name, d);
    }
    dims[op.axis] += v.dims[op.axis];
  }
  return set_out(op, plan, a.rank, dims);
}

Error run_concat(const Op& op, Plan& plan, const void* const* in, size_t elem) {
  const int64_t* dims[5];
  for (int i = 0; i < op.n_in; ++i) dims[i] = plan.values[op.in[i]].dims;
  concat(elem, plan.values[op.in[0]].rank, op.axis, op.n_in, dims, in, plan.values[op.out].data);
  return Error::Ok;
}

const OpImpl kCopy = {true, infer_copy, nullptr, nullptr, run_copy, nullptr};
const OpImpl kTranspose = {true, infer_transpose, nullptr, nullptr, run_transpose, nullptr};
const OpImpl kSlice = {true, infer_slice, nullptr, nullptr, run_slice, nullptr};
const OpImpl kPad = {true, infer_pad, nullptr, nullptr, run_pad, nullptr};
const OpImpl kConcat = {true, infer_concat, nullptr, nullptr, run_concat, nullptr};

// The published runtime's XNNPACK defines a Copy or a StaticConstantPad on quantized values only with
// the input's scale and zero point equal to the output's (its define call returns invalid_parameter;
// it takes a Clamp or StaticTranspose that requantizes): such a graph is refused here too.
Error same_quantization(NodeContext& ctx, const Op& op) {
  const Value& y = ctx.value(op.out);
  if (y.dtype != DType::kQS8 && y.dtype != DType::kQU8) return Error::Ok;
  const Value& x = ctx.value(op.in[0]);
  ET_CHECK_OR_RETURN(x.dtype == y.dtype && x.scale == y.scale && x.zero_point == y.zero_point, InvalidProgram,
                     "XnnpackBackend: node %u (%s) reads a value quantized at scale %g, zero point %d and writes "
                     "one at scale %g, zero point %d; XNNPACK defines it only with equal quantization (a Convert "
                     "requantizes)",
                     op.node_index, op.name, static_cast<double>(x.scale), static_cast<int>(x.zero_point),
                     static_cast<double>(y.scale), static_cast<int>(y.zero_point));
  return Error::Ok;
}

Error define_copy(NodeContext& ctx, Op& op, const fb::_XNNNode1x1* n) {
  ET_TRY(one_input(ctx, op, n));
  return same_quantization(ctx, op);
}

Error define_reshape(NodeContext& ctx, Op& op, const fb::XNNStaticReshape* n) {
  ET_TRY(dims_param(op, n->new_shape(), op.params, "shape entries"));
  op.flags = 1;  // reshape: dims from params
  return one_input(ctx, op, n);
}

Error define_transpose(NodeContext& ctx, Op& op, const fb::XNNStaticTranspose* n) {
  ET_TRY(dims_param(op, n->perm(), op.params, "permutation entries"));
  return one_input(ctx, op, n);
}

Error define_slice(NodeContext& ctx, Op& op, const fb::XNNStaticSlice* n) {
  ET_TRY(dims_param(op, n->sizes(), op.params2, "slice sizes"));
  const int sizes = op.n_params;
  ET_TRY(dims_param(op, n->offsets(), op.params, "slice offsets"));
  ET_CHECK_OR_RETURN(sizes == op.n_params, InvalidProgram, "XnnpackBackend: node %u (%s) has %d offsets but %d sizes",
                     op.node_index, op.name, op.n_params, sizes);
  return one_input(ctx, op, n);
}

Error define_pad(NodeContext& ctx, Op& op, const fb::XNNStaticConstantPad* n) {
  op.alpha = n->padding_value();
  ET_TRY(dims_param(op, n->post_paddings(), op.params2, "paddings"));
  const int post = op.n_params;
  ET_TRY(dims_param(op, n->pre_paddings(), op.params, "paddings"));
  ET_CHECK_OR_RETURN(post == op.n_params, InvalidProgram,
                     "XnnpackBackend: node %u (%s) has %d pre- but %d post-paddings", op.node_index, op.name,
                     op.n_params, post);
  ET_TRY(one_input(ctx, op, n));
  return same_quantization(ctx, op);
}

Error define_concat(NodeContext& ctx, Op& op, const fb::_XNNCat* n, int count) {
  op.axis = n->axis();
  const uint32_t ids[5] = {n->input1_id(), n->input2_id(), n->input3_id(), n->input4_id(), n->input5_id()};
  for (int i = 0; i < count; ++i) ET_TRY(ctx.input(op, ids[i], "input"));
  return ctx.output(op, n->output_id());
}

}  // namespace

bool define_shape(NodeContext& ctx, const fb::XNode* node, Op& op, Error* err) {
  using U = fb::XNodeUnion;
  switch (node->xnode_union_type()) {
    case U::XNNCopy:
      op.kind = OpKind::kCopy, op.impl = &kCopy;
      *err = define_copy(ctx, op, node->xnode_union_as_XNNCopy());
      return true;
    case U::XNNStaticReshape:
      op.kind = OpKind::kCopy, op.impl = &kCopy;
      *err = define_reshape(ctx, op, node->xnode_union_as_XNNStaticReshape());
      return true;
    case U::XNNStaticTranspose:
      op.kind = OpKind::kTranspose, op.impl = &kTranspose;
      *err = define_transpose(ctx, op, node->xnode_union_as_XNNStaticTranspose());
      return true;
    case U::XNNStaticSlice:
      op.kind = OpKind::kSlice, op.impl = &kSlice;
      *err = define_slice(ctx, op, node->xnode_union_as_XNNStaticSlice());
      return true;
    case U::XNNStaticConstantPad:
      op.kind = OpKind::kPad, op.impl = &kPad;
      *err = define_pad(ctx, op, node->xnode_union_as_XNNStaticConstantPad());
      return true;
    case U::XNNConcatenate2:
      op.kind = OpKind::kConcat, op.impl = &kConcat;
      *err = define_concat(ctx, op, node->xnode_union_as_XNNConcatenate2(), 2);
      return true;
    case U::XNNConcatenate3:
      op.kind = OpKind::kConcat, op.impl = &kConcat;
      *err = define_concat(ctx, op, node->xnode_union_as_XNNConcatenate3(), 3);
      return true;
    case U::XNNConcatenate4:
      op.kind = OpKind::kConcat, op.impl = &kConcat;
      *err = define_concat(ctx, op, node->xnode_union_as_XNNConcatenate4(), 4);
      return true;
    case U::XNNConcatenate5:
      op.kind = OpKind::kConcat, op.impl = &kConcat;
      *err = define_concat(ctx, op, node->xnode_union_as_XNNConcatenate5(), 5);
      return true;
    default: return false;
  }
}

}  // namespace xnnpack
}  // namespace backends
}  // namespace executorch
