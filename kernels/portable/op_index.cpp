// Indexing and ordering: index_select, embedding, gather, index.Tensor, sort, topk, and the ops
// whose output size depends on the data: nonzero, masked_select, repeat_interleave.
#include <cmath>

#include "kernels/portable/util/copy.h"
#include "kernels/portable/util/elementwise.h"
#include "kernels/portable/util/kernel_util.h"

namespace executorch {
namespace kernels {
namespace {

// index_select.out(self, dim, index, *, out)
void index_select_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Int, Tag::Tensor, Tag::Tensor}), InvalidArgument);
  const Tensor in = args[0]->toTensor(), index = args[2]->toTensor(), out = args[3]->toTensor();
  int64_t d;
  ET_KERNEL_CHECK_MSG(ctx, normalize_dim(args[1]->toInt(), in.dim(), &d) && index_dtype(index) && index.dim() <= 1,
                      InvalidArgument, , "index_select: bad dim or index (needs a 1-D int tensor)");
  ET_KERNEL_CHECK_MSG(ctx, in.scalar_type() == out.scalar_type(), InvalidType, , "index_select: dtype mismatch");
  int64_t sizes[kMaxDim];
  const size_t n = sizes_of(in, sizes);
  const int64_t count = index.numel();
  if (in.dim() > 0) sizes[d] = count;
  if (!resize_out(ctx, out, {sizes, n})) return;
  const int64_t dim_size = in.dim() > 0 ? in.size(d) : 1;
  const View ov = view_of(out);
  for (int64_t k = 0; k < count; ++k) {
    int64_t i;
    ET_KERNEL_CHECK_MSG(ctx, wrap_index(load_int(index.const_data_ptr(), index.scalar_type(), k), dim_size, &i),
                        InvalidArgument, , "index_select: index out of range");
    if (in.dim() == 0) {
      copy_view(view_of(in), ov);
      continue;
    }
    View src = view_at(in, i * in.stride(d));
    src.sizes[d] = 1;
    View dst = ov;
    dst.data = static_cast<const char*>(ov.data) + k * ov.strides[d] * static_cast<int64_t>(out.element_size());
    dst.sizes[d] = 1;
    copy_view(src, dst);
  }
}

// embedding.out(weight, indices, padding_idx, scale_grad_by_freq, sparse, *, out)
void embedding_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Tensor, Tag::Int, Tag::Bool, Tag::Bool, Tag::Tensor}),
                  InvalidArgument);
  const Tensor w = args[0]->toTensor(), idx = args[1]->toTensor(), out = args[5]->toTensor();
  ET_KERNEL_CHECK_MSG(ctx, w.dim() == 2 && index_dtype(idx) && idx.dim() < static_cast<int64_t>(kMaxDim),
                      InvalidArgument, , "embedding: needs a 2-D weight and int indices");
  ET_KERNEL_CHECK_MSG(ctx, w.scalar_type() == out.scalar_type(), InvalidType, , "embedding: dtype mismatch");
  int64_t sizes[kMaxDim];
  const size_t n = sizes_of(idx, sizes);
  sizes[n] = w.size(1);
  if (!resize_out(ctx, out, {sizes, n + 1})) return;
  ET_KERNEL_CHECK_MSG(ctx, out.is_contiguous(), NotSupported, , "embedding: output must be contiguous");
  View dst = view_of(out);
  dst.ndim = 1;
  dst.sizes[0] = w.size(1);
  dst.strides[0] = 1;
  for (int64_t k = 0; k < idx.numel(); ++k) {
    const int64_t raw = load_int(idx.const_data_ptr(), idx.scalar_type(), k);
    ET_KERNEL_CHECK_MSG(ctx, raw >= 0 && raw < w.size(0), InvalidArgument, ,
                        "embedding: index %lld out of range [0, %lld)", static_cast<long long>(raw),
                        static_cast<long long>(w.size(0)));
    View src = view_at(w, raw * w.stride(0));
    src.ndim = 1;
    src.sizes[0] = w.size(1);
    src.strides[0] = w.stride(1);
    View d = dst;
    d.data = static_cast<const char*>(dst.data) + k * w.size(1) * static_cast<int64_t>(out.element_size());
    copy_view(src, d);
  }
}

