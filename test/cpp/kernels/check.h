// Kernel-test helpers on top of the shared harness: seeded values and closeness checks.
#pragma once

#include <cmath>
#include <cstdio>
#include <vector>

#include "test/cpp/harness.h"

namespace ktest {

using ettest::failures;

// Deterministic values in [-1, 1) so failures reproduce.
inline float next_value(unsigned* state) {
  *state = *state * 1664525u + 1013904223u;
  return static_cast<float>((*state >> 8) & 0xffff) / 32768.f - 1.f;
}

inline std::vector<float> random_floats(size_t n, unsigned seed) {
  std::vector<float> v(n);
  for (auto& x : v) x = next_value(&seed);
  return v;
}

// Largest |a - b| / (1 + |b|) over two equal-length arrays.
inline double max_rel_diff(const float* a, const float* b, size_t n) {
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]) / (1.0 + std::fabs(b[i]));
    if (!(d <= worst)) worst = d;  // NaN counts as the worst
  }
  return worst;
}

}  // namespace ktest

#define KTEST(name) ETTEST(name)
#define CHECK(cond) ETCHECK(cond)

#define CHECK_CLOSE(a, b, n, tol)                                                                                 \
  do {                                                                                                            \
    const double ktest_d_ = ::ktest::max_rel_diff((a), (b), (n));                                                 \
    if (!(ktest_d_ <= (tol))) {                                                                                   \
      ++::ktest::failures();                                                                                      \
      std::fprintf(stderr, "%s:%d: %s vs %s differ by %g (tolerance %g)\n", __FILE__, __LINE__, #a, #b, ktest_d_, \
                   static_cast<double>(tol));                                                                     \
    }                                                                                                             \
  } while (0)
