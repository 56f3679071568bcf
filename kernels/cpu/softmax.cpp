// Softmax and log-softmax of float32 lines, vectorised across a line or across neighbouring lines.
#include "kernels/cpu/softmax.h"

#include <cmath>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vectorize.h"
#include "kernels/cpu/vmath.h"

namespace executorch {
namespace kernels {
namespace cpu {
namespace {

// Independent partial results per lane let the compiler keep max and sum in vector registers
// without reassociating float math; the lane count fixes the summation order, so results do not
// depend on the ISA picked at load or on the thread count.
constexpr int64_t kLanes = 16;
// Lines side by side in the strided case: enough for a wide vector, small enough for the stack.
constexpr int64_t kBlock = 64;

float shift_of(float mx) { return std::isinf(mx) && mx < 0 ? 0.f : mx; }  // all -inf: no inf - inf

// Contiguous lines (softmax over the last dim).
ET_MULTIVERSION void softmax_rows(const float* x, float* y, int64_t rows, int64_t n, bool log) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    float m[kLanes];
    for (int64_t j = 0; j < kLanes; ++j) m[j] = -INFINITY;
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
      for (int64_t j = 0; j < kLanes; ++j) m[j] = xr[i + j] > m[j] ? xr[i + j] : m[j];
    float mx = -INFINITY;
    for (int64_t j = 0; j < kLanes; ++j) mx = m[j] > mx ? m[j] : mx;
    for (; i < n; ++i) mx = xr[i] > mx ? xr[i] : mx;
    mx = shift_of(mx);

    float s[kLanes] = {};
    i = 0;
    if (log) {
      for (; i + kLanes <= n; i += kLanes)
        for (int64_t j = 0; j < kLanes; ++j) s[j] += vexp(xr[i + j] - mx);
    } else {
      for (; i + kLanes <= n; i += kLanes)
        for (int64_t j = 0; j < kLanes; ++j) {
          const float e = vexp(xr[i + j] - mx);
          yr[i + j] = e;
          s[j] += e;
        }
    }
    float sum = 0;
    for (int64_t j = 0; j < kLanes; ++j) sum += s[j];
    for (; i < n; ++i) {
      const float e = vexp(xr[i] - mx);
      if (!log) yr[i] = e;
      sum += e;
    }
    if (log) {
      const float shift = mx + std::log(sum);
      for (i = 0; i < n; ++i) yr[i] = xr[i] - shift;
    } else {
      const float inv = 1.f / sum;
      for (i = 0; i < n; ++i) yr[i] *= inv;
    }
  }
}

// Lines strided by `inner` (softmax over an inner dim): up to kBlock neighbouring lines at once,
// so every pass reads contiguous memory.
ET_MULTIVERSION void softmax_strided(const float* x, float* y, int64_t n, int64_t inner, bool log) {
  for (int64_t b = 0; b < inner; b += kBlock) {
    const int64_t w = inner - b < kBlock ? inner - b : kBlock;
    float mx[kBlock], s[kBlock];
    for (int64_t i = 0; i < w; ++i) {
      mx[i] = -INFINITY;
      s[i] = 0;
    }
    for (int64_t k = 0; k < n; ++k) {
      const float* xk = x + k * inner + b;
      for (int64_t i = 0; i < w; ++i) mx[i] = xk[i] > mx[i] ? xk[i] : mx[i];
    }
    for (int64_t i = 0; i < w; ++i) mx[i] = shift_of(mx[i]);
    for (int64_t k = 0; k < n; ++k) {
      const float* xk = x + k * inner + b;
      float* yk = y + k * inner + b;
      for (int64_t i = 0; i < w; ++i) {
        const float e = vexp(xk[i] - mx[i]);
        if (!log) yk[i] = e;
        s[i] += e;
      }
    }
    // s becomes what the last pass applies: the shift for log-softmax, the scale otherwise.
    for (int64_t i = 0; i < w; ++i) s[i] = log ? mx[i] + std::log(s[i]) : 1.f / s[i];
    for (int64_t k = 0; k < n; ++k) {
      const float* xk = x + k * inner + b;
      float* yk = y + k * inner + b;
      if (log) {
        for (int64_t i = 0; i < w; ++i) yk[i] = xk[i] - s[i];
      } else {
        for (int64_t i = 0; i < w; ++i) yk[i] *= s[i];
      }
    }
  }
}

// Elements one chunk of work should cover, so small tensors stay on one thread.
constexpr int64_t kChunkElems = 1 << 15;

}  // namespace

void softmax(const float* x, float* y, int64_t outer, int64_t n, int64_t inner, bool log) {
  if (outer <= 0 || n <= 0 || inner <= 0) return;
  const int64_t line = n * inner;
  const int64_t grain = line >= kChunkElems ? 1 : kChunkElems / line;
  parallel_for(0, outer, grain, [&](int64_t lo, int64_t hi) {
    if (inner == 1) {
      softmax_rows(x + lo * n, y + lo * n, hi - lo, n, log);
    } else {
      for (int64_t o = lo; o < hi; ++o) softmax_strided(x + o * line, y + o * line, n, inner, log);
    }
  });
}

}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