// Row-major multi-index of flat position `flat` in `sizes`.
void unflatten(int64_t flat, const int64_t* sizes, size_t n, int64_t* idx) {
  for (size_t d = n; d > 0; --d) {
    idx[d - 1] = sizes[d - 1] > 0 ? flat % sizes[d - 1] : 0;
    flat = sizes[d - 1] > 0 ? flat / sizes[d - 1] : 0;
  }
}

// Copies element `src_off` of `in` to element `dst_off` of `out` (same dtype).
void copy_element(const Tensor& in, int64_t src_off, const Tensor& out, int64_t dst_off) {
  const size_t es = in.element_size();
  const char* s = static_cast<const char*>(in.const_data_ptr()) + src_off * static_cast<int64_t>(es);
  char* d = static_cast<char*>(out.mutable_data_ptr()) + dst_off * static_cast<int64_t>(es);
  for (size_t b = 0; b < es; ++b) d[b] = s[b];
}

// gather.out(self, dim, index, sparse_grad, *, out): out[i][j] = self[i][index[i][j]] along dim.
void gather_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Int, Tag::Tensor, Tag::Bool, Tag::Tensor}), InvalidArgument);
  const Tensor in = args[0]->toTensor(), index = args[2]->toTensor(), out = args[4]->toTensor();
  int64_t d;
  ET_KERNEL_CHECK_MSG(ctx,
                      normalize_dim(args[1]->toInt(), in.dim(), &d) && index_dtype(index) &&
                          (index.dim() == in.dim() || index.numel() == 0),
                      InvalidArgument, , "gather: index must be an int tensor of the input's rank");
  ET_KERNEL_CHECK_MSG(ctx, in.scalar_type() == out.scalar_type(), InvalidType, , "gather: dtype mismatch");
  for (int64_t i = 0; i < in.dim(); ++i)
    ET_KERNEL_CHECK_MSG(ctx, i == d || index.size(i) <= in.size(i), InvalidArgument, ,
                        "gather: index larger than the input outside dim");
  if (!resize_out(ctx, out, index)) return;
  int64_t sizes[kMaxDim], idx[kMaxDim];
  const size_t n = sizes_of(index, sizes);
  for (int64_t k = 0; k < index.numel(); ++k) {
    unflatten(k, sizes, n, idx);
    int64_t io = 0, ii = 0, oo = 0;
    for (size_t j = 0; j < n; ++j) {
      io += idx[j] * index.stride(j);
      oo += idx[j] * out.stride(j);
    }
    int64_t pos;
    ET_KERNEL_CHECK_MSG(
        ctx, wrap_index(load_int(index.const_data_ptr(), index.scalar_type(), io), in.dim() > 0 ? in.size(d) : 1, &pos),
        InvalidArgument, , "gather: index out of range");
    for (size_t j = 0; j < n; ++j) ii += (static_cast<int64_t>(j) == d ? pos : idx[j]) * in.stride(j);
    copy_element(in, ii, out, oo);
  }
}

