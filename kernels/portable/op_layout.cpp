// Layout ops (the *_copy view ops, cat/stack/split, dtype and dim-order copies, flip, repeat,
// padding): each builds a strided View of its input and copies it into the output.
#include <utility>

#include "kernels/portable/util/copy.h"
#include "kernels/portable/util/kernel_util.h"

namespace executorch {
namespace kernels {
namespace {

// Resizes `out` to the view's sizes and copies the view into it (converting the dtype when
// `convert`; otherwise the dtypes must match).
void emit(KernelRuntimeContext& ctx, const View& src, const Tensor& out, bool convert = false) {
  ET_KERNEL_CHECK_MSG(ctx, convert || src.type == out.scalar_type(), InvalidType, ,
                      "output dtype %s differs from the input's %s", runtime::scalar_type_name(out.scalar_type()),
                      runtime::scalar_type_name(src.type));
  ET_KERNEL_CHECK_MSG(
      ctx, src.type == out.scalar_type() || (is_supported_dtype(src.type) && is_supported_dtype(out.scalar_type())),
      InvalidType, , "dtype conversion between %s and %s is not supported", runtime::scalar_type_name(src.type),
      runtime::scalar_type_name(out.scalar_type()));
  if (!resize_out(ctx, out, {src.sizes, src.ndim})) return;
  copy_view(src, view_of(out));
}

// Removes dim `d` from a view.
void drop_dim(View* v, size_t d) {
  for (size_t i = d; i + 1 < v->ndim; ++i) {
    v->sizes[i] = v->sizes[i + 1];
    v->strides[i] = v->strides[i + 1];
  }
  --v->ndim;
}

// Inserts a size-1 dim at `d`.
void insert_dim(View* v, size_t d) {
  for (size_t i = v->ndim; i > d; --i) {
    v->sizes[i] = v->sizes[i - 1];
    v->strides[i] = v->strides[i - 1];
  }
  v->sizes[d] = 1;
  v->strides[d] = 0;
  ++v->ndim;
}

// view_copy.out(self, size, *, out): same elements in row-major order, new shape (-1 inferred).
void view_copy_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::ListInt, Tag::Tensor}), InvalidArgument);
  const Tensor in = args[0]->toTensor(), out = args[2]->toTensor();
  const Span<const int64_t> req = args[1]->toIntList();
  ET_KERNEL_CHECK(ctx, req.size() <= kMaxDim, InvalidArgument);
  int64_t sizes[kMaxDim];
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < req.size(); ++i) {
    sizes[i] = req[i];
    if (req[i] == -1) {
      ET_KERNEL_CHECK_MSG(ctx, infer < 0, InvalidArgument, , "view_copy: more than one -1 in size");
      infer = static_cast<int64_t>(i);
    } else {
      ET_KERNEL_CHECK_MSG(ctx, req[i] >= 0 && !mul_overflows(known, req[i], &known), InvalidArgument, ,
                          "view_copy: negative size, or sizes whose product overflows int64");
    }
  }
  if (infer >= 0) {
    ET_KERNEL_CHECK_MSG(ctx, known > 0 && in.numel() % known == 0, InvalidArgument, ,
                        "view_copy: cannot infer the -1 dim");
    sizes[infer] = in.numel() / known;
    known *= sizes[infer];
  }
  ET_KERNEL_CHECK_MSG(ctx, known == in.numel(), InvalidArgument, , "view_copy: size has %lld elements, input has %lld",
                      static_cast<long long>(known), static_cast<long long>(in.numel()));
  ET_KERNEL_CHECK_MSG(ctx, in.scalar_type() == out.scalar_type(), InvalidType, , "view_copy: dtype mismatch");
  ET_KERNEL_CHECK_MSG(ctx, in.is_contiguous(), NotSupported, , "view_copy: input must be contiguous");
  if (!resize_out(ctx, out, {sizes, req.size()})) return;
  ET_KERNEL_CHECK_MSG(ctx, out.is_contiguous(), NotSupported, , "view_copy: output must be contiguous");
  View src = view_of(out);
  src.data = in.const_data_ptr();
  copy_view(src, view_of(out));
}

// permute_copy.out(self, dims, *, out)
void permute_copy_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::ListInt, Tag::Tensor}), InvalidArgument);
  const Tensor in = args[0]->toTensor();
  const Span<const int64_t> dims = args[1]->toIntList();
  ET_KERNEL_CHECK_MSG(ctx, static_cast<int64_t>(dims.size()) == in.dim(), InvalidArgument, ,
                      "permute_copy: dims must list every dim once");
  const View v = view_of(in);
  View p = v;
  bool seen[kMaxDim] = {};
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d;
    ET_KERNEL_CHECK_MSG(ctx, normalize_dim(dims[i], in.dim(), &d) && !seen[d], InvalidArgument, ,
                        "permute_copy: dims must list every dim once");
    seen[d] = true;
    p.sizes[i] = v.sizes[d];
    p.strides[i] = v.strides[d];
  }
  emit(ctx, p, args[2]->toTensor());
}

// transpose_copy.int_out(self, dim0, dim1, *, out)
void transpose_copy_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Int, Tag::Int, Tag::Tensor}), InvalidArgument);
  const Tensor in = args[0]->toTensor();
  int64_t a, b;
  ET_KERNEL_CHECK_MSG(ctx,
                      normalize_dim(args[1]->toInt(), in.dim(), &a) && normalize_dim(args[2]->toInt(), in.dim(), &b),
                      InvalidArgument, , "transpose_copy: dim out of range");
  View v = view_of(in);
  if (in.dim() > 0) {
    std::swap(v.sizes[a], v.sizes[b]);
    std::swap(v.strides[a], v.strides[b]);
  }
  emit(ctx, v, args[3]->toTensor());
}

