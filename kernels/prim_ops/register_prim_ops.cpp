// Primitive ops on scalars and tensor metadata (symbolic sizes, scalar arithmetic, et_view):
// what programs with dynamic shapes compute between kernels. Each writes its result EValue.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/portable/util/kernel_util.h"

namespace executorch {
namespace kernels {
namespace {

// Python-style floor division and modulo on integers; division by zero yields 0, not UB.
int64_t floordiv_int(int64_t a, int64_t b) {
  if (b == 0 || (b == -1 && a == INT64_MIN)) return b == 0 ? 0 : a;
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t mod_int(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

bool scalars(Args args, size_t n) {
  if (!args_count_ok(args, n + 1)) return false;
  for (size_t i = 0; i < n; ++i)
    if (!args[i]->isScalar()) return false;
  return true;
}

// aten::sym_size.int(Tensor self, int dim) -> int
void sym_size(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Int, Tag::None}), InvalidArgument);
  const Tensor t = args[0]->toTensor();
  int64_t d;
  ET_KERNEL_CHECK_MSG(ctx, normalize_dim(args[1]->toInt(), t.dim(), &d) && t.dim() > 0, InvalidArgument, ,
                      "sym_size: dim out of range");
  *args[2] = EValue(t.size(d));
}

// aten::sym_stride.int(Tensor self, int dim) -> int: the element stride of a dimension, as the
// tensor's dim order lays it out.
void sym_stride(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Int, Tag::None}), InvalidArgument);
  const Tensor t = args[0]->toTensor();
  int64_t d;
  ET_KERNEL_CHECK_MSG(ctx, normalize_dim(args[1]->toInt(), t.dim(), &d) && t.dim() > 0, InvalidArgument, ,
                      "sym_stride: dim out of range");
  *args[2] = EValue(static_cast<int64_t>(t.strides()[d]));
}

// aten::sym_numel(Tensor self) -> int
void sym_numel(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::None}), InvalidArgument);
  *args[1] = EValue(args[0]->toTensor().numel());
}

// aten::_local_scalar_dense(Tensor self) -> Scalar: the single element of a one-element tensor.
void local_scalar_dense(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::None}), InvalidArgument);
  const Tensor t = args[0]->toTensor();
  ET_KERNEL_CHECK_MSG(ctx, t.numel() == 1 && is_supported_dtype(t.scalar_type()), InvalidArgument, ,
                      "_local_scalar_dense: needs a one-element tensor of a supported dtype");
  const ScalarType st = t.scalar_type();
  if (st == ScalarType::Bool)
    *args[1] = EValue(load_int(t.const_data_ptr(), st, 0) != 0);
  else if (is_integral(st, false))
    *args[1] = EValue(load_int(t.const_data_ptr(), st, 0));
  else
    *args[1] = EValue(load_double(t.const_data_ptr(), st, 0));
}

// Binary arithmetic: int op int stays int, anything with a double is double.
template <typename IntOp, typename DoubleOp>
void arith(KernelRuntimeContext& ctx, Args args, IntOp iop, DoubleOp dop) {
  ET_KERNEL_CHECK(ctx, scalars(args, 2), InvalidArgument);
  const EValue &a = *args[0], &b = *args[1];
  if (!a.isDouble() && !b.isDouble())
    *args[2] = EValue(iop(a.toScalarInt(), b.toScalarInt()));
  else
    *args[2] = EValue(dop(a.toScalarDouble(), b.toScalarDouble()));
}