// index.Tensor_out(self, indices, *, out): advanced indexing with int index tensors.
void index_tensor_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::ListOptionalTensor, Tag::Tensor}), InvalidArgument);
  const Tensor in = args[0]->toTensor(), out = args[2]->toTensor();
  const Span<std::optional<Tensor>> indices = args[1]->toListOptionalTensor();
  ET_KERNEL_CHECK_MSG(ctx, static_cast<int64_t>(indices.size()) <= in.dim(), InvalidArgument, ,
                      "index: more indices than dims");
  ET_KERNEL_CHECK_MSG(ctx, in.scalar_type() == out.scalar_type(), InvalidType, , "index: dtype mismatch");
  Operand ops[kMaxDim];
  size_t nidx = 0;
  int64_t first = -1, last = -1;
  for (size_t i = 0; i < indices.size(); ++i) {
    if (!indices[i]) continue;
    ET_KERNEL_CHECK_MSG(ctx, index_dtype(*indices[i]), NotSupported, ,
                        "index: only int32/int64 index tensors are supported (not bool masks)");
    ops[nidx++] = tensor_operand(*indices[i]);
    if (first < 0) first = static_cast<int64_t>(i);
    last = static_cast<int64_t>(i);
  }
  ET_KERNEL_CHECK_MSG(ctx, nidx > 0, InvalidArgument, , "index: no index tensors");
  int64_t bsizes[kMaxDim];
  size_t bn = 0;
  ET_KERNEL_CHECK_MSG(ctx, broadcast_shape(ops, nidx, bsizes, &bn), InvalidArgument, ,
                      "index: index tensors do not broadcast");
  const bool adjacent = last - first + 1 == static_cast<int64_t>(nidx);
  // Output dims: (before, broadcast, after) when the indexed dims are adjacent, else
  // (broadcast, every unindexed dim).
  int64_t osizes[kMaxDim];
  size_t on = 0;
  const int64_t lead = adjacent ? first : 0;
  for (int64_t d = 0; d < lead; ++d) osizes[on++] = in.size(d);
  ET_KERNEL_CHECK_MSG(ctx, bn + static_cast<size_t>(in.dim()) - nidx <= kMaxDim, InvalidArgument, ,
                      "index: result rank too large");
  for (size_t j = 0; j < bn; ++j) osizes[on++] = bsizes[j];
  for (int64_t d = lead; d < in.dim(); ++d) {
    const bool indexed = d < static_cast<int64_t>(indices.size()) && indices[d].has_value();
    if (!indexed) osizes[on++] = in.size(d);
  }
  if (!resize_out(ctx, out, {osizes, on})) return;
  int64_t oidx[kMaxDim], bidx[kMaxDim];
  for (int64_t k = 0; k < out.numel(); ++k) {
    unflatten(k, osizes, on, oidx);
    for (size_t j = 0; j < bn; ++j) bidx[j] = oidx[lead + j];
    int64_t in_off = 0, out_off = 0, rest = static_cast<int64_t>(lead + bn), opnd = 0;
    for (size_t j = 0; j < on; ++j) out_off += oidx[j] * out.stride(j);
    for (int64_t d = 0; d < in.dim(); ++d) {
      int64_t pos;
      const bool indexed = d < static_cast<int64_t>(indices.size()) && indices[d].has_value();
      if (indexed) {
        const Operand& o = ops[opnd++];
        int64_t off = 0;
        for (size_t j = 0; j < o.ndim; ++j) {
          const size_t bj = bn - o.ndim + j;
          off += (o.sizes[j] == 1 ? 0 : bidx[bj]) * o.strides[j];
        }
        ET_KERNEL_CHECK_MSG(ctx, wrap_index(load_int(o.data, o.type, off), in.size(d), &pos), InvalidArgument, ,
                            "index: index out of range");
      } else if (d < lead) {
        pos = oidx[d];
      } else {
        pos = oidx[rest++];
      }
      in_off += pos * in.stride(d);
    }
    copy_element(in, in_off, out, out_off);
  }
}

// Order of (value, index) pairs: `descending` by value, NaN above everything, ties by index.
template <typename T>
bool before(T va, int64_t ia, T vb, int64_t ib, bool descending) {
  const bool na = va != va, nb = vb != vb;
  if (na || nb) {
    if (na && nb) return ia < ib;
    return descending ? na : nb;
  }
  if (va != vb) return descending ? va > vb : va < vb;
  return ia < ib;
}

// Sorts or selects along `d`: the first `k` of each line in (value, index) order go to
// values/indices. Selection scans for the next pair after the previous one: no scratch memory.
template <typename T>
void ordered_lines(const Tensor& in, int64_t d, int64_t k, bool descending, const Tensor& values,
                   const Tensor& indices) {
  const int64_t n = in.dim() > 0 ? in.size(d) : 1;
  const int64_t ist = in.dim() > 0 ? in.stride(d) : 1, vst = values.dim() > 0 ? values.stride(d) : 1,
                xst = indices.dim() > 0 ? indices.stride(d) : 1;
  int64_t lines = 1, sizes[kMaxDim], idx[kMaxDim];
  size_t nd = 0;
  for (int64_t j = 0; j < in.dim(); ++j)
    if (j != d) lines *= (sizes[nd++] = in.size(j));
  for (int64_t line = 0; line < lines; ++line) {
    unflatten(line, sizes, nd, idx);
    int64_t ib = 0, vb = 0, xb = 0;
    for (int64_t j = 0, m = 0; j < in.dim(); ++j) {
      if (j == d) continue;
      ib += idx[m] * in.stride(j);
      vb += idx[m] * values.stride(j);
      xb += idx[m] * indices.stride(j);
      ++m;
    }
    auto at = [&](int64_t i) -> T {
      if constexpr (std::is_integral_v<T>)
        return load_int(in.const_data_ptr(), in.scalar_type(), ib + i * ist);
      else
        return load_double(in.const_data_ptr(), in.scalar_type(), ib + i * ist);
    };
    T prev_v{};
    int64_t prev_i = -1;
    for (int64_t r = 0; r < k; ++r) {
      int64_t best = -1;
      T bv{};
      for (int64_t i = 0; i < n; ++i) {
        const T v = at(i);
        if (prev_i >= 0 && !before(prev_v, prev_i, v, i, descending)) continue;
        if (best < 0 || before(v, i, bv, best, descending)) best = i, bv = v;
      }
      if constexpr (std::is_integral_v<T>)
        store_int(values.mutable_data_ptr(), values.scalar_type(), vb + r * vst, bv);
      else
        store_double(values.mutable_data_ptr(), values.scalar_type(), vb + r * vst, bv);
      indices.mutable_data_ptr<int64_t>()[xb + r * xst] = best;
      prev_v = bv;
      prev_i = best;
    }
  }
}