// expand_copy.out(self, size, *, implicit, out)
void expand_copy_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::ListInt, Tag::Bool, Tag::Tensor}), InvalidArgument);
  const Tensor in = args[0]->toTensor();
  const Span<const int64_t> size = args[1]->toIntList();
  ET_KERNEL_CHECK_MSG(ctx, static_cast<int64_t>(size.size()) >= in.dim() && size.size() <= kMaxDim, InvalidArgument, ,
                      "expand_copy: size has fewer dims than the input");
  const View v = view_of(in);
  View e = v;
  e.ndim = size.size();
  const size_t shift = size.size() - v.ndim;
  for (size_t i = 0; i < size.size(); ++i) {
    const bool old = i >= shift;
    const int64_t cur = old ? v.sizes[i - shift] : 1;
    const int64_t want = size[i] == -1 && old ? cur : size[i];
    ET_KERNEL_CHECK_MSG(ctx, want >= 0 && (cur == want || cur == 1), InvalidArgument, ,
                        "expand_copy: size %lld cannot expand dim of size %lld", static_cast<long long>(size[i]),
                        static_cast<long long>(cur));
    e.sizes[i] = want;
    e.strides[i] = old && cur == want ? v.strides[i - shift] : 0;
  }
  emit(ctx, e, args[3]->toTensor());
}

// squeeze_copy.dims_out(self, dims, *, out) / .dim_out(self, dim, *, out) / .out(self, *, out)
void squeeze_view(KernelRuntimeContext& ctx, const Tensor& in, Span<const int64_t> dims, bool all, const Tensor& out) {
  View v = view_of(in);
  bool drop[kMaxDim] = {};
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d;
    ET_KERNEL_CHECK_MSG(ctx, normalize_dim(dims[i], in.dim(), &d), InvalidArgument, , "squeeze_copy: dim out of range");
    if (in.dim() > 0) drop[d] = true;
  }
  for (size_t d = v.ndim; d > 0; --d)
    if ((all || drop[d - 1]) && v.sizes[d - 1] == 1) drop_dim(&v, d - 1);
  emit(ctx, v, out);
}
void squeeze_dims_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::ListInt, Tag::Tensor}), InvalidArgument);
  squeeze_view(ctx, args[0]->toTensor(), args[1]->toIntList(), false, args[2]->toTensor());
}
void squeeze_dim_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Int, Tag::Tensor}), InvalidArgument);
  const int64_t d = args[1]->toInt();
  squeeze_view(ctx, args[0]->toTensor(), {&d, 1}, false, args[2]->toTensor());
}
void squeeze_all_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Tensor}), InvalidArgument);
  squeeze_view(ctx, args[0]->toTensor(), {}, true, args[1]->toTensor());
}

// unsqueeze_copy.out(self, dim, *, out)
void unsqueeze_copy_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Int, Tag::Tensor}), InvalidArgument);
  const Tensor in = args[0]->toTensor();
  int64_t d;
  ET_KERNEL_CHECK_MSG(ctx,
                      in.dim() < static_cast<int64_t>(kMaxDim) && normalize_dim(args[1]->toInt(), in.dim() + 1, &d),
                      InvalidArgument, , "unsqueeze_copy: dim out of range");
  View v = view_of(in);
  insert_dim(&v, static_cast<size_t>(d));
  emit(ctx, v, args[2]->toTensor());
}

// Python slice bounds of [start:end:step] over `size`; returns the length.
int64_t slice_bounds(int64_t size, const EValue& start_v, const EValue& end_v, int64_t step, int64_t* start) {
  int64_t s = start_v.isInt() ? start_v.toInt() : 0;
  int64_t e = end_v.isInt() ? end_v.toInt() : size;
  if (s < 0) s += size;
  if (e < 0) e += size;
  s = s < 0 ? 0 : (s > size ? size : s);
  e = e < s ? s : (e > size ? size : e);
  *start = s;
  // e - s <= size, so this cannot overflow whatever the step (which can be any positive int64).
  return e == s ? 0 : (e - s - 1) / step + 1;
}

// slice_copy.Tensor_out(self, dim, start?, end?, step, *, out)
void slice_copy_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Int, Tag::None, Tag::None, Tag::Int, Tag::Tensor}),
                  InvalidArgument);
  const Tensor in = args[0]->toTensor();
  int64_t d;
  const int64_t step = args[4]->toInt();
  ET_KERNEL_CHECK_MSG(ctx, in.dim() > 0 && normalize_dim(args[1]->toInt(), in.dim(), &d) && step > 0, InvalidArgument, ,
                      "slice_copy: bad dim or step");
  View v = view_of(in);
  int64_t start;
  const int64_t len = slice_bounds(v.sizes[d], *args[2], *args[3], step, &start);
  v.data = static_cast<const char*>(v.data) + start * v.strides[d] * static_cast<int64_t>(in.element_size());
  v.sizes[d] = len;
  // With two or more elements step < size, so the product fits; one element needs no stride.
  if (len > 1) v.strides[d] *= step;
  emit(ctx, v, args[5]->toTensor());
}

// select_copy.int_out(self, dim, index, *, out)
void select_copy_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Int, Tag::Int, Tag::Tensor}), InvalidArgument);
  const Tensor in = args[0]->toTensor();
  int64_t d;
  ET_KERNEL_CHECK_MSG(ctx, in.dim() > 0 && normalize_dim(args[1]->toInt(), in.dim(), &d), InvalidArgument, ,
                      "select_copy: dim out of range");
  int64_t index = args[2]->toInt();
  const int64_t size = in.size(d);
  if (index < 0) index += size;
  ET_KERNEL_CHECK_MSG(ctx, index >= 0 && index < size, InvalidArgument, ,
                      "select_copy: index %lld out of range for size %lld", static_cast<long long>(args[2]->toInt()),
                      static_cast<long long>(size));
  View v = view_at(in, index * in.stride(d));
  drop_dim(&v, static_cast<size_t>(d));
  emit(ctx, v, args[3]->toTensor());
}

// True for the legacy empty 1-D tensor cat skips whatever the other shapes are.
bool skipped_in_cat(const Tensor& t) { return t.dim() == 1 && t.size(0) == 0; }