void add(KernelRuntimeContext& ctx, Args a) {
  arith(
      ctx, a,
      [](int64_t x, int64_t y) { return static_cast<int64_t>(static_cast<uint64_t>(x) + static_cast<uint64_t>(y)); },
      [](double x, double y) { return x + y; });
}
void sub(KernelRuntimeContext& ctx, Args a) {
  arith(
      ctx, a,
      [](int64_t x, int64_t y) { return static_cast<int64_t>(static_cast<uint64_t>(x) - static_cast<uint64_t>(y)); },
      [](double x, double y) { return x - y; });
}
void mul(KernelRuntimeContext& ctx, Args a) {
  arith(
      ctx, a,
      [](int64_t x, int64_t y) { return static_cast<int64_t>(static_cast<uint64_t>(x) * static_cast<uint64_t>(y)); },
      [](double x, double y) { return x * y; });
}
void floordiv(KernelRuntimeContext& ctx, Args a) {
  arith(ctx, a, floordiv_int, [](double x, double y) { return std::floor(x / y); });
}
void mod(KernelRuntimeContext& ctx, Args a) {
  arith(ctx, a, mod_int, [](double x, double y) {
    double r = std::fmod(x, y);
    return r != 0 && ((r < 0) != (y < 0)) ? r + y : r;
  });
}
void sym_max(KernelRuntimeContext& ctx, Args a) {
  arith(ctx, a, [](int64_t x, int64_t y) { return x > y ? x : y; }, [](double x, double y) { return std::fmax(x, y); });
}
void sym_min(KernelRuntimeContext& ctx, Args a) {
  arith(ctx, a, [](int64_t x, int64_t y) { return x < y ? x : y; }, [](double x, double y) { return std::fmin(x, y); });
}
void truediv(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, scalars(args, 2), InvalidArgument);
  *args[2] = EValue(args[0]->toScalarDouble() / args[1]->toScalarDouble());
}

template <typename Cmp>
void compare(KernelRuntimeContext& ctx, Args args, Cmp cmp) {
  ET_KERNEL_CHECK(ctx, scalars(args, 2), InvalidArgument);
  const EValue &a = *args[0], &b = *args[1];
  if (!a.isDouble() && !b.isDouble())
    *args[2] = EValue(cmp(a.toScalarInt(), b.toScalarInt()));
  else
    *args[2] = EValue(cmp(a.toScalarDouble(), b.toScalarDouble()));
}
void eq(KernelRuntimeContext& ctx, Args a) {
  compare(ctx, a, [](auto x, auto y) { return x == y; });
}
void gt(KernelRuntimeContext& ctx, Args a) {
  compare(ctx, a, [](auto x, auto y) { return x > y; });
}
void lt(KernelRuntimeContext& ctx, Args a) {
  compare(ctx, a, [](auto x, auto y) { return x < y; });
}
void ge(KernelRuntimeContext& ctx, Args a) {
  compare(ctx, a, [](auto x, auto y) { return x >= y; });
}
void le(KernelRuntimeContext& ctx, Args a) {
  compare(ctx, a, [](auto x, auto y) { return x <= y; });
}

void neg(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, scalars(args, 1), InvalidArgument);
  if (args[0]->isDouble())
    *args[1] = EValue(-args[0]->toDouble());
  else
    *args[1] = EValue(static_cast<int64_t>(0 - static_cast<uint64_t>(args[0]->toScalarInt())));
}
void sym_not(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, scalars(args, 1), InvalidArgument);
  *args[1] = EValue(args[0]->toScalarDouble() == 0.0);
}
void sym_float(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, scalars(args, 1), InvalidArgument);
  *args[1] = EValue(args[0]->toScalarDouble());
}

template <typename F>
void rounding(KernelRuntimeContext& ctx, Args args, F f) {
  ET_KERNEL_CHECK(ctx, scalars(args, 1), InvalidArgument);
  *args[1] = args[0]->isDouble() ? EValue(saturating_int(f(args[0]->toDouble()))) : EValue(args[0]->toScalarInt());
}
void sym_int(KernelRuntimeContext& ctx, Args a) {
  rounding(ctx, a, [](double v) { return std::trunc(v); });
}
void ceil_op(KernelRuntimeContext& ctx, Args a) {
  rounding(ctx, a, [](double v) { return std::ceil(v); });
}
void trunc_op(KernelRuntimeContext& ctx, Args a) {
  rounding(ctx, a, [](double v) { return std::trunc(v); });
}
// Python's round(): half to even, which nearbyint does in the default rounding mode.
void round_op(KernelRuntimeContext& ctx, Args a) {
  rounding(ctx, a, [](double v) { return std::nearbyint(v); });
}

