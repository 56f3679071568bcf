// Single-precision matrix multiply on raw pointers: the engine behind mm, bmm, addmm and conv.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/half.h"

namespace executorch {
namespace kernels {
namespace cpu {

// A read-only matrix with arbitrary element strides: element (i, j) is at
// data[i * row_stride + j * col_stride], so a transpose is a swap of strides. Elements are
// float, or Half/BFloat16 widened to float as they are packed (accumulation stays float32).
struct ConstMatrix {
  const void* data;
  int64_t row_stride;
  int64_t col_stride;
  Elem elem = Elem::kF32;
};

// Floats of scratch sgemm() uses for packing when given m x n x k.
size_t sgemm_workspace_floats(int64_t m, int64_t n, int64_t k);

// C = alpha * A(m x k) * B(k x n) + beta * C + bias (bias[i] added along row i; may be null),
// with C row-major (row stride ldc). beta == 0 never reads C (so it may hold garbage).
// `workspace` must hold sgemm_workspace_floats(m, n, k) floats; with nullptr a slower
// unpacked path runs.
void sgemm(int64_t m, int64_t n, int64_t k, float alpha, ConstMatrix a, ConstMatrix b, float beta, const float* bias,
           float* c, int64_t ldc, float* workspace);

// The code paths sgemm() chooses between, exposed so tests can cover each one.
enum class GemmPath { kUnpacked, kBaseline, kAvx2, kAvx512, kNeon };

// sgemm() forced onto `path`; false (C untouched) when this CPU or build lacks it.
bool sgemm_on_path(GemmPath path, int64_t m, int64_t n, int64_t k, float alpha, ConstMatrix a, ConstMatrix b,
                   float beta, const float* bias, float* c, int64_t ldc, float* workspace);

}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