// Copies `parts` (each with `insert` a size-1 dim at `d` when stacking) along dim `d` of out.
void concat(KernelRuntimeContext& ctx, Span<Tensor> parts, int64_t dim_arg, bool stack, const Tensor& out) {
  ET_KERNEL_CHECK_MSG(ctx, parts.size() > 0, InvalidArgument, , "cat/stack: no tensors");
  const Tensor* ref = nullptr;
  for (const Tensor& t : parts)
    if (!skipped_in_cat(t) || stack) {
      ref = &t;
      break;
    }
  if (ref == nullptr) {  // everything empty: so is the result
    const int64_t zero = 0;
    if (resize_out(ctx, out, {&zero, 1})) return;
    return;
  }
  const int64_t rank = ref->dim() + (stack ? 1 : 0);
  int64_t d;
  ET_KERNEL_CHECK_MSG(ctx, rank <= static_cast<int64_t>(kMaxDim) && normalize_dim(dim_arg, rank, &d) && rank > 0,
                      InvalidArgument, , "cat/stack: dim out of range");
  int64_t sizes[kMaxDim];
  int64_t total = 0;
  for (const Tensor& t : parts) {
    if (!stack && skipped_in_cat(t)) continue;
    View v = view_of(t);
    if (stack) insert_dim(&v, static_cast<size_t>(d));
    ET_KERNEL_CHECK_MSG(ctx, static_cast<int64_t>(v.ndim) == rank, InvalidArgument, ,
                        "cat/stack: tensors differ in rank");
    for (int64_t i = 0; i < rank; ++i) {
      if (i == d) continue;
      ET_KERNEL_CHECK_MSG(ctx, v.sizes[i] == (ref == &t ? v.sizes[i] : sizes[i]), InvalidArgument, ,
                          "cat/stack: sizes differ outside the cat dim");
      sizes[i] = v.sizes[i];
    }
    ET_KERNEL_CHECK_MSG(ctx, is_supported_dtype(t.scalar_type()) || t.scalar_type() == out.scalar_type(), InvalidType, ,
                        "cat/stack: unsupported dtype");
    // Each size is below 2^31, but a list can hold many of them.
    ET_KERNEL_CHECK_MSG(ctx, !add_overflows(total, v.sizes[d], &total), InvalidArgument, ,
                        "cat/stack: the sizes along the dim overflow int64");
  }
  sizes[d] = total;
  if (!resize_out(ctx, out, {sizes, static_cast<size_t>(rank)})) return;
  const View ov = view_of(out);
  int64_t at = 0;
  for (const Tensor& t : parts) {
    if (!stack && skipped_in_cat(t)) continue;
    View v = view_of(t);
    if (stack) insert_dim(&v, static_cast<size_t>(d));
    View dst = ov;
    dst.data = static_cast<const char*>(ov.data) + at * ov.strides[d] * static_cast<int64_t>(out.element_size());
    dst.sizes[d] = v.sizes[d];
    copy_view(v, dst);
    at += v.sizes[d];
  }
}

// cat.out(tensors, dim, *, out) / stack.out(tensors, dim, *, out)
void cat_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::ListTensor, Tag::Int, Tag::Tensor}), InvalidArgument);
  concat(ctx, args[0]->toTensorList(), args[1]->toInt(), false, args[2]->toTensor());
}
void stack_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::ListTensor, Tag::Int, Tag::Tensor}), InvalidArgument);
  concat(ctx, args[0]->toTensorList(), args[1]->toInt(), true, args[2]->toTensor());
}

// Copies consecutive chunks of `in` along `dim` into `outs`; sizes[i] is chunk i's length.
void split_into(KernelRuntimeContext& ctx, const Tensor& in, int64_t dim_arg, const int64_t* sizes, Span<Tensor> outs,
                bool drop) {
  int64_t d;
  ET_KERNEL_CHECK_MSG(ctx, in.dim() > 0 && normalize_dim(dim_arg, in.dim(), &d), InvalidArgument, ,
                      "split: dim out of range");
  int64_t at = 0;
  for (size_t i = 0; i < outs.size(); ++i) {
    View v = view_at(in, at * in.stride(d));
    v.sizes[d] = sizes ? sizes[i] : 1;
    if (drop) drop_dim(&v, static_cast<size_t>(d));
    emit(ctx, v, outs[i]);
    if (ctx.failure_state() != Error::Ok) return;
    at += sizes ? sizes[i] : 1;
  }
}

// split_with_sizes_copy.out(self, split_sizes, dim, *, out[])
void split_with_sizes_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::ListInt, Tag::Int, Tag::ListTensor}), InvalidArgument);
  const Tensor in = args[0]->toTensor();
  const Span<const int64_t> sizes = args[1]->toIntList();
  const Span<Tensor> outs = args[3]->toTensorList();
  int64_t d, sum = 0;
  ET_KERNEL_CHECK_MSG(ctx, in.dim() > 0 && normalize_dim(args[2]->toInt(), in.dim(), &d), InvalidArgument, ,
                      "split_with_sizes_copy: dim out of range");
  // Each size is bounded by what is left of the dim, so the running sum never overflows.
  for (int64_t s : sizes) {
    ET_KERNEL_CHECK_MSG(ctx, s >= 0 && s <= in.size(d) - sum, InvalidArgument, ,
                        "split_with_sizes_copy: sizes must be non-negative and add up to the dim");
    sum += s;
  }
  ET_KERNEL_CHECK_MSG(ctx, sum == in.size(d) && sizes.size() == outs.size(), InvalidArgument, ,
                      "split_with_sizes_copy: sizes must add up to the dim and match the outputs");
  split_into(ctx, in, d, sizes.data(), outs, false);
}

// split_copy.Tensor_out(self, split_size, dim, *, out[])
void split_copy_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Int, Tag::Int, Tag::ListTensor}), InvalidArgument);
  const Tensor in = args[0]->toTensor();
  const Span<Tensor> outs = args[3]->toTensorList();
  const int64_t chunk = args[1]->toInt();
  int64_t d;
  ET_KERNEL_CHECK_MSG(ctx,
                      in.dim() > 0 && normalize_dim(args[2]->toInt(), in.dim(), &d) && chunk > 0 && outs.size() <= 1024,
                      InvalidArgument, , "split_copy: bad dim or split size");
  const int64_t n = in.size(d);
  ET_KERNEL_CHECK_MSG(ctx, static_cast<int64_t>(outs.size()) == n / chunk + (n % chunk != 0), InvalidArgument, ,
                      "split_copy: output count does not match");
  int64_t sizes[1024];
  for (size_t i = 0; i < outs.size(); ++i) {
    const int64_t left = n - static_cast<int64_t>(i) * chunk;
    sizes[i] = left < chunk ? left : chunk;
  }
  split_into(ctx, in, d, sizes, outs, false);
}