// sym_ite(bool cond, Scalar a, Scalar b) -> a if cond else b
void sym_ite(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, scalars(args, 3), InvalidArgument);
  *args[3] = args[0]->toScalarDouble() != 0.0 ? *args[1] : *args[2];
}

// et_view(Tensor self, int[] size) -> Tensor: the output aliases self's memory with new sizes.
void et_view(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::ListInt, Tag::Tensor}), InvalidArgument);
  const Tensor self = args[0]->toTensor(), out = args[2]->toTensor();
  const Span<const int64_t> req = args[1]->toIntList();
  ET_KERNEL_CHECK_MSG(ctx, static_cast<int64_t>(req.size()) == out.dim() && req.size() <= kMaxDim, InvalidArgument, ,
                      "et_view: size rank differs from the output's");
  ET_KERNEL_CHECK_MSG(ctx, self.is_contiguous() && out.is_contiguous() && self.scalar_type() == out.scalar_type(),
                      NotSupported, , "et_view: needs contiguous tensors of one dtype");
  int64_t sizes[kMaxDim];
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < req.size(); ++i) {
    sizes[i] = req[i];
    if (req[i] == -1 && infer < 0)
      infer = static_cast<int64_t>(i);
    else
      ET_KERNEL_CHECK_MSG(ctx, req[i] >= 0 && !mul_overflows(known, req[i], &known), InvalidArgument, ,
                          "et_view: bad size, or sizes whose product overflows int64");
  }
  if (infer >= 0) {
    ET_KERNEL_CHECK_MSG(ctx, known > 0 && self.numel() % known == 0, InvalidArgument, , "et_view: cannot infer -1");
    sizes[infer] = self.numel() / known;
    known *= sizes[infer];
  }
  ET_KERNEL_CHECK_MSG(ctx, known == self.numel(), InvalidArgument, , "et_view: element count changes");
  // The view owns no memory: it borrows self's buffer, so its capacity is self's.
  runtime::TensorImpl* impl = out.unsafeGetTensorImpl();
  impl->set_capacity_bytes(self.nbytes());
  if (!resize_out(ctx, out, {sizes, req.size()})) return;
  impl->set_data(self.mutable_data_ptr());
}

// et_copy_index(Tensor(a!) copy_to, Tensor copy_from, int index): copy_to[index] = copy_from,
// growing copy_to's first dimension to index + 1 within its capacity (how torch.map stacks the
// result of each iteration).
void et_copy_index(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Tensor, Tag::Int}), InvalidArgument);
  const Tensor to = args[0]->toTensor(), from = args[1]->toTensor();
  const int64_t index = args[2]->toInt();
  ET_KERNEL_CHECK_MSG(
      ctx,
      index >= 0 && index < INT32_MAX && to.dim() == from.dim() + 1 && to.dim() <= static_cast<int64_t>(kMaxDim) &&
          to.scalar_type() == from.scalar_type() && from.is_contiguous(),
      InvalidArgument, , "et_copy_index: needs a contiguous slice of one rank less, same dtype, 0 <= index < 2^31-1");
  int64_t sizes[kMaxDim];
  sizes[0] = index + 1;
  for (int64_t d = 0; d < from.dim(); ++d) {
    ET_KERNEL_CHECK_MSG(ctx, to.size(d + 1) == from.size(d), InvalidArgument, , "et_copy_index: slice shape differs");
    sizes[d + 1] = from.size(d);
  }
  if (!resize_out(ctx, to, {sizes, static_cast<size_t>(to.dim())})) return;
  ET_KERNEL_CHECK_MSG(ctx, to.is_contiguous(), NotSupported, , "et_copy_index: needs a contiguous destination");
  const size_t slice = from.nbytes();
  if (slice) std::memcpy(static_cast<char*>(to.mutable_data_ptr()) + slice * index, from.const_data_ptr(), slice);
}

}  // namespace

// Registrations are generated from kernels/portable/functions.yaml (only the selected kernels).
#include "portable_registrations/register_prim_ops.inc"

}  // namespace kernels
}  // namespace executorch
