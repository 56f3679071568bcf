// Writes into parts of a tensor (the ops stateful programs and KV caches use): copy_/copy,
// index_put(_), index_copy, slice_scatter, select_scatter, scatter, scatter_add, masked_scatter.
// Every index read from a tensor is bounds-checked: a bad cache position is an error, never a
// write outside the destination.
#include "kernels/portable/util/copy.h"
#include "kernels/portable/util/elementwise.h"
#include "kernels/portable/util/kernel_util.h"

namespace executorch {
namespace kernels {
namespace {

// Row-major multi-index of flat position `flat` in `sizes`.
void unflatten(int64_t flat, const int64_t* sizes, size_t n, int64_t* idx) {
  for (size_t d = n; d > 0; --d) {
    idx[d - 1] = sizes[d - 1] > 0 ? flat % sizes[d - 1] : 0;
    flat = sizes[d - 1] > 0 ? flat / sizes[d - 1] : 0;
  }
}

char* element(const Tensor& t, int64_t offset) {
  return static_cast<char*>(t.mutable_data_ptr()) + offset * static_cast<int64_t>(t.element_size());
}

// dst[dst_off] = src[src_off], or += when `accumulate` (same dtype).
void put(const Tensor& src, int64_t src_off, const Tensor& dst, int64_t dst_off, bool accumulate) {
  if (!accumulate) {
    const char* s = element(src, src_off);
    char* d = element(dst, dst_off);
    for (size_t b = 0; b < dst.element_size(); ++b) d[b] = s[b];
    return;
  }
  const ScalarType t = dst.scalar_type();
  void* data = dst.mutable_data_ptr();
  if (is_integral(t, true)) {
    // Through uint64: integer sums wrap as torch's do, with no signed overflow.
    const uint64_t sum = static_cast<uint64_t>(load_int(data, t, dst_off)) +
                         static_cast<uint64_t>(load_int(src.const_data_ptr(), t, src_off));
    store_int(data, t, dst_off, static_cast<int64_t>(sum));
  } else {
    store_double(data, t, dst_off, load_double(data, t, dst_off) + load_double(src.const_data_ptr(), t, src_off));
  }
}

// `src` seen with the shape `sizes` (torch broadcasting: trailing dims line up, size 1 repeats).
bool broadcast_view(const Tensor& src, const int64_t* sizes, size_t n, View* out) {
  const size_t sn = static_cast<size_t>(src.dim());
  if (sn > n) return false;
  View v = view_of(src);
  v.ndim = n;
  for (size_t d = 0; d < n; ++d) {
    const size_t lead = n - sn;
    if (d < lead) {
      v.sizes[d] = sizes[d];
      v.strides[d] = 0;
      continue;
    }
    const int64_t s = src.size(static_cast<int64_t>(d - lead));
    if (s != sizes[d] && s != 1) return false;
    v.sizes[d] = sizes[d];
    v.strides[d] = s == 1 ? 0 : src.stride(static_cast<int64_t>(d - lead));
  }
  *out = v;
  return true;
}

// out <- src broadcast to out's shape, converted to out's dtype.
bool assign_broadcast(KernelRuntimeContext& ctx, const Tensor& src, const Tensor& out, const char* op) {
  int64_t sizes[kMaxDim];
  const size_t n = sizes_of(out, sizes);
  View sv;
  if (!broadcast_view(src, sizes, n, &sv)) {
    ET_LOG(Error, "%s: the source does not broadcast to the destination's shape", op);
    ctx.fail(Error::InvalidArgument);
    return false;
  }
  if (!is_supported_dtype(src.scalar_type()) || !is_supported_dtype(out.scalar_type())) {
    if (src.scalar_type() != out.scalar_type()) {
      ET_LOG(Error, "%s: cannot convert %s to %s", op, runtime::scalar_type_name(src.scalar_type()),
             runtime::scalar_type_name(out.scalar_type()));
      ctx.fail(Error::InvalidType);
      return false;
    }
  }
  copy_view(sv, view_of(out));
  return true;
}

// out <- self (resized to self's shape, same dtype), unless they are one tensor.
bool start_from(KernelRuntimeContext& ctx, const Tensor& self, const Tensor& out, const char* op) {
  if (self.scalar_type() != out.scalar_type()) {
    ET_LOG(Error, "%s: out has dtype %s, self %s", op, runtime::scalar_type_name(out.scalar_type()),
           runtime::scalar_type_name(self.scalar_type()));
    ctx.fail(Error::InvalidType);
    return false;
  }
  if (!resize_out(ctx, out, self)) return false;
  if (out.const_data_ptr() != self.const_data_ptr()) copy_view(view_of(self), view_of(out));
  return true;
}

// copy_(self, src, non_blocking): writes src into self in place (a mutated buffer's write-back).
void copy_inplace(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Tensor, Tag::Bool}), InvalidArgument);
  const Tensor self = args[0]->toTensor(), src = args[1]->toTensor();
  if (self.const_data_ptr() == src.const_data_ptr() && same_shape(self, src) && self.scalar_type() == src.scalar_type())
    return;
  assign_broadcast(ctx, src, self, "copy_");
}

