// Softmax and log-softmax of float32 lines: one pass for the max, one for exp and the sum, one to scale.
#pragma once

#include <cstdint>

namespace executorch {
namespace kernels {
namespace cpu {

// (Log-)softmax of x viewed as [outer, n, inner] along n, into y (which may alias x). Each line
// is max-shifted; a line of -inf gives NaN, like torch. Work splits over lines with
// parallel_for, each line computed whole by one chunk.
void softmax(const float* x, float* y, int64_t outer, int64_t n, int64_t inner, bool log);

}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
