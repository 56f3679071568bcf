// Reduction planning: split dims into kept and reduced, with strides for each side.
#include "kernels/portable/util/reduce.h"

namespace executorch {
namespace kernels {

bool make_reduce_plan(KernelRuntimeContext& ctx, const Tensor& in, Span<const int64_t> dims, bool all,
                      ReducePlan* plan) {
  ReducePlan p;
  const int64_t rank = in.dim();
  if (!check(ctx, rank <= static_cast<int64_t>(kMaxDim), "tensor rank too large")) return false;
  for (size_t i = 0; i < dims.size() && !all; ++i) {
    int64_t d;
    if (!check(ctx, normalize_dim(dims[i], rank, &d), "reduction dim out of range")) return false;
    if (rank == 0) continue;
    if (!check(ctx, !p.reduced[d], "reduction dim repeated")) return false;
    p.reduced[d] = true;
  }
  for (int64_t d = 0; d < rank; ++d) {
    if (all) p.reduced[d] = true;
    if (p.reduced[d]) {
      p.red_sizes[p.nred] = in.size(d);
      p.red_strides[p.nred++] = in.stride(d);
      p.red_count *= in.size(d);
    } else {
      p.kept_sizes[p.nkept] = in.size(d);
      p.kept_strides[p.nkept++] = in.stride(d);
      p.out_count *= in.size(d);
    }
  }
  // Dense when the reduced dims are the innermost ones of a row-major tensor.
  bool dense = in.is_contiguous();
  for (int64_t d = rank - static_cast<int64_t>(p.nred); d < rank && dense; ++d) dense = d >= 0 && p.reduced[d];
  p.red_dense = dense;
  *plan = p;
  return true;
}

size_t reduced_sizes(const Tensor& in, const ReducePlan& plan, bool keepdim, int64_t* sizes) {
  size_t n = 0;
  for (int64_t d = 0; d < in.dim(); ++d) {
    if (!plan.reduced[d])
      sizes[n++] = in.size(d);
    else if (keepdim)
      sizes[n++] = 1;
  }
  return n;
}

bool prepare_reduce_out(KernelRuntimeContext& ctx, const Tensor& in, const ReducePlan& plan, bool keepdim,
                        const Tensor& out) {
  int64_t sizes[kMaxDim];
  const size_t n = reduced_sizes(in, plan, keepdim, sizes);
  if (!resize_out(ctx, out, {sizes, n})) return false;
  if (!out.is_contiguous()) {
    ET_LOG(Error, "reduction output must be contiguous");
    ctx.fail(Error::NotSupported);
    return false;
  }
  return true;
}

int64_t reduce_base(const ReducePlan& plan, int64_t i) {
  int64_t off = 0;
  for (size_t d = plan.nkept; d > 0; --d) {
    const int64_t s = plan.kept_sizes[d - 1];
    off += (i % s) * plan.kept_strides[d - 1];
    i /= s;
  }
  return off;
}

}  // namespace kernels
}  // namespace executorch
