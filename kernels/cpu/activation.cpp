// GELU of float32 buffers with the vectorisable exp and erfc of vmath.h.
#include "kernels/cpu/activation.h"

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vectorize.h"
#include "kernels/cpu/vmath.h"

namespace executorch {
namespace kernels {
namespace cpu {
namespace {

constexpr int64_t kChunkElems = 1 << 14;

ET_MULTIVERSION void gelu_erf(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = 0.5f * x[i] * verfc(x[i] * -0.70710678118654752f);
}

ET_MULTIVERSION void gelu_tanh(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
    y[i] = v / (1.f + vexp(-2.f * u));
  }
}

}  // namespace

void gelu(const float* x, float* y, int64_t n, bool tanh_approx) {
  parallel_for(0, n, kChunkElems, [&](int64_t lo, int64_t hi) {
    if (tanh_approx) {
      gelu_tanh(x + lo, y + lo, hi - lo);
    } else {
      gelu_erf(x + lo, y + lo, hi - lo);
    }
  });
}

}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