// copy.out(self, src, non_blocking, *, out): self's shape and dtype, src's values.
void copy_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Tensor, Tag::Bool, Tag::Tensor}), InvalidArgument);
  const Tensor self = args[0]->toTensor(), src = args[1]->toTensor(), out = args[3]->toTensor();
  ET_KERNEL_CHECK_MSG(ctx, self.scalar_type() == out.scalar_type(), InvalidType, , "copy.out: dtype mismatch");
  if (!resize_out(ctx, out, self)) return;
  assign_broadcast(ctx, src, out, "copy.out");
}

// out[indices] = values (or +=): the index tensors broadcast together; the indexed dims are
// replaced by that shape (in place when adjacent, else in front), and values broadcast to the result.
void index_put(KernelRuntimeContext& ctx, const Tensor& self, Span<std::optional<Tensor>> indices, const Tensor& values,
               bool accumulate, const Tensor& out) {
  ET_KERNEL_CHECK_MSG(ctx, static_cast<int64_t>(indices.size()) <= self.dim(), InvalidArgument, ,
                      "index_put: more indices than dims");
  ET_KERNEL_CHECK_MSG(ctx, values.scalar_type() == self.scalar_type(), InvalidType, ,
                      "index_put: values must have self's dtype");
  ET_KERNEL_CHECK_MSG(ctx, !accumulate || is_supported_dtype(self.scalar_type()), InvalidType, ,
                      "index_put: accumulate is not supported for this dtype");
  const Tensor* idx[kMaxDim];
  size_t nidx = 0;
  int64_t first = -1, last = -1;
  int64_t bsizes[kMaxDim];
  size_t bn = 0;
  for (size_t i = 0; i < indices.size(); ++i) {
    if (!indices[i]) continue;
    ET_KERNEL_CHECK_MSG(ctx, index_dtype(*indices[i]), NotSupported, ,
                        "index_put: only int32/int64 index tensors are supported (not bool masks)");
    const Tensor& t = *indices[i];
    // Broadcast this index's shape into the running one.
    const size_t tn = static_cast<size_t>(t.dim());
    const size_t rn = tn > bn ? tn : bn;
    int64_t merged[kMaxDim];
    for (size_t j = 0; j < rn; ++j) {
      const int64_t a = j + bn >= rn ? bsizes[j + bn - rn] : 1;
      const int64_t b = j + tn >= rn ? t.size(static_cast<int64_t>(j + tn - rn)) : 1;
      ET_KERNEL_CHECK_MSG(ctx, a == b || a == 1 || b == 1, InvalidArgument, ,
                          "index_put: index tensors do not broadcast");
      merged[j] = a == 1 ? b : a;
    }
    for (size_t j = 0; j < rn; ++j) bsizes[j] = merged[j];
    bn = rn;
    idx[nidx++] = &indices[i].value();
    if (first < 0) first = static_cast<int64_t>(i);
    last = static_cast<int64_t>(i);
  }
  ET_KERNEL_CHECK_MSG(ctx, nidx > 0, InvalidArgument, , "index_put: no index tensors");
  const bool adjacent = last - first + 1 == static_cast<int64_t>(nidx);
  const int64_t lead = adjacent ? first : 0;
  int64_t rsizes[kMaxDim];
  size_t rn = 0;
  ET_KERNEL_CHECK_MSG(ctx, bn + static_cast<size_t>(self.dim()) - nidx <= kMaxDim, InvalidArgument, ,
                      "index_put: indexed shape has too many dims");
  for (int64_t d = 0; d < lead; ++d) rsizes[rn++] = self.size(d);
  for (size_t j = 0; j < bn; ++j) rsizes[rn++] = bsizes[j];
  for (int64_t d = lead; d < self.dim(); ++d) {
    const bool indexed = d < static_cast<int64_t>(indices.size()) && indices[d].has_value();
    if (!indexed) rsizes[rn++] = self.size(d);
  }
  View vv;
  ET_KERNEL_CHECK_MSG(ctx, broadcast_view(values, rsizes, rn, &vv), InvalidArgument, ,
                      "index_put: values do not broadcast to the indexed shape");
  if (!start_from(ctx, self, out, "index_put")) return;
  int64_t total = 1;
  for (size_t j = 0; j < rn; ++j) total *= rsizes[j];
  int64_t ridx[kMaxDim];
  for (int64_t k = 0; k < total; ++k) {
    unflatten(k, rsizes, rn, ridx);
    int64_t out_off = 0, val_off = 0, rest = lead + static_cast<int64_t>(bn);
    size_t opnd = 0;
    for (size_t j = 0; j < rn; ++j) val_off += ridx[j] * vv.strides[j];
    for (int64_t d = 0; d < self.dim(); ++d) {
      int64_t pos;
      const bool indexed = d < static_cast<int64_t>(indices.size()) && indices[d].has_value();
      if (indexed) {
        const Tensor& t = *idx[opnd++];
        int64_t off = 0;
        const size_t tn = static_cast<size_t>(t.dim());
        for (size_t j = 0; j < tn; ++j) {
          const int64_t s = t.size(static_cast<int64_t>(j));
          off += (s == 1 ? 0 : ridx[lead + (bn - tn) + j]) * t.stride(static_cast<int64_t>(j));
        }
        const int64_t raw = load_int(t.const_data_ptr(), t.scalar_type(), off);
        ET_KERNEL_CHECK_MSG(ctx, wrap_index(raw, self.size(d), &pos), InvalidArgument, ,
                            "index_put: index %lld is out of range for dim %lld of size %lld",
                            static_cast<long long>(raw), static_cast<long long>(d),
                            static_cast<long long>(self.size(d)));
      } else if (d < lead) {
        pos = ridx[d];
      } else {
        pos = ridx[rest++];
      }
      out_off += pos * out.stride(d);
    }
    put(values, val_off, out, out_off, accumulate);
  }
}

