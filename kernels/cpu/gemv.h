// Matrix products with a few rows (decode-time linear layers): B read in place, never packed.
#pragma once

#include <cstdint>

#include "kernels/cpu/gemm.h"

namespace executorch {
namespace kernels {
namespace cpu {

// Most rows of A the gemv path takes; taller products go to sgemm, whose packing pays off.
constexpr int64_t kGemvMaxRows = 8;

// Whether gemv() handles B's layout: row_stride 1 (a transposed row-major weight, read as dot
// products) or col_stride 1 (row-major, read as row updates).
bool gemv_supports(int64_t m, ConstMatrix b);

// C = alpha * A(m x k) * B(k x n) + beta * C, C row-major (row stride ldc), for m up to
// kGemvMaxRows and a layout gemv_supports(). `a_rows` holds m * k floats of scratch (A widened
// to float32). beta == 0 never reads C. Columns are split over the thread pool; each result
// element is summed in one fixed order, so the bits do not depend on the thread count.
void gemv(int64_t m, int64_t n, int64_t k, float alpha, ConstMatrix a, ConstMatrix b, float beta, float* c, int64_t ldc,
          float* a_rows);

// The code paths gemv() chooses between, exposed so tests can cover each one.
enum class GemvPath { kScalar, kAvx2 };

// gemv() forced onto `path`; false (C untouched) when this CPU or build lacks it.
bool gemv_on_path(GemvPath path, int64_t m, int64_t n, int64_t k, float alpha, ConstMatrix a, ConstMatrix b, float beta,
                  float* c, int64_t ldc, float* a_rows);

}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
