// 16-bit float storage (IEEE binary16 and bfloat16) as plain bits with float conversions.
#pragma once

#include <cstdint>
#include <cstring>

namespace executorch {
namespace kernels {
namespace cpu {

// Storage only: kernels widen to float, compute, and narrow once per result, as torch does on CPU.
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline float to_float(BFloat16 h) { return bits_float(static_cast<uint32_t>(h.bits) << 16); }

// Round to nearest, ties to even; every NaN becomes torch's canonical bfloat16 NaN.
inline BFloat16 to_bfloat16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return {0x7fc0u};
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return {static_cast<uint16_t>((u + rounding) >> 16)};
}

// Binary16 decode with every case computed and one selected, so loops over it vectorize:
// normals rebias the exponent, subnormals are mantissa * 2^-24 (exact in float), Inf/NaN keep
// their mantissa under an all-ones exponent.
inline float to_float(Half h) {
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  const uint32_t exp = (h.bits >> 10) & 0x1fu;
  const uint32_t man = h.bits & 0x3ffu;
  const uint32_t normal = ((exp + 112u) << 23) | (man << 13);
  const uint32_t special = 0x7f800000u | (man << 13);
  const uint32_t subnormal = float_bits(static_cast<float>(static_cast<int32_t>(man)) * 5.9604644775390625e-8f);
  const uint32_t mag = exp == 0 ? subnormal : (exp == 0x1fu ? special : normal);
  return bits_float(sign | mag);
}

// Round to nearest, ties to even; overflow goes to infinity, tiny values to (signed) zero or
// a subnormal, NaN to the quiet NaN torch writes (sign kept, payload dropped).
inline Half to_half(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t mag = u & 0x7fffffffu;
  if (mag > 0x7f800000u) return {static_cast<uint16_t>(sign | 0x7e00u)};
  if (mag >= 0x477ff000u) return {static_cast<uint16_t>(sign | 0x7c00u)};  // rounds past 65504
  if (mag < 0x38800000u) {
    // Subnormal (or zero) result: scale so the float's own rounding does the half's.
    const float scaled = bits_float(mag) * 16777216.f;  // 2^24: one unit is the smallest subnormal
    const uint32_t q = static_cast<uint32_t>(scaled);
    const float rest = scaled - static_cast<float>(q);
    const uint32_t r = q + ((rest > 0.5f || (rest == 0.5f && (q & 1u))) ? 1u : 0u);
    return {static_cast<uint16_t>(sign | r)};
  }
  const uint32_t rounded = mag + 0xfffu + ((mag >> 13) & 1u);
  return {static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13))};
}

inline float to_float(float f) { return f; }

// Element type tags for the float-computing kernels that also read 16-bit storage.
enum class Elem : uint8_t { kF32, kF16, kBF16 };

inline float load_elem(const void* p, Elem e, int64_t i) {
  switch (e) {
    case Elem::kF16: return to_float(static_cast<const Half*>(p)[i]);
    case Elem::kBF16: return to_float(static_cast<const BFloat16*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

inline void store_elem(void* p, Elem e, int64_t i, float v) {
  switch (e) {
    case Elem::kF16: static_cast<Half*>(p)[i] = to_half(v); break;
    case Elem::kBF16: static_cast<BFloat16*>(p)[i] = to_bfloat16(v); break;
    default: static_cast<float*>(p)[i] = v; break;
  }
}

}  // namespace cpu
}  // namespace kernels
}  // namespace executorch
