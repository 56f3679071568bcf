// exp and erfc for float32 written as straight-line arithmetic, so loops calling them vectorise.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/cpu/vectorize.h"

namespace executorch {
namespace kernels {
namespace cpu {

// e^x to about 2 ulp: x = n ln2 + r with |r| <= ln2/2, e^r by its degree-7 Taylor polynomial,
// 2^n built in the exponent bits. Below the normal range the result is 0 (no denormals), above
// it +inf; NaN stays NaN. libm's expf is a call per element, which stops vectorisation.
ET_ALWAYS_INLINE float vexp(float x) {
  constexpr float kHi = 88.37626f, kLo = -87.33654f;
  // Selects between plain values (no expression computed on one side only) so they compile to
  // vector blends rather than branches.
  float xc = x > kHi ? kHi : x;
  xc = xc < kLo ? kLo : xc;
  // NaN passes both clamps, and NaN to int is undefined: take 0 for the integer step (NaN is returned below).
  xc = xc == xc ? xc : 0.f;
  // Adding and subtracting 1.5 * 2^23 rounds to the nearest integer in any vector width.
  constexpr float kShift = 12582912.f;
  const float n = (xc * 1.44269504088896341f + kShift) - kShift;
  const float r = (xc - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.f / 5040.f;
  p = p * r + 1.f / 720.f;
  p = p * r + 1.f / 120.f;
  p = p * r + 1.f / 24.f;
  p = p * r + 1.f / 6.f;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  float y = p * scale;
  y = x < kLo ? 0.f : y;
  y = x == x ? y : x;
  return x > kHi ? __builtin_inff() : y;
}

// erfc(x) with relative error about 1.2e-7 for every x (a Chebyshev fit of erfc(z) e^{z^2} in
// t = 1/(1 + z/2), Numerical Recipes' erfcc), so 1 + erf(x) keeps its precision for negative x.
ET_ALWAYS_INLINE float verfc(float x) {
  const float m = -x;
  const float z = x < 0 ? m : x;
  const float t = 1.f / (1.f + 0.5f * z);
  float p = 0.17087277f;
  p = p * t - 0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t - 1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t - 0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  p = p * t - 1.26551223f;
  const float e = t * vexp(p - z * z);
  const float f = 2.f - e;
  return x < 0 ? f : e;
}

}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