// unbind_copy.int_out(self, dim, *, out[])
void unbind_copy_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Int, Tag::ListTensor}), InvalidArgument);
  const Tensor in = args[0]->toTensor();
  const Span<Tensor> outs = args[2]->toTensorList();
  int64_t d;
  ET_KERNEL_CHECK_MSG(
      ctx,
      in.dim() > 0 && normalize_dim(args[1]->toInt(), in.dim(), &d) && static_cast<int64_t>(outs.size()) == in.size(d),
      InvalidArgument, , "unbind_copy: one output per slice needed");
  split_into(ctx, in, d, nullptr, outs, true);
}

// The dim_order argument of the dim-order ops, when given, must be the output's.
bool dim_order_matches(const EValue& v, const Tensor& out) {
  if (v.isNone()) return true;
  const Span<const int64_t> order = v.toIntList();
  if (static_cast<int64_t>(order.size()) != out.dim()) return false;
  for (size_t i = 0; i < order.size(); ++i)
    if (order[i] != out.dim_order()[i]) return false;
  return true;
}

// _clone_dim_order.out / _to_dim_order_copy.out(self, non_blocking, dim_order?, *, out)
void dim_order_copy(KernelRuntimeContext& ctx, Args args, bool convert) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Bool, Tag::None, Tag::Tensor}), InvalidArgument);
  const Tensor out = args[3]->toTensor();
  ET_KERNEL_CHECK_MSG(ctx, dim_order_matches(*args[2], out), InvalidArgument, ,
                      "dim order copy: dim_order argument differs from the output tensor's");
  emit(ctx, view_of(args[0]->toTensor()), out, convert);
}
void clone_dim_order_out(KernelRuntimeContext& ctx, Args args) { dim_order_copy(ctx, args, false); }
// _empty_dim_order.out(size, *, dim_order?, out): the shape only, in the output's own dim order.
void empty_dim_order_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::ListInt, Tag::None, Tag::Tensor}), InvalidArgument);
  const Tensor out = args[2]->toTensor();
  ET_KERNEL_CHECK_MSG(ctx, dim_order_matches(*args[1], out), InvalidArgument, ,
                      "_empty_dim_order: dim_order argument differs from the output tensor's");
  resize_out(ctx, out, args[0]->toIntList());
}
void to_dim_order_copy_out(KernelRuntimeContext& ctx, Args args) { dim_order_copy(ctx, args, true); }

// _to_copy.out(self, non_blocking, memory_format?, *, out) / clone.out(self, memory_format?, *, out)
void to_copy_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Bool, Tag::None, Tag::Tensor}), InvalidArgument);
  emit(ctx, view_of(args[0]->toTensor()), args[3]->toTensor(), true);
}
void clone_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::None, Tag::Tensor}), InvalidArgument);
  emit(ctx, view_of(args[0]->toTensor()), args[2]->toTensor());
}

// alias_copy.out(self, *, out): a plain copy (what a functional graph keeps of an alias); also detach_copy,
// lift_fresh_copy, conj_physical and _conj_physical (a copy: no dtype the runtime holds is complex).
void alias_copy_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Tensor}), InvalidArgument);
  emit(ctx, view_of(args[0]->toTensor()), args[1]->toTensor());
}

// flip.out(self, dims, *, out)
void flip_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::ListInt, Tag::Tensor}), InvalidArgument);
  const Tensor in = args[0]->toTensor();
  View v = view_of(in);
  bool seen[kMaxDim] = {};
  for (int64_t dim : args[1]->toIntList()) {
    int64_t d;
    ET_KERNEL_CHECK_MSG(ctx, normalize_dim(dim, in.dim(), &d) && !seen[d], InvalidArgument, ,
                        "flip: dims out of range or repeated");
    seen[d] = true;
    if (in.dim() == 0 || v.sizes[d] == 0) continue;
    v.data =
        static_cast<const char*>(v.data) + (v.sizes[d] - 1) * v.strides[d] * static_cast<int64_t>(in.element_size());
    v.strides[d] = -v.strides[d];
  }
  emit(ctx, v, args[2]->toTensor());
}

// repeat.out(self, repeats, *, out): out dim i is repeats[i] tiles of the (padded) input dim.
void repeat_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::ListInt, Tag::Tensor}), InvalidArgument);
  const Tensor in = args[0]->toTensor(), out = args[2]->toTensor();
  const Span<const int64_t> reps = args[1]->toIntList();
  const size_t nd = reps.size();
  ET_KERNEL_CHECK_MSG(ctx, static_cast<int64_t>(nd) >= in.dim() && 2 * nd <= kMaxDim, InvalidArgument, ,
                      "repeat: need as many repeats as dims (at most %zu)", kMaxDim / 2);
  ET_KERNEL_CHECK_MSG(ctx, in.scalar_type() == out.scalar_type(), InvalidType, , "repeat: dtype mismatch");
  const View v = view_of(in);
  const size_t shift = nd - v.ndim;
  int64_t sizes[kMaxDim];
  for (size_t i = 0; i < nd; ++i) {
    // A count past int32 makes a dim no tensor can have (or tiles an empty dim to no end).
    ET_KERNEL_CHECK_MSG(ctx, reps[i] >= 0 && reps[i] <= INT32_MAX, InvalidArgument, ,
                        "repeat: count %lld is negative or past int32", static_cast<long long>(reps[i]));
    sizes[i] = reps[i] * (i >= shift ? v.sizes[i - shift] : 1);
  }
  if (!resize_out(ctx, out, {sizes, nd})) return;
  // Split each out dim into (tile, within-tile): the source is the input with tile stride 0.
  const View ov = view_of(out);
  View src, dst = ov;
  src.data = v.data;
  src.type = v.type;
  src.ndim = dst.ndim = 2 * nd;
  for (size_t i = 0; i < nd; ++i) {
    const int64_t inner = i >= shift ? v.sizes[i - shift] : 1;
    src.sizes[2 * i] = dst.sizes[2 * i] = reps[i];
    src.sizes[2 * i + 1] = dst.sizes[2 * i + 1] = inner;
    src.strides[2 * i] = 0;
    src.strides[2 * i + 1] = i >= shift ? v.strides[i - shift] : 0;
    dst.strides[2 * i] = ov.strides[i] * inner;
    dst.strides[2 * i + 1] = ov.strides[i];
  }
  copy_view(src, dst);
}

