// Reductions: sum, mean, prod, amax/amin, argmax/argmin, max/min.dim, any/all, var/std, cumsum.
#include <cmath>
#include <limits>

#include "kernels/cpu/parallel.h"
#include "kernels/portable/util/reduce.h"

namespace executorch {
namespace kernels {
namespace {

bool supported(KernelRuntimeContext& ctx, const Tensor& t) {
  if (is_supported_dtype(t.scalar_type())) return true;
  ET_LOG(Error, "reduction: dtype %s is not supported", runtime::scalar_type_name(t.scalar_type()));
  ctx.fail(Error::InvalidType);
  return false;
}

// The `int[1]? dim` argument: None or an empty list reduces everything.
bool dims_arg(const EValue& v, Span<const int64_t>* dims, bool* all) {
  if (v.isNone()) {
    *all = true;
    return true;
  }
  if (v.isIntList()) {
    *dims = v.toIntList();
    *all = dims->size() == 0;
    return true;
  }
  if (v.isInt()) return false;
  return false;
}

enum class Fold { kSum, kMean, kProd };

// Sum, mean or product over dims into out; integers accumulate exactly in int64.
void fold(KernelRuntimeContext& ctx, const Tensor& in, Span<const int64_t> dims, bool all, bool keepdim,
          const Tensor& out, Fold kind) {
  if (!supported(ctx, in) || !supported(ctx, out)) return;
  ReducePlan p;
  if (!make_reduce_plan(ctx, in, dims, all, &p) || !prepare_reduce_out(ctx, in, p, keepdim, out)) return;
  const void* x = in.const_data_ptr();
  const ScalarType it = in.scalar_type(), ot = out.scalar_type();
  void* o = out.mutable_data_ptr();
  const bool ints = is_integral(ot, true) && is_integral(it, true) && kind != Fold::kMean;
  for (int64_t i = 0; i < p.out_count; ++i) {
    const int64_t base = reduce_base(p, i);
    if (ints) {
      uint64_t acc = kind == Fold::kProd ? 1 : 0;  // unsigned: wraps like torch, no UB
      for_each_reduced(p, base, [&](int64_t off, int64_t) {
        const uint64_t v = static_cast<uint64_t>(load_int(x, it, off));
        acc = kind == Fold::kProd ? acc * v : acc + v;
      });
      store_int(o, ot, i, static_cast<int64_t>(acc));
      continue;
    }
    double acc = kind == Fold::kProd ? 1.0 : 0.0;
    if (it == ScalarType::Float && p.red_dense) {
      const float* xf = static_cast<const float*>(x) + base;
      for (int64_t r = 0; r < p.red_count; ++r) acc = kind == Fold::kProd ? acc * xf[r] : acc + xf[r];
    } else {
      for_each_reduced(p, base, [&](int64_t off, int64_t) {
        const double v = load_double(x, it, off);
        acc = kind == Fold::kProd ? acc * v : acc + v;
      });
    }
    if (kind == Fold::kMean) acc = p.red_count > 0 ? acc / static_cast<double>(p.red_count) : NAN;
    store_double(o, ot, i, acc);
  }
}

// sum.IntList_out(self, dim?, keepdim, *, dtype?, out)
void sum_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::None, Tag::Bool, Tag::None, Tag::Tensor}), InvalidArgument);
  Span<const int64_t> dims;
  bool all = false;
  ET_KERNEL_CHECK(ctx, dims_arg(*args[1], &dims, &all), InvalidArgument);
  fold(ctx, args[0]->toTensor(), dims, all, args[2]->toBool(), args[4]->toTensor(), Fold::kSum);
}

// mean.out(self, dim?, keepdim, *, dtype?, out)
void mean_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::None, Tag::Bool, Tag::None, Tag::Tensor}), InvalidArgument);
  Span<const int64_t> dims;
  bool all = false;
  ET_KERNEL_CHECK(ctx, dims_arg(*args[1], &dims, &all), InvalidArgument);
  const Tensor out = args[4]->toTensor();
  ET_KERNEL_CHECK_MSG(ctx, is_floating(out.scalar_type()), InvalidType, , "mean: output must be floating point");
  fold(ctx, args[0]->toTensor(), dims, all, args[2]->toBool(), out, Fold::kMean);
}

// mean.dtype_out(self, *, dtype?, out) / sum.out / prod.out: everything into one element.
void mean_all_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::None, Tag::Tensor}), InvalidArgument);
  fold(ctx, args[0]->toTensor(), {}, true, false, args[2]->toTensor(), Fold::kMean);
}
void sum_all_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::None, Tag::Tensor}), InvalidArgument);
  fold(ctx, args[0]->toTensor(), {}, true, false, args[2]->toTensor(), Fold::kSum);
}
void prod_all_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::None, Tag::Tensor}), InvalidArgument);
  fold(ctx, args[0]->toTensor(), {}, true, false, args[2]->toTensor(), Fold::kProd);
}
// prod.int_out(self, int dim, keepdim, *, dtype?, out)
void prod_dim_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Int, Tag::Bool, Tag::None, Tag::Tensor}), InvalidArgument);
  const int64_t dim = args[1]->toInt();
  fold(ctx, args[0]->toTensor(), {&dim, 1}, false, args[2]->toBool(), args[4]->toTensor(), Fold::kProd);
}