void ordered(KernelRuntimeContext& ctx, const Tensor& in, int64_t dim_arg, int64_t k, bool descending,
             const Tensor& values, const Tensor& indices) {
  int64_t d;
  ET_KERNEL_CHECK_MSG(ctx, normalize_dim(dim_arg, in.dim(), &d), InvalidArgument, , "sort/topk: dim out of range");
  ET_KERNEL_CHECK_MSG(ctx,
                      is_supported_dtype(in.scalar_type()) && values.scalar_type() == in.scalar_type() &&
                          indices.scalar_type() == ScalarType::Long,
                      InvalidType, , "sort/topk: values must match the input, indices must be int64");
  const int64_t n = in.dim() > 0 ? in.size(d) : 1;
  ET_KERNEL_CHECK_MSG(ctx, k >= 0 && k <= n, InvalidArgument, , "topk: k out of range");
  int64_t sizes[kMaxDim];
  const size_t nd = sizes_of(in, sizes);
  if (in.dim() > 0) sizes[d] = k;
  if (!resize_out(ctx, values, {sizes, nd}) || !resize_out(ctx, indices, {sizes, nd})) return;
  if (is_integral(in.scalar_type(), true))
    ordered_lines<int64_t>(in, d, k, descending, values, indices);
  else
    ordered_lines<double>(in, d, k, descending, values, indices);
}

// sort.values(self, dim, descending, *, values, indices)
void sort_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Int, Tag::Bool, Tag::Tensor, Tag::Tensor}), InvalidArgument);
  const Tensor in = args[0]->toTensor();
  int64_t d = 0;
  const int64_t n = normalize_dim(args[1]->toInt(), in.dim(), &d) && in.dim() > 0 ? in.size(d) : 1;
  ordered(ctx, in, args[1]->toInt(), n, args[2]->toBool(), args[3]->toTensor(), args[4]->toTensor());
}

// topk.values(self, k, dim, largest, sorted, *, values, indices)
void topk_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Int, Tag::Int, Tag::Bool, Tag::Bool, Tag::Tensor, Tag::Tensor}),
                  InvalidArgument);
  ordered(ctx, args[0]->toTensor(), args[2]->toInt(), args[1]->toInt(), args[3]->toBool(), args[5]->toTensor(),
          args[6]->toTensor());
}

// nonzero.out(self, *, out): the [count, rank] int64 indices of the nonzero elements, row-major order.
void nonzero_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Tensor}), InvalidArgument);
  const Tensor in = args[0]->toTensor(), out = args[1]->toTensor();
  ET_KERNEL_CHECK_MSG(ctx, is_supported_dtype(in.scalar_type()) && out.scalar_type() == ScalarType::Long, InvalidType, ,
                      "nonzero: needs a supported input dtype and an int64 output, got %s -> %s",
                      runtime::scalar_type_name(in.scalar_type()), runtime::scalar_type_name(out.scalar_type()));
  const Operand o = tensor_operand(in);
  Walk w;
  plan_broadcast_walk(&o, 1, &w);
  const void* x = in.const_data_ptr();
  const ScalarType t = in.scalar_type();
  int64_t count = 0;
  walk(w, [&](int64_t, const int64_t* io) { count += load_double(x, t, io[0]) != 0.0; });
  const int64_t sizes[2] = {count, in.dim()};
  if (!resize_out(ctx, out, {sizes, 2})) return;
  // torch's nonzero gives a column-major result, and programs may plan it so: write through the strides.
  int64_t* y = out.mutable_data_ptr<int64_t>();
  const int64_t row_stride = out.stride(0), col_stride = out.stride(1);
  const size_t nd = w.ndim;
  walk(w, [&](int64_t pos, const int64_t* io) {
    if (load_double(x, t, io[0]) == 0.0) return;
    for (size_t d = nd; d > 0; --d) {
      y[static_cast<int64_t>(d - 1) * col_stride] = pos % w.sizes[d - 1];
      pos /= w.sizes[d - 1];
    }
    y += row_stride;
  });
}