// constant_pad_nd.out(self, pad, value, *, out): pad pairs start from the last dim; negative crops.
void constant_pad_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::ListInt, Tag::ListScalar, Tag::Tensor}), InvalidArgument);
  const Tensor in = args[0]->toTensor(), out = args[3]->toTensor();
  const Span<const int64_t> pad = args[1]->toIntList();
  ET_KERNEL_CHECK_MSG(ctx, pad.size() % 2 == 0 && static_cast<int64_t>(pad.size() / 2) <= in.dim(), InvalidArgument, ,
                      "constant_pad_nd: pad must hold pairs for at most every dim");
  ET_KERNEL_CHECK_MSG(ctx, in.scalar_type() == out.scalar_type() && is_supported_dtype(in.scalar_type()), InvalidType, ,
                      "constant_pad_nd: dtype mismatch or unsupported");
  View src = view_of(in);
  int64_t sizes[kMaxDim];
  int64_t dst_start[kMaxDim] = {};
  for (int64_t d = 0; d < in.dim(); ++d) sizes[d] = in.size(d);
  for (size_t k = 0; k < pad.size() / 2; ++k) {
    const size_t d = static_cast<size_t>(in.dim()) - 1 - k;
    const int64_t lo = pad[2 * k], hi = pad[2 * k + 1];
    // Pads past +-int32 give a size no tensor can have; bounding them keeps the sums below in range.
    ET_KERNEL_CHECK_MSG(ctx, lo >= INT32_MIN && lo <= INT32_MAX && hi >= INT32_MIN && hi <= INT32_MAX, InvalidArgument,
                        , "constant_pad_nd: padding past int32");
    sizes[d] = in.size(d) + lo + hi;
    ET_KERNEL_CHECK_MSG(ctx, sizes[d] >= 0, InvalidArgument, , "constant_pad_nd: padding crops below zero");
    const int64_t crop_lo = lo < 0 ? -lo : 0, crop_hi = hi < 0 ? -hi : 0;
    src.data = static_cast<const char*>(src.data) + crop_lo * src.strides[d] * static_cast<int64_t>(in.element_size());
    src.sizes[d] = in.size(d) - crop_lo - crop_hi;
    if (src.sizes[d] < 0) src.sizes[d] = 0;
    dst_start[d] = lo > 0 ? lo : 0;
  }
  if (!resize_out(ctx, out, {sizes, static_cast<size_t>(in.dim())})) return;
  View dst = view_of(out);
  fill_view(dst, args[2]->toScalarDouble());
  int64_t offset = 0;
  for (int64_t d = 0; d < in.dim(); ++d) {
    offset += dst_start[d] * dst.strides[d];
    dst.sizes[d] = src.sizes[d];
  }
  dst.data = static_cast<const char*>(dst.data) + offset * static_cast<int64_t>(out.element_size());
  copy_view(src, dst);
}

// as_strided_copy.out(self, size, stride, storage_offset?, *, out): elements of self's memory
// (self's own elements, row-major) at storage_offset + sum(i_d * stride_d).
void as_strided_copy_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::ListInt, Tag::ListInt, Tag::None, Tag::Tensor}),
                  InvalidArgument);
  ET_KERNEL_CHECK(ctx, args[3]->isNone() || args[3]->isInt(), InvalidArgument);
  const Tensor in = args[0]->toTensor();
  const Span<const int64_t> size = args[1]->toIntList(), stride = args[2]->toIntList();
  const int64_t offset = args[3]->isInt() ? args[3]->toInt() : 0;
  ET_KERNEL_CHECK_MSG(ctx, size.size() == stride.size() && size.size() <= kMaxDim, InvalidArgument, ,
                      "as_strided_copy: size and stride must have the same length, at most %zu", kMaxDim);
  ET_KERNEL_CHECK_MSG(ctx, in.is_contiguous(), NotSupported, , "as_strided_copy: input must be contiguous");
  View v;
  v.type = in.scalar_type();
  v.ndim = size.size();
  // The last element reached must lie inside the input: no read outside its memory.
  int64_t last = offset, numel = 1;
  bool bad = offset < 0;
  for (size_t d = 0; d < size.size(); ++d) {
    bad = bad || size[d] < 0 || stride[d] < 0 || mul_overflows(numel, size[d], &numel);
    v.sizes[d] = size[d];
    v.strides[d] = stride[d];
    int64_t reach;
    if (!bad && size[d] > 0) bad = mul_overflows(size[d] - 1, stride[d], &reach) || add_overflows(last, reach, &last);
  }
  ET_KERNEL_CHECK_MSG(ctx, !bad && (numel == 0 || last < in.numel()), InvalidArgument, ,
                      "as_strided_copy: the view reaches past the input's %lld elements, or a size, stride or "
                      "offset is negative",
                      static_cast<long long>(in.numel()));
  v.data = static_cast<const char*>(in.const_data_ptr()) + (numel == 0 ? 0 : offset) * in.element_size();
  emit(ctx, v, args[4]->toTensor());
}