// index_put.out(self, indices, values, accumulate, *, out)
void index_put_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::ListOptionalTensor, Tag::Tensor, Tag::Bool, Tag::Tensor}),
                  InvalidArgument);
  index_put(ctx, args[0]->toTensor(), args[1]->toListOptionalTensor(), args[2]->toTensor(), args[3]->toBool(),
            args[4]->toTensor());
}

// index_put_(self, indices, values, accumulate): the same, into self.
void index_put_inplace(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::ListOptionalTensor, Tag::Tensor, Tag::Bool}), InvalidArgument);
  const Tensor self = args[0]->toTensor();
  index_put(ctx, self, args[1]->toListOptionalTensor(), args[2]->toTensor(), args[3]->toBool(), self);
}

// A view of `t` with dim `d` fixed at `i` (one dim fewer).
View drop_dim(const Tensor& t, int64_t d, int64_t i) {
  View v = view_at(t, i * t.stride(d));
  for (size_t j = static_cast<size_t>(d); j + 1 < v.ndim; ++j) {
    v.sizes[j] = v.sizes[j + 1];
    v.strides[j] = v.strides[j + 1];
  }
  v.ndim -= 1;
  return v;
}

// index_copy.out(self, dim, index, source, *, out): out.select(dim, index[k]) = source.select(dim, k).
void index_copy_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Int, Tag::Tensor, Tag::Tensor, Tag::Tensor}), InvalidArgument);
  const Tensor self = args[0]->toTensor(), index = args[2]->toTensor(), src = args[3]->toTensor(),
               out = args[4]->toTensor();
  int64_t d;
  ET_KERNEL_CHECK_MSG(
      ctx, self.dim() > 0 && normalize_dim(args[1]->toInt(), self.dim(), &d) && index_dtype(index) && index.dim() <= 1,
      InvalidArgument, , "index_copy: bad dim or index (needs a 1-D int tensor)");
  ET_KERNEL_CHECK_MSG(
      ctx, src.scalar_type() == self.scalar_type() && src.dim() == self.dim() && src.size(d) == index.numel(),
      InvalidArgument, , "index_copy: source must match self with index.numel() rows in dim");
  for (int64_t j = 0; j < self.dim(); ++j)
    ET_KERNEL_CHECK_MSG(ctx, j == d || src.size(j) == self.size(j), InvalidArgument, ,
                        "index_copy: source and self differ outside dim");
  if (!start_from(ctx, self, out, "index_copy")) return;
  for (int64_t k = 0; k < index.numel(); ++k) {
    const int64_t raw = load_int(index.const_data_ptr(), index.scalar_type(), k);
    int64_t i;
    ET_KERNEL_CHECK_MSG(ctx, wrap_index(raw, self.size(d), &i), InvalidArgument, ,
                        "index_copy: index %lld is out of range for a dim of size %lld", static_cast<long long>(raw),
                        static_cast<long long>(self.size(d)));
    copy_view(drop_dim(src, d, k), drop_dim(out, d, i));
  }
}