// Max/min (NaN wins) with the first index of the winner; writes values and/or indices.
void extreme(KernelRuntimeContext& ctx, const Tensor& in, Span<const int64_t> dims, bool all, bool keepdim,
             const Tensor* values, const Tensor* indices, bool is_max) {
  if (!supported(ctx, in)) return;
  ReducePlan p;
  if (!make_reduce_plan(ctx, in, dims, all, &p)) return;
  ET_KERNEL_CHECK_MSG(ctx, p.red_count > 0, InvalidArgument, , "max/min: cannot reduce over an empty dimension");
  if (values && (!supported(ctx, *values) || !prepare_reduce_out(ctx, in, p, keepdim, *values))) return;
  if (indices) {
    ET_KERNEL_CHECK_MSG(ctx, indices->scalar_type() == ScalarType::Long, InvalidType, ,
                        "argmax/argmin: indices must be int64");
    if (!prepare_reduce_out(ctx, in, p, keepdim, *indices)) return;
  }
  const void* x = in.const_data_ptr();
  const ScalarType it = in.scalar_type();
  const bool ints = is_integral(it, true);
  for (int64_t i = 0; i < p.out_count; ++i) {
    double best = 0;
    int64_t ibest = 0, where = -1;
    bool nan = false;
    for_each_reduced(p, reduce_base(p, i), [&](int64_t off, int64_t r) {
      if (nan) return;
      if (ints) {
        const int64_t v = load_int(x, it, off);
        if (where < 0 || (is_max ? v > ibest : v < ibest)) ibest = v, where = r;
        return;
      }
      const double v = load_double(x, it, off);
      if (v != v) {
        nan = true;
        best = v;
        where = r;
      } else if (where < 0 || (is_max ? v > best : v < best)) {
        best = v;
        where = r;
      }
    });
    if (values) {
      if (ints)
        store_int(values->mutable_data_ptr(), values->scalar_type(), i, ibest);
      else
        store_double(values->mutable_data_ptr(), values->scalar_type(), i, best);
    }
    if (indices) indices->mutable_data_ptr<int64_t>()[i] = where;
  }
}

// amax.out / amin.out(self, int[1] dim, keepdim, *, out)
void amax_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::ListInt, Tag::Bool, Tag::Tensor}), InvalidArgument);
  const Span<const int64_t> dims = args[1]->toIntList();
  const Tensor out = args[3]->toTensor();
  extreme(ctx, args[0]->toTensor(), dims, dims.size() == 0, args[2]->toBool(), &out, nullptr, true);
}
void amin_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::ListInt, Tag::Bool, Tag::Tensor}), InvalidArgument);
  const Span<const int64_t> dims = args[1]->toIntList();
  const Tensor out = args[3]->toTensor();
  extreme(ctx, args[0]->toTensor(), dims, dims.size() == 0, args[2]->toBool(), &out, nullptr, false);
}

// argmax.out / argmin.out(self, int? dim, keepdim, *, out); no dim: index into the flattening.
void arg_extreme(KernelRuntimeContext& ctx, Args args, bool is_max) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::None, Tag::Bool, Tag::Tensor}), InvalidArgument);
  ET_KERNEL_CHECK(ctx, args[1]->isNone() || args[1]->isInt(), InvalidArgument);
  const Tensor in = args[0]->toTensor(), out = args[3]->toTensor();
  const int64_t dim = args[1]->toInt();
  const bool all = args[1]->isNone();
  // Without a dim, keepdim keeps every dim as size 1.
  extreme(ctx, in, {&dim, all ? 0u : 1u}, all, args[2]->toBool(), nullptr, &out, is_max);
}
void argmax_out(KernelRuntimeContext& ctx, Args args) { arg_extreme(ctx, args, true); }
void argmin_out(KernelRuntimeContext& ctx, Args args) { arg_extreme(ctx, args, false); }