// diagonal_copy.out(self, offset, dim1, dim2, *, out): dims dim1 and dim2 replaced by their
// diagonal (shifted `offset` above it), as the last dim.
void diagonal_copy_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Int, Tag::Int, Tag::Int, Tag::Tensor}), InvalidArgument);
  const Tensor in = args[0]->toTensor();
  int64_t a, b;
  ET_KERNEL_CHECK_MSG(ctx,
                      in.dim() >= 2 && normalize_dim(args[2]->toInt(), in.dim(), &a) &&
                          normalize_dim(args[3]->toInt(), in.dim(), &b) && a != b,
                      InvalidArgument, , "diagonal_copy: needs two different dims of an input of rank 2 or more");
  const int64_t offset = args[1]->toInt();
  const View v = view_of(in);
  const int64_t na = v.sizes[a], nb = v.sizes[b];
  int64_t len = 0, start = 0;
  if (offset >= 0 && offset < nb) {
    len = na < nb - offset ? na : nb - offset;
    start = offset * v.strides[b];
  } else if (offset < 0 && offset > -na) {
    len = na + offset < nb ? na + offset : nb;
    start = -offset * v.strides[a];
  }
  View d;
  d.type = v.type;
  d.data = static_cast<const char*>(v.data) + (len > 0 ? start : 0) * static_cast<int64_t>(in.element_size());
  for (size_t i = 0; i < v.ndim; ++i) {
    if (static_cast<int64_t>(i) == a || static_cast<int64_t>(i) == b) continue;
    d.sizes[d.ndim] = v.sizes[i];
    d.strides[d.ndim++] = v.strides[i];
  }
  d.sizes[d.ndim] = len;
  d.strides[d.ndim++] = v.strides[a] + v.strides[b];
  emit(ctx, d, args[4]->toTensor());
}

// narrow_copy.out(self, dim, start, length, *, out): `length` elements along dim from `start`.
void narrow_copy_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Int, Tag::Int, Tag::Int, Tag::Tensor}), InvalidArgument);
  const Tensor in = args[0]->toTensor();
  int64_t d;
  ET_KERNEL_CHECK_MSG(ctx, in.dim() > 0 && normalize_dim(args[1]->toInt(), in.dim(), &d), InvalidArgument, ,
                      "narrow_copy: dim out of range");
  const int64_t size = in.size(d), length = args[3]->toInt();
  int64_t start = args[2]->toInt();
  if (start < 0 && start >= -size) start += size;
  ET_KERNEL_CHECK_MSG(ctx, start >= 0 && length >= 0 && start <= size && length <= size - start, InvalidArgument, ,
                      "narrow_copy: start %lld and length %lld do not fit in a dim of size %lld",
                      static_cast<long long>(args[2]->toInt()), static_cast<long long>(length),
                      static_cast<long long>(size));
  View v = view_at(in, start * in.stride(d));
  v.sizes[d] = length;
  emit(ctx, v, args[4]->toTensor());
}

// t_copy.out(self, *, out): the transpose of a matrix; vectors and scalars stay as they are.
void t_copy_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Tensor}), InvalidArgument);
  const Tensor in = args[0]->toTensor();
  ET_KERNEL_CHECK_MSG(ctx, in.dim() <= 2, InvalidArgument, , "t_copy: input has %lld dims, at most 2 allowed",
                      static_cast<long long>(in.dim()));
  View v = view_of(in);
  if (v.ndim == 2) {
    std::swap(v.sizes[0], v.sizes[1]);
    std::swap(v.strides[0], v.strides[1]);
  }
  emit(ctx, v, args[1]->toTensor());
}

// unfold_copy.out(self, dimension, size, step, *, out): windows of `size` every `step` along the
// dimension, which counts the windows; each window becomes a new last dim.
void unfold_copy_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Int, Tag::Int, Tag::Int, Tag::Tensor}), InvalidArgument);
  const Tensor in = args[0]->toTensor();
  View v = view_of(in);
  int64_t d = 0;
  ET_KERNEL_CHECK_MSG(ctx, normalize_dim(args[1]->toInt(), in.dim(), &d) && v.ndim < kMaxDim, InvalidArgument, ,
                      "unfold_copy: dimension out of range");
  if (v.ndim == 0) {  // a scalar unfolds as a one-element dim
    v.ndim = 1;
    v.sizes[0] = 1;
    v.strides[0] = 1;
  }
  const int64_t n = v.sizes[d], size = args[2]->toInt(), step = args[3]->toInt();
  ET_KERNEL_CHECK_MSG(ctx, size >= 0 && size <= n && step > 0, InvalidArgument, ,
                      "unfold_copy: size %lld must be in [0, %lld] and step %lld positive",
                      static_cast<long long>(size), static_cast<long long>(n), static_cast<long long>(step));
  const int64_t windows = (n - size) / step + 1;
  v.sizes[v.ndim] = size;
  v.strides[v.ndim] = v.strides[d];
  v.sizes[d] = windows;
  if (windows > 1) v.strides[d] *= step;  // step < n here, so this fits
  ++v.ndim;
  if (in.dim() == 0) drop_dim(&v, 0);
  emit(ctx, v, args[4]->toTensor());
}