// slice_scatter.out(self, src, dim, start?, end?, step, *, out): out[start:end:step] along dim = src.
void slice_scatter_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Tensor, Tag::Int, Tag::None, Tag::None, Tag::Int, Tag::Tensor}),
                  InvalidArgument);
  const Tensor self = args[0]->toTensor(), src = args[1]->toTensor(), out = args[6]->toTensor();
  int64_t d;
  ET_KERNEL_CHECK_MSG(ctx, self.dim() > 0 && normalize_dim(args[2]->toInt(), self.dim(), &d), InvalidArgument, ,
                      "slice_scatter: dim out of range");
  ET_KERNEL_CHECK_MSG(ctx, (args[3]->isNone() || args[3]->isInt()) && (args[4]->isNone() || args[4]->isInt()),
                      InvalidArgument, , "slice_scatter: start and end must be ints or None");
  const int64_t n = self.size(d), step = args[5]->toInt();
  ET_KERNEL_CHECK_MSG(ctx, step > 0, InvalidArgument, , "slice_scatter: step must be positive");
  // Python slice bounds: negative counts from the end, then clamped to [0, n].
  auto clamp = [n](int64_t v) { return v < 0 ? (v + n < 0 ? 0 : v + n) : (v > n ? n : v); };
  const int64_t start = args[3]->isNone() ? 0 : clamp(args[3]->toInt());
  int64_t end = args[4]->isNone() ? n : clamp(args[4]->toInt());
  if (end < start) end = start;
  // end - start <= n, so this cannot overflow whatever the step (any positive int64).
  const int64_t len = end == start ? 0 : (end - start - 1) / step + 1;
  ET_KERNEL_CHECK_MSG(ctx, src.scalar_type() == self.scalar_type() && src.dim() == self.dim(), InvalidArgument, ,
                      "slice_scatter: src must have self's dtype and rank");
  for (int64_t j = 0; j < self.dim(); ++j)
    ET_KERNEL_CHECK_MSG(ctx, src.size(j) == (j == d ? len : self.size(j)), InvalidArgument, ,
                        "slice_scatter: src's shape does not match the slice");
  if (!start_from(ctx, self, out, "slice_scatter")) return;
  View dst = view_at(out, start * out.stride(d));
  dst.sizes[d] = len;
  if (len > 1) dst.strides[d] *= step;  // two or more elements: step < n, so the product fits
  copy_view(view_of(src), dst);
}