// max.dim_max / min.dim_min(self, int dim, keepdim, *, values, indices)
void max_dim_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Int, Tag::Bool, Tag::Tensor, Tag::Tensor}), InvalidArgument);
  const int64_t dim = args[1]->toInt();
  const Tensor v = args[3]->toTensor(), i = args[4]->toTensor();
  extreme(ctx, args[0]->toTensor(), {&dim, 1}, false, args[2]->toBool(), &v, &i, true);
}
// max.unary_out / min.unary_out(self, *, out): the extreme of every element, as a 0-d tensor.
void max_unary_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Tensor}), InvalidArgument);
  const Tensor out = args[1]->toTensor();
  extreme(ctx, args[0]->toTensor(), {}, true, false, &out, nullptr, true);
}
void min_unary_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Tensor}), InvalidArgument);
  const Tensor out = args[1]->toTensor();
  extreme(ctx, args[0]->toTensor(), {}, true, false, &out, nullptr, false);
}
void min_dim_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Int, Tag::Bool, Tag::Tensor, Tag::Tensor}), InvalidArgument);
  const int64_t dim = args[1]->toInt();
  const Tensor v = args[3]->toTensor(), i = args[4]->toTensor();
  extreme(ctx, args[0]->toTensor(), {&dim, 1}, false, args[2]->toBool(), &v, &i, false);
}

// Input bytes per chunk of the any/all fast path: enough that a chunk outweighs handing it out.
constexpr int64_t kAnyAllGrain = 1 << 16;

// any / all over dims, written as 0/1 in out's dtype.
void any_all(KernelRuntimeContext& ctx, const Tensor& in, Span<const int64_t> dims, bool all_dims, bool keepdim,
             const Tensor& out, bool is_any) {
  if (!supported(ctx, in) || !supported(ctx, out)) return;
  ReducePlan p;
  if (!make_reduce_plan(ctx, in, dims, all_dims, &p) || !prepare_reduce_out(ctx, in, p, keepdim, out)) return;
  const void* x = in.const_data_ptr();
  const ScalarType it = in.scalar_type();
  if (p.red_dense && (it == ScalarType::Bool || it == ScalarType::Byte) && out.scalar_type() == ScalarType::Bool) {
    // The hot case (a mask reduced over its last dim): any is the OR of a row's bytes and all
    // is their minimum, both nonzero exactly when the generic test is true; loops that vectorize.
    const uint8_t* x8 = static_cast<const uint8_t*>(x);
    bool* o = out.mutable_data_ptr<bool>();
    const int64_t n = p.red_count;
    const int64_t grain = n > 0 && kAnyAllGrain / n > 0 ? kAnyAllGrain / n : 1;
    cpu::parallel_for(0, p.out_count, grain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const uint8_t* row = x8 + reduce_base(p, i);
        uint8_t acc = is_any ? 0 : 0xff;
        if (is_any) {
          for (int64_t r = 0; r < n; ++r) acc |= row[r];
        } else {
          for (int64_t r = 0; r < n; ++r) acc = row[r] < acc ? row[r] : acc;
        }
        o[i] = acc != 0;
      }
    });
    return;
  }
  for (int64_t i = 0; i < p.out_count; ++i) {
    bool acc = !is_any;
    for_each_reduced(p, reduce_base(p, i), [&](int64_t off, int64_t) {
      const bool v = load_double(x, it, off) != 0.0;
      acc = is_any ? (acc || v) : (acc && v);
    });
    store_int(out.mutable_data_ptr(), out.scalar_type(), i, acc ? 1 : 0);
  }
}
template <bool kAny>
void any_all_dim_out(KernelRuntimeContext& ctx, Args args) {  // (self, int dim, keepdim, *, out)
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Int, Tag::Bool, Tag::Tensor}), InvalidArgument);
  const int64_t dim = args[1]->toInt();
  any_all(ctx, args[0]->toTensor(), {&dim, 1}, false, args[2]->toBool(), args[3]->toTensor(), kAny);
}
template <bool kAny>
void any_all_dims_out(KernelRuntimeContext& ctx, Args args) {  // (self, int[]? dim, keepdim, *, out)
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::None, Tag::Bool, Tag::Tensor}), InvalidArgument);
  Span<const int64_t> dims;
  bool all = false;
  ET_KERNEL_CHECK(ctx, dims_arg(*args[1], &dims, &all), InvalidArgument);
  any_all(ctx, args[0]->toTensor(), dims, all, args[2]->toBool(), args[3]->toTensor(), kAny);
}
template <bool kAny>
void any_all_all_out(KernelRuntimeContext& ctx, Args args) {  // (self, *, out)
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Tensor}), InvalidArgument);
  any_all(ctx, args[0]->toTensor(), {}, true, false, args[1]->toTensor(), kAny);
}