// pixel_shuffle.out(self, upscale_factor, *, out): [..., C*r*r, H, W] -> [..., C, H*r, W*r].
// pixel_unshuffle.out(self, downscale_factor, *, out) is its inverse. Both copy between the two
// tensors seen as [..., C, H, r, W, r], the channel split (C, r, r) on the shuffled side.
void pixel_shuffle(KernelRuntimeContext& ctx, Args args, bool unshuffle) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Int, Tag::Tensor}), InvalidArgument);
  const Tensor in = args[0]->toTensor(), out = args[2]->toTensor();
  const int64_t r = args[1]->toInt();
  const char* op = unshuffle ? "pixel_unshuffle" : "pixel_shuffle";
  ET_KERNEL_CHECK_MSG(ctx, in.dim() >= 3 && static_cast<size_t>(in.dim()) + 2 <= kMaxDim && r > 0 && r <= INT32_MAX,
                      InvalidArgument, , "%s: needs an input of rank 3 to %zu and a positive factor", op, kMaxDim - 2);
  ET_KERNEL_CHECK_MSG(ctx, in.scalar_type() == out.scalar_type(), InvalidType, , "%s: dtype mismatch", op);
  const size_t nd = static_cast<size_t>(in.dim());
  int64_t sizes[kMaxDim];
  sizes_of(in, sizes);
  const int64_t c = sizes[nd - 3], h = sizes[nd - 2], w = sizes[nd - 1];
  if (unshuffle) {
    ET_KERNEL_CHECK_MSG(ctx, h % r == 0 && w % r == 0, InvalidArgument, ,
                        "pixel_unshuffle: height %lld and width %lld must divide by %lld", static_cast<long long>(h),
                        static_cast<long long>(w), static_cast<long long>(r));
    sizes[nd - 3] = c * r * r;
    sizes[nd - 2] = h / r;
    sizes[nd - 1] = w / r;
  } else {
    ET_KERNEL_CHECK_MSG(ctx, c % (r * r) == 0, InvalidArgument, ,
                        "pixel_shuffle: channels %lld must divide by the factor squared, %lld",
                        static_cast<long long>(c), static_cast<long long>(r * r));
    sizes[nd - 3] = c / (r * r);
    sizes[nd - 2] = h * r;
    sizes[nd - 1] = w * r;
  }
  if (!resize_out(ctx, out, {sizes, nd})) return;
  const Tensor& packed = unshuffle ? out : in;  // [.., C*r*r, H, W]
  const Tensor& spread = unshuffle ? in : out;  // [.., C, H*r, W*r]
  View p = view_of(packed), s = view_of(spread);
  const int64_t pc = p.strides[nd - 3], ph = p.strides[nd - 2], pw = p.strides[nd - 1];
  const int64_t sc = s.strides[nd - 3], sh = s.strides[nd - 2], sw = s.strides[nd - 1];
  const int64_t cs = s.sizes[nd - 3], hs = p.sizes[nd - 2], ws = p.sizes[nd - 1];
  // Index box [.., C, H, r_h, W, r_w] on both sides.
  const int64_t box[5] = {cs, hs, r, ws, r};
  const int64_t pstr[5] = {pc * r * r, ph, pc * r, pw, pc};
  const int64_t sstr[5] = {sc, sh * r, sh, sw * r, sw};
  p.ndim = s.ndim = nd + 2;
  for (size_t k = 0; k < 5; ++k) {
    p.sizes[nd - 3 + k] = s.sizes[nd - 3 + k] = box[k];
    p.strides[nd - 3 + k] = pstr[k];
    s.strides[nd - 3 + k] = sstr[k];
  }
  if (unshuffle)
    copy_view(s, p);
  else
    copy_view(p, s);
}
void pixel_shuffle_out(KernelRuntimeContext& ctx, Args args) { pixel_shuffle(ctx, args, false); }
void pixel_unshuffle_out(KernelRuntimeContext& ctx, Args args) { pixel_shuffle(ctx, args, true); }

// A view narrowed to [start, start + len) along dim d.
View narrowed(View v, size_t d, int64_t start, int64_t len, size_t elem) {
  v.data = static_cast<const char*>(v.data) + start * v.strides[d] * static_cast<int64_t>(elem);
  v.sizes[d] = len;
  return v;
}

// roll.out(self, shifts, dims, *, out): out[(i + shift) mod n] = self[i] along each dim; with no
// dims, over the flattened tensor. Each dim splits into two blocks, so 2^k block copies.
void roll_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::ListInt, Tag::ListInt, Tag::Tensor}), InvalidArgument);
  const Tensor in = args[0]->toTensor(), out = args[3]->toTensor();
  const Span<const int64_t> shifts = args[1]->toIntList(), dims = args[2]->toIntList();
  const bool flat = dims.size() == 0;
  ET_KERNEL_CHECK_MSG(ctx, flat ? shifts.size() == 1 : shifts.size() == dims.size() && dims.size() <= kMaxDim,
                      InvalidArgument, , "roll: shifts and dims must have the same length (or one shift, no dims)");
  ET_KERNEL_CHECK_MSG(ctx, in.scalar_type() == out.scalar_type(), InvalidType, , "roll: dtype mismatch");
  if (!resize_out(ctx, out, in)) return;
  View src = view_of(in), dst = view_of(out);
  size_t which[kMaxDim];
  int64_t by[kMaxDim];
  size_t k = 0;
  if (flat) {
    ET_KERNEL_CHECK_MSG(ctx, in.is_contiguous() && out.is_contiguous(), NotSupported, ,
                        "roll: without dims, input and output must be contiguous");
    src.ndim = dst.ndim = 1;
    src.sizes[0] = dst.sizes[0] = in.numel();
    src.strides[0] = dst.strides[0] = 1;
    which[k] = 0;
    by[k++] = shifts[0];
  } else {
    for (size_t i = 0; i < dims.size(); ++i) {
      int64_t d;
      ET_KERNEL_CHECK_MSG(ctx, in.dim() > 0 && normalize_dim(dims[i], in.dim(), &d), InvalidArgument, ,
                          "roll: dim %lld out of range", static_cast<long long>(dims[i]));
      which[k] = static_cast<size_t>(d);
      by[k++] = shifts[i];
    }
  }
  if (in.numel() == 0) return;
  for (size_t i = 0; i < k; ++i) {
    const int64_t n = src.sizes[which[i]];
    by[i] = ((by[i] % n) + n) % n;
  }
  const size_t elem = in.element_size();
  // Block b takes, along each rolled dim, the tail [n - s, n) to [0, s) (bit set) or the head [0, n - s) to [s, n).
  for (uint32_t b = 0; b < (1u << k); ++b) {
    View s = src, t = dst;
    bool empty = false;
    for (size_t i = 0; i < k; ++i) {
      const size_t d = which[i];
      const int64_t n = s.sizes[d], sh = by[i];
      const bool tail = (b >> i) & 1;
      const int64_t len = tail ? sh : n - sh;
      empty = empty || len == 0;
      s = narrowed(s, d, tail ? n - sh : 0, len, elem);
      t = narrowed(t, d, tail ? 0 : sh, len, elem);
    }
    if (!empty) copy_view(s, t);
  }
}

