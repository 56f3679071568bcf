// Comparisons, logical ops, where and masked_fill: predicates and selections elementwise.
#include <cmath>

#include "kernels/portable/util/elementwise.h"

namespace executorch {
namespace kernels {
namespace {

bool any_operand(const EValue& v, Operand* out) {
  if (v.isTensor()) {
    *out = tensor_operand(v.toTensor());
    return true;
  }
  return scalar_operand(v, out);
}

// self CMP other (tensor or scalar) written as 0/1 into out (bool or any dtype).
template <typename F>
void predicate_kernel(KernelRuntimeContext& ctx, Args args, F f) {
  ET_KERNEL_CHECK(ctx, args_count_ok(args, 3) && args[2]->isTensor(),
                  InvalidArgument);
  Operand ops[2];
  ET_KERNEL_CHECK(ctx, any_operand(*args[0], &ops[0]) && any_operand(*args[1], &ops[1]),
                  InvalidArgument);
  map_predicate(ctx, ops, args[2]->toTensor(), f);
}

#define ET_COMPARE_OP(name, expr) \
  void name##_out(KernelRuntimeContext& ctx, Args args) { \
    predicate_kernel(ctx, args, [](auto a, auto b) { return expr; }); \
  }
ET_COMPARE_OP(eq, a == b)
ET_COMPARE_OP(ne, a != b)
ET_COMPARE_OP(lt, a < b)
ET_COMPARE_OP(le, a <= b)
ET_COMPARE_OP(gt, a > b)
ET_COMPARE_OP(ge, a >= b)
ET_COMPARE_OP(logical_and, a != 0 && b != 0)
ET_COMPARE_OP(logical_or, a != 0 || b != 0)
ET_COMPARE_OP(logical_xor, (a != 0) != (b != 0))
#undef ET_COMPARE_OP

template <typename F>
void unary_predicate(KernelRuntimeContext& ctx, Args args, F f) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Tensor}), InvalidArgument);
  const Operand ops[1] = {tensor_operand(args[0]->toTensor())};
  map_predicate(ctx, ops, args[1]->toTensor(), f);
}
void logical_not_out(KernelRuntimeContext& ctx, Args args) {
  unary_predicate(ctx, args, [](auto a) { return a == 0; });
}
void isnan_out(KernelRuntimeContext& ctx, Args args) {
  unary_predicate(ctx, args, [](auto a) { return a != a; });
}
void isinf_out(KernelRuntimeContext& ctx, Args args) {
  unary_predicate(ctx, args, [](auto a) {
    if constexpr (std::is_integral_v<decltype(a)>) return false;
    else return std::isinf(a);
  });
}

// out = cond ? a : b with all three broadcast; a and b may be tensors or scalars.
void select_where(KernelRuntimeContext& ctx, const Operand (&ops)[3], const Tensor& out) {
  if (!prepare_elementwise(ctx, ops, 3, out)) return;
  const Walk w = plan_walk(out, ops, 3);
  void* o = out.mutable_data_ptr();
  const ScalarType ot = out.scalar_type();
  if (ot == ScalarType::Float && operand_float32(ops[1]) && operand_float32(ops[2])) {
    float* of = static_cast<float*>(o);
    const float* a = static_cast<const float*>(ops[1].data);
    const float* b = static_cast<const float*>(ops[2].data);
    const float sa = static_cast<float>(ops[1].scalar_d), sb = static_cast<float>(ops[2].scalar_d);
    walk(w, [&](int64_t oo, const int64_t* io) {
      const bool c = load_i(ops[0], io[0]) != 0;
      of[oo] = c ? (ops[1].is_scalar ? sa : a[io[1]]) : (ops[2].is_scalar ? sb : b[io[2]]);
    });
    return;
  }
  const bool ints = is_integral(ot, true);
  walk(w, [&](int64_t oo, const int64_t* io) {
    const Operand& src = load_i(ops[0], io[0]) != 0 ? ops[1] : ops[2];
    const int64_t off = &src == &ops[1] ? io[1] : io[2];
    if (ints) store_int(o, ot, oo, load_i(src, off));
    else store_double(o, ot, oo, load_d(src, off));
  });
}

// where.self_out(condition, self, other, *, out)
void where_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_count_ok(args, 4) &&
                           args[0]->isTensor() && args[3]->isTensor(),
                  InvalidArgument);
  Operand ops[3];
  ops[0] = tensor_operand(args[0]->toTensor());
  ET_KERNEL_CHECK(ctx, any_operand(*args[1], &ops[1]) && any_operand(*args[2], &ops[2]),
                  InvalidArgument);
  select_where(ctx, ops, args[3]->toTensor());
}

// masked_fill.Scalar_out(self, mask, value, *, out) = where(mask, value, self)
void masked_fill_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx,
                  args_ok(args, {Tag::Tensor, Tag::Tensor, Tag::None, Tag::Tensor}),
                  InvalidArgument);
  Operand ops[3];
  ops[0] = tensor_operand(args[1]->toTensor());
  ET_KERNEL_CHECK(ctx, any_operand(*args[2], &ops[1]), InvalidArgument);
  ops[2] = tensor_operand(args[0]->toTensor());
  select_where(ctx, ops, args[3]->toTensor());
}

}  // namespace

// Registrations are generated from kernels/portable/functions.yaml (only the selected kernels).
#include "portable_registrations/op_compare.inc"

}  // namespace kernels
}  // namespace executorch