// masked_select.out(self, mask, *, out): the elements of self (broadcast with mask) where mask
// holds, in row-major order, as a 1-D tensor.
void masked_select_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Tensor, Tag::Tensor}), InvalidArgument);
  const Tensor in = args[0]->toTensor(), mask = args[1]->toTensor(), out = args[2]->toTensor();
  ET_KERNEL_CHECK_MSG(ctx, is_mask_dtype(mask), InvalidType, , "masked_select: the mask must be bool, got %s",
                      runtime::scalar_type_name(mask.scalar_type()));
  ET_KERNEL_CHECK_MSG(ctx, in.scalar_type() == out.scalar_type(), InvalidType, ,
                      "masked_select: output dtype %s differs from the input's %s",
                      runtime::scalar_type_name(out.scalar_type()), runtime::scalar_type_name(in.scalar_type()));
  const Operand ops[2] = {tensor_operand(in), tensor_operand(mask)};
  Walk w;
  ET_KERNEL_CHECK_MSG(ctx, plan_broadcast_walk(ops, 2, &w), InvalidArgument, ,
                      "masked_select: input and mask shapes do not broadcast");
  const uint8_t* m = static_cast<const uint8_t*>(mask.const_data_ptr());
  int64_t count = 0;
  walk(w, [&](int64_t, const int64_t* io) { count += m[io[1]] != 0; });
  if (!resize_out(ctx, out, {&count, 1})) return;
  const size_t es = in.element_size();
  const char* x = static_cast<const char*>(in.const_data_ptr());
  char* y = static_cast<char*>(out.mutable_data_ptr());
  walk(w, [&](int64_t, const int64_t* io) {
    if (m[io[1]] == 0) return;
    for (size_t b = 0; b < es; ++b) y[b] = x[io[0] * static_cast<int64_t>(es) + b];
    y += es;
  });
}

// repeat_interleave.Tensor_out(repeats, *, output_size?, out): i repeated repeats[i] times, for
// each i of the 1-D int tensor `repeats`.
void repeat_interleave_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::None, Tag::Tensor}), InvalidArgument);
  ET_KERNEL_CHECK(ctx, args[1]->isNone() || args[1]->isInt(), InvalidArgument);
  const Tensor reps = args[0]->toTensor(), out = args[2]->toTensor();
  ET_KERNEL_CHECK_MSG(ctx, reps.dim() <= 1 && index_dtype(reps) && out.scalar_type() == reps.scalar_type(),
                      InvalidArgument, , "repeat_interleave: repeats must be a 1-D int32/int64 tensor, out its dtype");
  const int64_t n = reps.numel();
  const int64_t step = reps.dim() == 1 ? reps.stride(0) : 1;
  int64_t total = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = load_int(reps.const_data_ptr(), reps.scalar_type(), i * step);
    ET_KERNEL_CHECK_MSG(ctx, r >= 0 && !add_overflows(total, r, &total), InvalidArgument, ,
                        "repeat_interleave: repeats[%lld] = %lld is negative", static_cast<long long>(i),
                        static_cast<long long>(r));
  }
  ET_KERNEL_CHECK_MSG(ctx, args[1]->isNone() || args[1]->toInt() == total, InvalidArgument, ,
                      "repeat_interleave: output_size %lld differs from the repeats' sum %lld",
                      static_cast<long long>(args[1]->isInt() ? args[1]->toInt() : 0), static_cast<long long>(total));
  if (!resize_out(ctx, out, {&total, 1})) return;
  int64_t k = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = load_int(reps.const_data_ptr(), reps.scalar_type(), i * step);
    for (int64_t j = 0; j < r; ++j) store_int(out.mutable_data_ptr(), out.scalar_type(), k++, i);
  }
}

}  // namespace

// Registrations are generated from kernels/portable/functions.yaml (only the selected kernels).
#include "portable_registrations/op_index.inc"

}  // namespace kernels
}  // namespace executorch
