// Layer norm of float32 rows: mean and variance, then the scaled and shifted row, in one call.
#pragma once

#include <cstdint>

namespace executorch {
namespace kernels {
namespace cpu {

// Normalises each of `rows` rows of n floats of x into y (which may alias x):
// y = (x - mean) * rstd * weight + bias, rstd = 1/sqrt(var + eps) with the biased variance.
// weight/bias may be null (1 and 0); mean/rstd, when not null, receive one float per row.
// Work splits over rows with parallel_for, each row computed whole by one chunk.
void layer_norm(const float* x, float* y, int64_t rows, int64_t n, const float* weight, const float* bias, double eps,
                float* mean, float* rstd);

}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
