// Comparisons, logical ops, where and masked_fill: predicates and selections elementwise.
#include <cmath>
#include <cstring>

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
  ET_KERNEL_CHECK(ctx, args_count_ok(args, 3) && args[2]->isTensor(), InvalidArgument);
  Operand ops[2];
  ET_KERNEL_CHECK(ctx, any_operand(*args[0], &ops[0]) && any_operand(*args[1], &ops[1]), InvalidArgument);
  map_predicate(ctx, ops, args[2]->toTensor(), f);
}

#define ET_COMPARE_OP(name, expr)                                     \
  void name##_out(KernelRuntimeContext& ctx, Args args) {             \
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
    if constexpr (std::is_integral_v<decltype(a)>)
      return false;
    else
      return std::isinf(a);
  });
}

// A float32 where operand that is a scalar or a row-major tensor of the output's shape.
bool where_value_dense(const Operand& v, const Tensor& out) {
  if (v.is_scalar) return true;
  if (v.type != ScalarType::Float || !v.row_major || v.ndim != static_cast<size_t>(out.dim())) return false;
  for (size_t d = 0; d < v.ndim; ++d)
    if (v.sizes[d] != out.sizes()[d]) return false;
  return true;
}

// The hot cases of where into a row-major float32 output: a and b scalars or dense, and a
// row-major Bool condition that has the output's shape or is broadcast over its trailing dims
// only (the [..., L, 1] row mask attention leaves after softmax). Then each condition element
// selects a run of `inner` consecutive outputs, copied whole. False when the case does not fit.
bool where_fast(const Operand (&ops)[3], const Tensor& out) {
  const Operand& c = ops[0];
  if (out.scalar_type() != ScalarType::Float || !out.is_contiguous() || c.is_scalar || c.type != ScalarType::Bool ||
      !c.row_major || !where_value_dense(ops[1], out) || !where_value_dense(ops[2], out))
    return false;
  const size_t nd = static_cast<size_t>(out.dim());
  if (nd == 0 || c.ndim > nd) return false;
  const size_t shift = nd - c.ndim;
  // Dims [0, k) the condition spans as the output does; dims [k, nd) are all size 1 in it.
  size_t k = nd;
  while (k > 0 && (k <= shift || c.sizes[k - 1 - shift] == 1)) --k;
  int64_t rows = 1, inner = 1;
  for (size_t d = 0; d < nd; ++d) {
    const int64_t cs = d < shift ? 1 : c.sizes[d - shift];
    if (d < k && cs != out.sizes()[d]) return false;
    (d < k ? rows : inner) *= out.sizes()[d];
  }
  if (rows == 0 || inner == 0) return true;
  const uint8_t* cond = static_cast<const uint8_t*>(c.data);
  float* o = out.mutable_data_ptr<float>();
  const float* a = static_cast<const float*>(ops[1].data);
  const float* b = static_cast<const float*>(ops[2].data);
  const float sa = static_cast<float>(ops[1].scalar_d), sb = static_cast<float>(ops[2].scalar_d);
  const bool da = !ops[1].is_scalar, db = !ops[2].is_scalar;
  if (inner == 1) {
    cpu::parallel_for(0, rows, kElementwiseGrain, [&](int64_t lo, int64_t hi) {
      if (da && db) {
        for (int64_t i = lo; i < hi; ++i) o[i] = cond[i] != 0 ? a[i] : b[i];
      } else {
        for (int64_t i = lo; i < hi; ++i) o[i] = cond[i] != 0 ? (da ? a[i] : sa) : (db ? b[i] : sb);
      }
    });
    return true;
  }
  const int64_t grain = kElementwiseGrain / inner > 0 ? kElementwiseGrain / inner : 1;
  cpu::parallel_for(0, rows, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const bool pick_a = cond[r] != 0;
      const float* src = pick_a ? (da ? a : nullptr) : (db ? b : nullptr);
      float* dst = o + r * inner;
      if (src != nullptr) {
        std::memcpy(dst, src + r * inner, static_cast<size_t>(inner) * sizeof(float));
      } else {
        const float v = pick_a ? sa : sb;
        for (int64_t j = 0; j < inner; ++j) dst[j] = v;
      }
    }
  });
  return true;
}

// out = cond ? a : b with all three broadcast; a and b may be tensors or scalars.
void select_where(KernelRuntimeContext& ctx, const Operand (&ops)[3], const Tensor& out) {
  if (!prepare_elementwise(ctx, ops, 3, out)) return;
  if (where_fast(ops, out)) return;
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
    if (ints)
      store_int(o, ot, oo, load_i(src, off));
    else
      store_double(o, ot, oo, load_d(src, off));
  });
}

// where.self_out(condition, self, other, *, out)
void where_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_count_ok(args, 4) && args[0]->isTensor() && args[3]->isTensor(), InvalidArgument);
  Operand ops[3];
  ops[0] = tensor_operand(args[0]->toTensor());
  ET_KERNEL_CHECK(ctx, any_operand(*args[1], &ops[1]) && any_operand(*args[2], &ops[2]), InvalidArgument);
  select_where(ctx, ops, args[3]->toTensor());
}

// masked_fill.Scalar_out(self, mask, value, *, out) = where(mask, value, self)
void masked_fill_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Tensor, Tag::None, Tag::Tensor}), InvalidArgument);
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
