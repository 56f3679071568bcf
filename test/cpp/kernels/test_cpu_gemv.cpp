// gemv against a double-precision loop: both code paths, both B layouts, 16-bit weights, m 1..8.
#include <algorithm>
#include <vector>

#include "kernels/cpu/gemv.h"
#include "test/cpp/kernels/check.h"

using executorch::kernels::cpu::ConstMatrix;
using executorch::kernels::cpu::Elem;
using executorch::kernels::cpu::gemv_on_path;
using executorch::kernels::cpu::gemv_supports;
using executorch::kernels::cpu::GemvPath;
using executorch::kernels::cpu::load_elem;
using executorch::kernels::cpu::store_elem;

namespace {

// B's k x n values stored as `e` (rounded), transposed (element (p, j) at j * k + p) or not.
struct Weights {
  std::vector<float> f32;
  std::vector<uint16_t> b16;
  Elem e;
  const void* data() const { return e == Elem::kF32 ? static_cast<const void*>(f32.data()) : b16.data(); }
};

Weights make_weights(const std::vector<float>& values, Elem e) {
  Weights w{values, std::vector<uint16_t>(values.size()), e};
  if (e != Elem::kF32)
    for (size_t i = 0; i < values.size(); ++i) store_elem(w.b16.data(), e, static_cast<int64_t>(i), values[i]);
  return w;
}

void check(GemvPath path, Elem e, bool transposed, int64_t m, int64_t n, int64_t k, float beta) {
  const auto a = ktest::random_floats(m * k, 5);
  const Weights w = make_weights(ktest::random_floats(k * n, 6), e);
  const auto c0 = ktest::random_floats(m * n, 7);
  const ConstMatrix am{a.data(), k, 1};
  const ConstMatrix bm = transposed ? ConstMatrix{w.data(), 1, k, e} : ConstMatrix{w.data(), n, 1, e};
  std::vector<float> expected(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p)
        acc += static_cast<double>(a[i * k + p]) * load_elem(w.data(), e, transposed ? j * k + p : p * n + j);
      expected[i * n + j] = static_cast<float>(0.5 * acc + beta * c0[i * n + j]);
    }
  auto c = c0;
  if (beta == 0.f) std::fill(c.begin(), c.end(), std::nanf(""));  // beta 0 must not read C
  std::vector<float> scratch(m * k);
  if (!gemv_on_path(path, m, n, k, 0.5f, am, bm, beta, c.data(), n, scratch.data())) return;
  CHECK_CLOSE(c.data(), expected.data(), c.size(), 1e-6 + 5e-8 * k);
}

}  // namespace

KTEST(gemv_paths_layouts_and_dtypes_match_reference) {
  const int64_t sizes[][2] = {{1, 1}, {37, 5}, {64, 64}, {301, 129}, {1000, 33}, {7, 1025}};
  for (GemvPath path : {GemvPath::kScalar, GemvPath::kAvx2})
    for (Elem e : {Elem::kF32, Elem::kF16, Elem::kBF16})
      for (bool transposed : {true, false})
        for (int64_t m = 1; m <= 8; ++m)
          for (const auto& nk : sizes) check(path, e, transposed, m, nk[0], nk[1], m % 2 ? 0.f : 1.f);
}

KTEST(gemv_takes_few_rows_and_either_unit_stride) {
  const float x = 0.f;
  CHECK(gemv_supports(1, ConstMatrix{&x, 1, 40}));
  CHECK(gemv_supports(8, ConstMatrix{&x, 40, 1}));
  CHECK(!gemv_supports(9, ConstMatrix{&x, 1, 40}));
  CHECK(!gemv_supports(0, ConstMatrix{&x, 1, 40}));
  CHECK(!gemv_supports(2, ConstMatrix{&x, 40, 3}));
}