// tril.out(self, diagonal, *, out): the matrices of the last two dims with every element above
// the given diagonal zeroed (zero bits are zero in every supported dtype).
void tril_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Int, Tag::Tensor}), InvalidArgument);
  const Tensor in = args[0]->toTensor(), out = args[2]->toTensor();
  ET_KERNEL_CHECK_MSG(ctx, in.dim() >= 2, InvalidArgument, , "tril: input needs at least 2 dims");
  emit(ctx, view_of(in), out);
  if (ctx.failure_state() != Error::Ok) return;
  const int64_t diag = args[1]->toInt();
  const View o = view_of(out);
  const size_t nd = o.ndim;
  const int64_t rows = o.sizes[nd - 2], cols = o.sizes[nd - 1];
  for (int64_t r = 0; r < rows; ++r) {
    // Columns past r + diag go; computed without overflow for any diagonal.
    const int64_t keep = diag >= cols ? cols : (diag < -r - 1 ? 0 : (r + diag + 1 < cols ? r + diag + 1 : cols));
    if (keep >= cols) continue;
    View row = o;
    row.data = static_cast<const char*>(o.data) +
               (r * o.strides[nd - 2] + keep * o.strides[nd - 1]) * static_cast<int64_t>(out.element_size());
    row.sizes[nd - 2] = 1;
    row.sizes[nd - 1] = cols - keep;
    fill_view(row, 0.0);
  }
}

// reflection_pad{1,2,3}d.out / replication_pad{1,2,3}d.out(self, padding, *, out): the last k dims
// padded by pairs (the last dim's first) with the input mirrored about its edge (the edge itself not
// repeated) or with the edge repeated. The input goes in the middle; then, dim by dim, each pad is
// copied from what is already in the output, so every copy is a strided block copy.
void edge_pad(KernelRuntimeContext& ctx, Args args, size_t k, bool reflect) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::ListInt, Tag::Tensor}), InvalidArgument);
  const Tensor in = args[0]->toTensor(), out = args[2]->toTensor();
  const Span<const int64_t> pad = args[1]->toIntList();
  const char* op = reflect ? "reflection_pad" : "replication_pad";
  ET_KERNEL_CHECK_MSG(
      ctx, pad.size() == 2 * k && (in.dim() == static_cast<int64_t>(k) + 1 || in.dim() == static_cast<int64_t>(k) + 2),
      InvalidArgument, , "%s%zud: needs %zu pads and an input of rank %zu or %zu", op, k, 2 * k, k + 1, k + 2);
  ET_KERNEL_CHECK_MSG(ctx, in.scalar_type() == out.scalar_type(), InvalidType, , "%s: dtype mismatch", op);
  const size_t nd = static_cast<size_t>(in.dim());
  int64_t sizes[kMaxDim], lo[kMaxDim] = {}, hi[kMaxDim] = {};
  sizes_of(in, sizes);
  for (size_t i = 0; i < k; ++i) {
    const size_t d = nd - 1 - i;
    const int64_t n = sizes[d];
    lo[d] = pad[2 * i];
    hi[d] = pad[2 * i + 1];
    // Negative pads (crops) are not supported here; torch takes them only for a few modes.
    ET_KERNEL_CHECK_MSG(ctx, lo[d] >= 0 && hi[d] >= 0 && lo[d] <= INT32_MAX && hi[d] <= INT32_MAX, InvalidArgument, ,
                        "%s: pads must be non-negative", op);
    ET_KERNEL_CHECK_MSG(ctx, reflect ? lo[d] < n && hi[d] < n : n > 0 || lo[d] + hi[d] == 0, InvalidArgument, ,
                        reflect ? "%s: pads (%lld, %lld) must be smaller than the dim's size %lld"
                                : "%s: pads (%lld, %lld) of an empty dim (size %lld)",
                        op, static_cast<long long>(lo[d]), static_cast<long long>(hi[d]), static_cast<long long>(n));
    sizes[d] = n + lo[d] + hi[d];
  }
  if (!resize_out(ctx, out, {sizes, nd})) return;
  if (out.numel() == 0) return;
  const size_t elem = out.element_size();
  const View full = view_of(out);
  View mid = full;
  for (size_t d = nd - k; d < nd; ++d) mid = narrowed(mid, d, lo[d], in.size(d), elem);
  copy_view(view_of(in), mid);
  // `cur` covers the finished dims whole and the rest only in their middle.
  View cur = mid;
  for (size_t d = nd - k; d < nd; ++d) {
    const int64_t n = in.size(d);
    cur.sizes[d] = full.sizes[d];
    cur.data = static_cast<const char*>(cur.data) - lo[d] * cur.strides[d] * static_cast<int64_t>(elem);
    if (lo[d] > 0) {
      View src = reflect ? narrowed(cur, d, 2 * lo[d], lo[d], elem) : narrowed(cur, d, lo[d], lo[d], elem);
      src.strides[d] = reflect ? -src.strides[d] : 0;
      copy_view(src, narrowed(cur, d, 0, lo[d], elem));
    }
    if (hi[d] > 0) {
      const int64_t edge = lo[d] + n - 1;  // the input's last element along d
      View src = reflect ? narrowed(cur, d, edge - 1, hi[d], elem) : narrowed(cur, d, edge, hi[d], elem);
      src.strides[d] = reflect ? -src.strides[d] : 0;
      copy_view(src, narrowed(cur, d, edge + 1, hi[d], elem));
    }
  }
}
void reflection_pad1d_out(KernelRuntimeContext& ctx, Args args) { edge_pad(ctx, args, 1, true); }
void reflection_pad2d_out(KernelRuntimeContext& ctx, Args args) { edge_pad(ctx, args, 2, true); }
void reflection_pad3d_out(KernelRuntimeContext& ctx, Args args) { edge_pad(ctx, args, 3, true); }
void replication_pad1d_out(KernelRuntimeContext& ctx, Args args) { edge_pad(ctx, args, 1, false); }
void replication_pad2d_out(KernelRuntimeContext& ctx, Args args) { edge_pad(ctx, args, 2, false); }
void replication_pad3d_out(KernelRuntimeContext& ctx, Args args) { edge_pad(ctx, args, 3, false); }

}  // namespace

// Registrations are generated from kernels/portable/functions.yaml (only the selected kernels).
#include "portable_registrations/op_layout.inc"

}  // namespace kernels
}  // namespace executorch
