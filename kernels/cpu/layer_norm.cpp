// Layer norm of float32 rows, vectorised along the row and split over rows.
#include "kernels/cpu/layer_norm.h"

#include <cmath>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vectorize.h"

namespace executorch {
namespace kernels {
namespace cpu {
namespace {

// Per-lane partial sums keep the reductions in vector registers with a fixed summation order
// (the same bits on every ISA and thread count).
constexpr int64_t kLanes = 16;
constexpr int64_t kChunkElems = 1 << 15;

ET_ALWAYS_INLINE float lane_total(const float* s) {
  float t = 0;
  for (int64_t j = 0; j < kLanes; ++j) t += s[j];
  return t;
}

ET_MULTIVERSION void layer_norm_rows(const float* x, float* y, int64_t rows, int64_t n, const float* w, const float* b,
                                     float eps, float* mean, float* rstd) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    // Two passes (mean, then squared deviations) keep the variance accurate for rows far from 0.
    float s[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
      for (int64_t j = 0; j < kLanes; ++j) s[j] += xr[i + j];
    float sum = lane_total(s);
    for (; i < n; ++i) sum += xr[i];
    const float mu = sum / static_cast<float>(n);
    float q[kLanes] = {};
    i = 0;
    for (; i + kLanes <= n; i += kLanes)
      for (int64_t j = 0; j < kLanes; ++j) {
        const float d = xr[i + j] - mu;
        q[j] += d * d;
      }
    float sq = lane_total(q);
    for (; i < n; ++i) sq += (xr[i] - mu) * (xr[i] - mu);
    const float rs = 1.f / std::sqrt(sq / static_cast<float>(n) + eps);
    if (w && b) {
      for (i = 0; i < n; ++i) yr[i] = (xr[i] - mu) * rs * w[i] + b[i];
    } else if (w) {
      for (i = 0; i < n; ++i) yr[i] = (xr[i] - mu) * rs * w[i];
    } else if (b) {
      for (i = 0; i < n; ++i) yr[i] = (xr[i] - mu) * rs + b[i];
    } else {
      for (i = 0; i < n; ++i) yr[i] = (xr[i] - mu) * rs;
    }
    if (mean) mean[r] = mu;
    if (rstd) rstd[r] = rs;
  }
}

int64_t row_grain(int64_t n) { return n >= kChunkElems ? 1 : kChunkElems / (n > 0 ? n : 1); }

}  // namespace

void layer_norm(const float* x, float* y, int64_t rows, int64_t n, const float* weight, const float* bias, double eps,
                float* mean, float* rstd) {
  if (n <= 0) return;
  parallel_for(0, rows, row_grain(n), [&](int64_t lo, int64_t hi) {
    layer_norm_rows(x + lo * n, y + lo * n, hi - lo, n, weight, bias, static_cast<float>(eps),
                    mean ? mean + lo : nullptr, rstd ? rstd + lo : nullptr);
  });
}

}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
