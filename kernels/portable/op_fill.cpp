// Tensor factories with preallocated outputs: full/zeros/ones (+ _like), fill, empty, scalar_tensor, arange.
#include <cmath>

#include "kernels/portable/util/copy.h"
#include "kernels/portable/util/kernel_util.h"

namespace executorch {
namespace kernels {
namespace {

bool fillable(KernelRuntimeContext& ctx, const Tensor& out) {
  if (is_supported_dtype(out.scalar_type())) return true;
  ET_LOG(Error, "fill: dtype %s is not supported", runtime::scalar_type_name(out.scalar_type()));
  ctx.fail(Error::InvalidType);
  return false;
}

// Fills `out` (resized to `sizes`) with a Scalar: integers stay exact, others go through double.
void fill_with(KernelRuntimeContext& ctx, const Tensor& out, Span<const int64_t> sizes, const EValue& value) {
  if (!fillable(ctx, out) || !resize_out(ctx, out, sizes)) return;
  if (value.isInt() && is_integral(out.scalar_type(), true)) {
    for (int64_t i = 0; i < out.numel(); ++i) store_int(out.mutable_data_ptr(), out.scalar_type(), i, value.toInt());
    return;
  }
  fill_view(view_of(out), value.toScalarDouble());
}

// full.out(size, fill_value, *, out)
void full_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::ListInt, Tag::ListScalar, Tag::Tensor}), InvalidArgument);
  fill_with(ctx, args[2]->toTensor(), args[0]->toIntList(), *args[1]);
}
// zeros.out / ones.out(size, *, out)
void zeros_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::ListInt, Tag::Tensor}), InvalidArgument);
  fill_with(ctx, args[1]->toTensor(), args[0]->toIntList(), EValue(static_cast<int64_t>(0)));
}
void ones_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::ListInt, Tag::Tensor}), InvalidArgument);
  fill_with(ctx, args[1]->toTensor(), args[0]->toIntList(), EValue(static_cast<int64_t>(1)));
}

// full_like.out(self, fill_value, *, memory_format?, out); zeros_like/ones_like.out(self, *, memory_format?, out)
void like(KernelRuntimeContext& ctx, const Tensor& self, const Tensor& out, const EValue& value) {
  int64_t sizes[kMaxDim];
  const size_t n = sizes_of(self, sizes);
  fill_with(ctx, out, {sizes, n}, value);
}
void full_like_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::ListScalar, Tag::None, Tag::Tensor}), InvalidArgument);
  like(ctx, args[0]->toTensor(), args[3]->toTensor(), *args[1]);
}
void zeros_like_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::None, Tag::Tensor}), InvalidArgument);
  like(ctx, args[0]->toTensor(), args[2]->toTensor(), EValue(static_cast<int64_t>(0)));
}
void ones_like_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::None, Tag::Tensor}), InvalidArgument);
  like(ctx, args[0]->toTensor(), args[2]->toTensor(), EValue(static_cast<int64_t>(1)));
}

// scalar_tensor.out(s, *, out): a 0-d tensor holding s.
void scalar_tensor_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::ListScalar, Tag::Tensor}), InvalidArgument);
  fill_with(ctx, args[1]->toTensor(), {}, *args[0]);
}

// start, start + step, ... below end (above, for negative steps).
void arange(KernelRuntimeContext& ctx, const EValue& start, const EValue& end, const EValue& step, const Tensor& out) {
  const double s = start.toScalarDouble(), e = end.toScalarDouble(), st = step.toScalarDouble();
  ET_KERNEL_CHECK_MSG(ctx, st != 0 && std::isfinite(s) && std::isfinite(e) && (e - s) / st >= 0, InvalidArgument, ,
                      "arange: step must be nonzero and move start toward end");
  const double count = std::ceil((e - s) / st);
  ET_KERNEL_CHECK_MSG(ctx, count < 9.0e15, InvalidArgument, , "arange: too many elements");
  const int64_t n = static_cast<int64_t>(count);
  if (!fillable(ctx, out) || !resize_out(ctx, out, {&n, 1})) return;
  const bool ints = start.isInt() && step.isInt() && is_integral(out.scalar_type(), false);
  for (int64_t i = 0; i < n; ++i) {
    // The value lies between start and end, but i * step alone may not fit: compute through uint64.
    if (ints)
      store_int(out.mutable_data_ptr(), out.scalar_type(), i,
                static_cast<int64_t>(static_cast<uint64_t>(start.toInt()) +
                                     static_cast<uint64_t>(i) * static_cast<uint64_t>(step.toInt())));
    else
      store_double(out.mutable_data_ptr(), out.scalar_type(), i, s + static_cast<double>(i) * st);
  }
}
// arange.out(end, *, out) / arange.start_out(start, end, step, *, out)
void arange_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::ListScalar, Tag::Tensor}), InvalidArgument);
  const EValue zero(static_cast<int64_t>(0)), one(static_cast<int64_t>(1));
  arange(ctx, zero, *args[0], one, args[1]->toTensor());
}
void arange_start_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::ListScalar, Tag::ListScalar, Tag::ListScalar, Tag::Tensor}),
                  InvalidArgument);
  arange(ctx, *args[0], *args[1], *args[2], args[3]->toTensor());
}

// fill.Scalar_out(self, value, *, out) / fill.Tensor_out(self, value, *, out): self's shape, every
// element `value` (a Scalar, or a 0-d tensor's one element).
void fill_scalar_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::ListScalar, Tag::Tensor}), InvalidArgument);
  like(ctx, args[0]->toTensor(), args[2]->toTensor(), *args[1]);
}
void fill_tensor_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Tensor, Tag::Tensor}), InvalidArgument);
  const Tensor value = args[1]->toTensor();
  ET_KERNEL_CHECK_MSG(ctx, value.dim() == 0 && is_supported_dtype(value.scalar_type()), InvalidArgument, ,
                      "fill: the value must be a 0-d tensor of a supported dtype, got %lld dims of %s",
                      static_cast<long long>(value.dim()), runtime::scalar_type_name(value.scalar_type()));
  const EValue v = is_integral(value.scalar_type(), true)
                       ? EValue(load_int(value.const_data_ptr(), value.scalar_type(), 0))
                       : EValue(load_double(value.const_data_ptr(), value.scalar_type(), 0));
  like(ctx, args[0]->toTensor(), args[2]->toTensor(), v);
}

// empty.out(size, *, memory_format?, out): the shape only; the contents stay whatever they were.
void empty_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::ListInt, Tag::None, Tag::Tensor}), InvalidArgument);
  resize_out(ctx, args[2]->toTensor(), args[0]->toIntList());
}

}  // namespace

// Registrations are generated from kernels/portable/functions.yaml (only the selected kernels).
#include "portable_registrations/op_fill.inc"

}  // namespace kernels
}  // namespace executorch
