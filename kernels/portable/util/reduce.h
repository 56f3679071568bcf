// Reductions over a set of dims: which input elements fold into each output element.
#pragma once

#include <cstdint>

#include "kernels/portable/util/kernel_util.h"

namespace executorch {
namespace kernels {

struct ReducePlan {
  size_t nkept = 0, nred = 0;
  int64_t kept_sizes[kMaxDim] = {}, kept_strides[kMaxDim] = {};
  int64_t red_sizes[kMaxDim] = {}, red_strides[kMaxDim] = {};
  int64_t out_count = 1;  // outputs, in row-major order of the kept dims
  int64_t red_count = 1;  // inputs folded into each output
  bool red_dense = false;  // those inputs are base + [0, red_count)
  bool reduced[kMaxDim] = {};
};

// Plans reducing `in` over `dims` (each in [-rank, rank), no repeats); `all` reduces every
// dim. Fails `ctx` and returns false on a bad dim.
bool make_reduce_plan(KernelRuntimeContext& ctx, const Tensor& in, Span<const int64_t> dims, bool all,
                      ReducePlan* plan);

// The output shape: kept dims, plus size-1 reduced dims when keepdim. Returns the rank.
size_t reduced_sizes(const Tensor& in, const ReducePlan& plan, bool keepdim, int64_t* sizes);

// Resizes `out` for the plan and checks it is row-major; false (ctx failed) otherwise.
bool prepare_reduce_out(KernelRuntimeContext& ctx, const Tensor& in, const ReducePlan& plan, bool keepdim,
                        const Tensor& out);

// Element offset in `in` of the first input folded into output `i`.
int64_t reduce_base(const ReducePlan& plan, int64_t i);

// Calls f(offset, position) for each input folded into the output whose base is `base`;
// position counts 0.. in row-major order of the reduced dims.
template <typename F>
void for_each_reduced(const ReducePlan& p, int64_t base, F&& f) {
  if (p.red_dense) {
    for (int64_t r = 0; r < p.red_count; ++r) f(base + r, r);
    return;
  }
  if (p.red_count == 0) return;
  int64_t idx[kMaxDim] = {};
  int64_t off = base;
  for (int64_t r = 0; r < p.red_count; ++r) {
    f(off, r);
    for (size_t d = p.nred; d > 0; --d) {
      if (++idx[d - 1] < p.red_sizes[d - 1]) {
        off += p.red_strides[d - 1];
        break;
      }
      off -= p.red_strides[d - 1] * (p.red_sizes[d - 1] - 1);
      idx[d - 1] = 0;
    }
  }
}

}  // namespace kernels
}  // namespace executorch
