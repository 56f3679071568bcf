// GELU of float32 buffers, exact (erf) or tanh-approximated, vectorised and split over chunks.
#pragma once

#include <cstdint>

namespace executorch {
namespace kernels {
namespace cpu {

// y[i] = gelu(x[i]) for n floats (y may alias x): x/2 * erfc(-x/sqrt(2)), or with `tanh_approx`
// x/2 * (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), computed as x * sigmoid(2u) so it keeps
// relative precision for negative x.
void gelu(const float* x, float* y, int64_t n, bool tanh_approx);

}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