// select_scatter.out(self, src, dim, index, *, out): out.select(dim, index) = src.
void select_scatter_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Tensor, Tag::Int, Tag::Int, Tag::Tensor}), InvalidArgument);
  const Tensor self = args[0]->toTensor(), src = args[1]->toTensor(), out = args[4]->toTensor();
  int64_t d, i;
  ET_KERNEL_CHECK_MSG(ctx, self.dim() > 0 && normalize_dim(args[2]->toInt(), self.dim(), &d), InvalidArgument, ,
                      "select_scatter: dim out of range");
  ET_KERNEL_CHECK_MSG(ctx, wrap_index(args[3]->toInt(), self.size(d), &i), InvalidArgument, ,
                      "select_scatter: index %lld is out of range for a dim of size %lld",
                      static_cast<long long>(args[3]->toInt()), static_cast<long long>(self.size(d)));
  ET_KERNEL_CHECK_MSG(ctx, src.scalar_type() == self.scalar_type() && src.dim() + 1 == self.dim(), InvalidArgument, ,
                      "select_scatter: src must have self's dtype and one dim fewer");
  for (int64_t j = 0; j < src.dim(); ++j)
    ET_KERNEL_CHECK_MSG(ctx, src.size(j) == self.size(j < d ? j : j + 1), InvalidArgument, ,
                        "select_scatter: src's shape does not match the selected slice");
  if (!start_from(ctx, self, out, "select_scatter")) return;
  copy_view(view_of(src), drop_dim(out, d, i));
}

// scatter along dim: out[..index[p]..] = src[p] (or value, or += src[p]) for every position p of index.
void scatter(KernelRuntimeContext& ctx, Args args, const Tensor* src, const EValue* value, bool add) {
  const Tensor self = args[0]->toTensor(), index = args[2]->toTensor(), out = args[4]->toTensor();
  int64_t d;
  ET_KERNEL_CHECK_MSG(ctx,
                      normalize_dim(args[1]->toInt(), self.dim(), &d) && index_dtype(index) &&
                          (index.dim() == self.dim() || index.numel() == 0),
                      InvalidArgument, , "scatter: index must be an int tensor of self's rank");
  if (src != nullptr) {
    ET_KERNEL_CHECK_MSG(ctx, src->scalar_type() == self.scalar_type() && src->dim() == self.dim(), InvalidArgument, ,
                        "scatter: src must have self's dtype and rank");
    for (int64_t j = 0; j < index.dim(); ++j)
      ET_KERNEL_CHECK_MSG(ctx, index.size(j) <= src->size(j), InvalidArgument, , "scatter: index is larger than src");
  }
  for (int64_t j = 0; j < index.dim(); ++j)
    ET_KERNEL_CHECK_MSG(ctx, j == d || index.size(j) <= self.size(j), InvalidArgument, ,
                        "scatter: index is larger than self outside dim");
  ET_KERNEL_CHECK_MSG(ctx, !add || is_supported_dtype(self.scalar_type()), InvalidType, ,
                      "scatter_add: dtype not supported");
  ET_KERNEL_CHECK_MSG(ctx, value == nullptr || is_supported_dtype(self.scalar_type()), InvalidType, ,
                      "scatter.value: dtype not supported");
  if (!start_from(ctx, self, out, "scatter")) return;
  int64_t sizes[kMaxDim], at[kMaxDim];
  const size_t n = sizes_of(index, sizes);
  const int64_t dim_size = self.dim() > 0 ? self.size(d) : 1;
  for (int64_t k = 0; k < index.numel(); ++k) {
    unflatten(k, sizes, n, at);
    int64_t io = 0, so = 0, oo = 0;
    for (size_t j = 0; j < n; ++j) {
      io += at[j] * index.stride(static_cast<int64_t>(j));
      if (src != nullptr) so += at[j] * src->stride(static_cast<int64_t>(j));
    }
    const int64_t raw = load_int(index.const_data_ptr(), index.scalar_type(), io);
    int64_t pos;
    ET_KERNEL_CHECK_MSG(ctx, wrap_index(raw, dim_size, &pos), InvalidArgument, ,
                        "scatter: index %lld is out of range for a dim of size %lld", static_cast<long long>(raw),
                        static_cast<long long>(dim_size));
    for (size_t j = 0; j < n; ++j)
      oo += (static_cast<int64_t>(j) == d ? pos : at[j]) * out.stride(static_cast<int64_t>(j));
    if (src != nullptr) {
      put(*src, so, out, oo, add);
    } else if (value->isInt() && is_integral(out.scalar_type(), true)) {
      store_int(out.mutable_data_ptr(), out.scalar_type(), oo, value->toInt());
    } else {
      store_double(out.mutable_data_ptr(), out.scalar_type(), oo, value->toScalarDouble());
    }
  }
}