// Variance (or its square root) over dims into `out`, and the mean into `mean_out` when given.
void variance(KernelRuntimeContext& ctx, const Tensor& in, const EValue& dims_v, double correction, bool keepdim,
              const Tensor& out, const Tensor* mean_out, bool take_sqrt) {
  Span<const int64_t> dims;
  bool all = false;
  ET_KERNEL_CHECK(ctx, dims_arg(dims_v, &dims, &all), InvalidArgument);
  ET_KERNEL_CHECK_MSG(ctx, is_floating(in.scalar_type()) && is_floating(out.scalar_type()), InvalidType, ,
                      "var/std: only floating point");
  ET_KERNEL_CHECK_MSG(ctx, !mean_out || is_floating(mean_out->scalar_type()), InvalidType, ,
                      "var_mean: the mean output must be floating point");
  ReducePlan p;
  if (!make_reduce_plan(ctx, in, dims, all, &p) || !prepare_reduce_out(ctx, in, p, keepdim, out)) return;
  if (mean_out && !prepare_reduce_out(ctx, in, p, keepdim, *mean_out)) return;
  const void* x = in.const_data_ptr();
  for (int64_t i = 0; i < p.out_count; ++i) {
    const int64_t base = reduce_base(p, i);
    double sum = 0, sq = 0;
    for_each_reduced(p, base, [&](int64_t off, int64_t) { sum += load_double(x, in.scalar_type(), off); });
    const double mu = p.red_count > 0 ? sum / p.red_count : NAN;
    for_each_reduced(p, base, [&](int64_t off, int64_t) {
      const double d = load_double(x, in.scalar_type(), off) - mu;
      sq += d * d;
    });
    const double denom = static_cast<double>(p.red_count) - correction;
    const double var = denom > 0 ? sq / denom : (denom == 0 && sq == 0 ? NAN : sq / denom);
    store_double(out.mutable_data_ptr(), out.scalar_type(), i, take_sqrt ? std::sqrt(var) : var);
    if (mean_out) store_double(mean_out->mutable_data_ptr(), mean_out->scalar_type(), i, mu);
  }
}

// The correction argument: a Scalar, absent (1), or the legacy `unbiased` bool (1 or 0).
double correction_of(const EValue& v) {
  if (v.isBool()) return v.toBool() ? 1.0 : 0.0;
  return v.isScalar() ? v.toScalarDouble() : 1.0;
}

// var.correction_out / std.correction_out(self, dim?, *, correction?, keepdim, out), and
// var.out / std.out(self, dim?, unbiased, keepdim, *, out): the bool is a correction of 1 or 0.
template <bool kStd>
void var_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::None, Tag::None, Tag::Bool, Tag::Tensor}), InvalidArgument);
  variance(ctx, args[0]->toTensor(), *args[1], correction_of(*args[2]), args[3]->toBool(), args[4]->toTensor(), nullptr,
           kStd);
}

// var_mean.correction_out(self, dim?, *, correction?, keepdim, out0, out1): the variance and the mean.
void var_mean_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::None, Tag::None, Tag::Bool, Tag::Tensor, Tag::Tensor}),
                  InvalidArgument);
  const Tensor mean = args[5]->toTensor();
  variance(ctx, args[0]->toTensor(), *args[1], correction_of(*args[2]), args[3]->toBool(), args[4]->toTensor(), &mean,
           false);
}

// cumsum.out(self, int dim, *, dtype?, out)
void cumsum_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Int, Tag::None, Tag::Tensor}), InvalidArgument);
  const Tensor in = args[0]->toTensor(), out = args[3]->toTensor();
  if (!supported(ctx, in) || !supported(ctx, out) || !resize_out(ctx, out, in)) return;
  const int64_t d_arg = args[1]->toInt();
  ReducePlan p;
  if (!make_reduce_plan(ctx, in, {&d_arg, 1}, false, &p)) return;
  int64_t dim = 0;
  normalize_dim(d_arg, in.dim(), &dim);
  const int64_t out_stride = in.dim() == 0 ? 1 : out.stride(dim);
  const bool ints = is_integral(out.scalar_type(), true);
  // The kept-dim bases in `out` use out's own strides.
  ReducePlan po;
  if (!make_reduce_plan(ctx, out, {&d_arg, 1}, false, &po)) return;
  for (int64_t i = 0; i < p.out_count; ++i) {
    const int64_t ib = reduce_base(p, i), ob = reduce_base(po, i);
    double acc = 0;
    uint64_t iacc = 0;
    for_each_reduced(p, ib, [&](int64_t off, int64_t r) {
      if (ints) {
        iacc += static_cast<uint64_t>(load_int(in.const_data_ptr(), in.scalar_type(), off));
        store_int(out.mutable_data_ptr(), out.scalar_type(), ob + r * out_stride, static_cast<int64_t>(iacc));
      } else {
        acc += load_double(in.const_data_ptr(), in.scalar_type(), off);
        store_double(out.mutable_data_ptr(), out.scalar_type(), ob + r * out_stride, acc);
      }
    });
  }
}

}  // namespace

// Registrations are generated from kernels/portable/functions.yaml (only the selected kernels).
#include "portable_registrations/op_reduce.inc"

}  // namespace kernels
}  // namespace executorch