// scatter.src_out(self, dim, index, src, *, out) / scatter_add.out(self, dim, index, src, *, out)
void scatter_src_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Int, Tag::Tensor, Tag::Tensor, Tag::Tensor}), InvalidArgument);
  const Tensor src = args[3]->toTensor();
  scatter(ctx, args, &src, nullptr, false);
}
void scatter_add_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Int, Tag::Tensor, Tag::Tensor, Tag::Tensor}), InvalidArgument);
  const Tensor src = args[3]->toTensor();
  scatter(ctx, args, &src, nullptr, true);
}
// scatter.value_out(self, dim, index, value, *, out)
void scatter_value_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Int, Tag::Tensor, Tag::ListScalar, Tag::Tensor}),
                  InvalidArgument);
  scatter(ctx, args, nullptr, args[3], false);
}

// masked_scatter.out(self, mask, source, *, out): self (broadcast with mask) with the elements
// where mask holds replaced, in row-major order, by source's elements taken in its row-major order.
void masked_scatter_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Tensor, Tag::Tensor, Tag::Tensor}), InvalidArgument);
  const Tensor self = args[0]->toTensor(), mask = args[1]->toTensor(), source = args[2]->toTensor(),
               out = args[3]->toTensor();
  ET_KERNEL_CHECK_MSG(ctx, is_mask_dtype(mask), InvalidType, , "masked_scatter: the mask must be bool, got %s",
                      runtime::scalar_type_name(mask.scalar_type()));
  ET_KERNEL_CHECK_MSG(ctx, self.scalar_type() == out.scalar_type() && source.scalar_type() == out.scalar_type(),
                      InvalidType, , "masked_scatter: self, source and out must have one dtype");
  ET_KERNEL_CHECK_MSG(ctx, source.is_contiguous(), NotSupported, , "masked_scatter: source must be contiguous");
  const Operand ops[2] = {tensor_operand(self), tensor_operand(mask)};
  Walk w;
  ET_KERNEL_CHECK_MSG(ctx, plan_broadcast_walk(ops, 2, &w), InvalidArgument, ,
                      "masked_scatter: self and mask shapes do not broadcast");
  if (!resize_out(ctx, out, {w.sizes, w.ndim})) return;
  ET_KERNEL_CHECK_MSG(ctx, out.is_contiguous(), NotSupported, , "masked_scatter: the output must be contiguous");
  const uint8_t* m = static_cast<const uint8_t*>(mask.const_data_ptr());
  int64_t needed = 0;
  walk(w, [&](int64_t, const int64_t* io) { needed += m[io[1]] != 0; });
  ET_KERNEL_CHECK_MSG(ctx, needed <= source.numel(), InvalidArgument, ,
                      "masked_scatter: the mask selects %lld elements, source has only %lld",
                      static_cast<long long>(needed), static_cast<long long>(source.numel()));
  int64_t k = 0;
  walk(w, [&](int64_t pos, const int64_t* io) {
    if (m[io[1]] != 0)
      put(source, k++, out, pos, false);
    else
      put(self, io[0], out, pos, false);
  });
}

}  // namespace

// Registrations are generated from kernels/portable/functions.yaml (only the selected kernels).
#include "portable_registrations/op_scatter.inc"

}  // namespace kernels
}  // namespace executorch
