// sgemm against a double-precision triple loop, on every code path and awkward shapes.
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "test/cpp/kernels/check.h"

using executorch::kernels::cpu::ConstMatrix;
using executorch::kernels::cpu::GemmPath;
using executorch::kernels::cpu::sgemm;
using executorch::kernels::cpu::sgemm_on_path;
using executorch::kernels::cpu::sgemm_workspace_floats;

namespace {

struct Shape {
  int64_t m, n, k;
};

// C = alpha * op(A) * op(B) + beta * C0 in double, with op() a transpose when asked.
std::vector<float> reference(const Shape& s, float alpha, const std::vector<float>& a, bool ta,
                             const std::vector<float>& b, bool tb, float beta, const std::vector<float>& c0) {
  std::vector<float> c(s.m * s.n);
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < s.k; ++p)
        acc += static_cast<double>(ta ? a[p * s.m + i] : a[i * s.k + p]) * (tb ? b[j * s.k + p] : b[p * s.n + j]);
      c[i * s.n + j] = static_cast<float>(alpha * acc + (beta == 0.f ? 0.0 : beta * c0[i * s.n + j]));
    }
  return c;
}

void check_shape(GemmPath path, const Shape& s, bool ta, bool tb, float alpha, float beta) {
  auto a = ktest::random_floats(s.m * s.k, 1);
  auto b = ktest::random_floats(s.k * s.n, 2);
  auto c0 = ktest::random_floats(s.m * s.n, 3);
  auto expected = reference(s, alpha, a, ta, b, tb, beta, c0);
  ConstMatrix am = ta ? ConstMatrix{a.data(), 1, s.m} : ConstMatrix{a.data(), s.k, 1};
  ConstMatrix bm = tb ? ConstMatrix{b.data(), 1, s.k} : ConstMatrix{b.data(), s.n, 1};
  std::vector<float> ws(sgemm_workspace_floats(s.m, s.n, s.k));
  auto c = c0;
  if (beta == 0.f) std::fill(c.begin(), c.end(), std::nanf(""));  // beta 0 must not read C
  if (!sgemm_on_path(path, s.m, s.n, s.k, alpha, am, bm, beta, nullptr, c.data(), s.n, ws.data())) return;
  // float accumulation error grows with the reduction length
  CHECK_CLOSE(c.data(), expected.data(), c.size(), 1e-6 + 5e-8 * s.k);
}

const Shape kShapes[] = {{1, 1, 1},      {7, 13, 5},     {8, 32, 1},    {9, 33, 17}, {100, 3, 77},
                         {1, 1000, 300}, {145, 2049, 3}, {33, 70, 600}, {64, 64, 64}};

}  // namespace

KTEST(gemm_all_paths_match_reference) {
  for (GemmPath path : {GemmPath::kUnpacked, GemmPath::kBaseline, GemmPath::kAvx2, GemmPath::kAvx512, GemmPath::kNeon})
    for (const Shape& s : kShapes) {
      check_shape(path, s, false, false, 1.f, 0.f);
      check_shape(path, s, true, false, 0.5f, 1.f);
      check_shape(path, s, false, true, 2.f, -0.75f);
    }
}

// The other tests skip a path this CPU or build lacks; NEON must not be skipped where it is the
// baseline (aarch64), nor claimed where it cannot be (x86).
KTEST(gemm_neon_path_exists_exactly_on_aarch64) {
  std::vector<float> ws(sgemm_workspace_floats(6, 16, 4));
  std::vector<float> a(6 * 4, 1.f), b(4 * 16, 0.5f), c(6 * 16, 0.f);
  const bool ran = sgemm_on_path(GemmPath::kNeon, 6, 16, 4, 1.f, {a.data(), 4, 1}, {b.data(), 16, 1}, 0.f, nullptr,
                                 c.data(), 16, ws.data());
#if defined(__aarch64__)
  CHECK(ran);
  for (float v : c) CHECK(v == 2.f);
#else
  CHECK(!ran);
#endif
}

KTEST(gemm_default_dispatch_with_and_without_workspace) {
  const Shape s{37, 41, 300};
  auto a = ktest::random_floats(s.m * s.k, 4);
  auto b = ktest::random_floats(s.k * s.n, 5);
  std::vector<float> zero(s.m * s.n, 0.f);
  auto expected = reference(s, 1.f, a, false, b, false, 0.f, zero);
  std::vector<float> ws(sgemm_workspace_floats(s.m, s.n, s.k));
  std::vector<float> c(s.m * s.n, 7.f);
  sgemm(s.m, s.n, s.k, 1.f, {a.data(), s.k, 1}, {b.data(), s.n, 1}, 0.f, nullptr, c.data(), s.n, ws.data());
  CHECK_CLOSE(c.data(), expected.data(), c.size(), 1e-5);
  std::vector<float> c2(s.m * s.n, 7.f);
  sgemm(s.m, s.n, s.k, 1.f, {a.data(), s.k, 1}, {b.data(), s.n, 1}, 0.f, nullptr, c2.data(), s.n, nullptr);
  CHECK_CLOSE(c2.data(), expected.data(), c2.size(), 1e-5);
}

KTEST(gemm_empty_k_scales_c_by_beta) {
  std::vector<float> c = {1.f, 2.f, 3.f, 4.f};
  float dummy = 0.f;
  sgemm(2, 2, 0, 1.f, {&dummy, 0, 1}, {&dummy, 2, 1}, 0.5f, nullptr, c.data(), 2, nullptr);
  const float expected[] = {0.5f, 1.f, 1.5f, 2.f};
  CHECK_CLOSE(c.data(), expected, 4, 0);
}

KTEST(gemm_row_bias_on_every_path) {
  const Shape s{19, 45, 300};  // k > one k-block: the bias must be added exactly once
  auto a = ktest::random_floats(s.m * s.k, 6);
  auto b = ktest::random_floats(s.k * s.n, 7);
  auto bias = ktest::random_floats(s.m, 8);
  auto c0 = ktest::random_floats(s.m * s.n, 9);
  auto expected = reference(s, 1.f, a, false, b, false, 0.5f, c0);
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.n; ++j) expected[i * s.n + j] += bias[i];
  std::vector<float> ws(sgemm_workspace_floats(s.m, s.n, s.k));
  for (GemmPath path :
       {GemmPath::kUnpacked, GemmPath::kBaseline, GemmPath::kAvx2, GemmPath::kAvx512, GemmPath::kNeon}) {
    auto c = c0;
    if (!sgemm_on_path(path, s.m, s.n, s.k, 1.f, {a.data(), s.k, 1}, {b.data(), s.n, 1}, 0.5f, bias.data(), c.data(),
                       s.n, ws.data()))
      continue;
    CHECK_CLOSE(c.data(), expected.data(), c.size(), 3e-5);
  }
}

// Operands as windows of larger buffers: A rows `pad` floats apart beyond k (read in place by
// the AVX2 kernel), B transposed, C rows wider than n; C's padding columns must stay untouched.
KTEST(gemm_windowed_operands_on_every_path) {
  const int64_t pad = 5;
  for (const Shape& s : {Shape{13, 37, 300}, Shape{100, 49, 77}, Shape{6, 16, 1}, Shape{145, 33, 513}}) {
    const int64_t lda = s.k + pad, ldc = s.n + pad;
    auto a_wide = ktest::random_floats(s.m * lda, 10);
    auto b = ktest::random_floats(s.k * s.n, 11);  // stored n x k: B transposed
    std::vector<float> a(s.m * s.k);
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t p = 0; p < s.k; ++p) a[i * s.k + p] = a_wide[i * lda + pad + p];
    std::vector<float> zero(s.m * s.n, 0.f);
    auto expected = reference(s, 1.f, a, false, b, true, 0.f, zero);
    std::vector<float> ws(sgemm_workspace_floats(s.m, s.n, s.k));
    for (GemmPath path :
         {GemmPath::kUnpacked, GemmPath::kBaseline, GemmPath::kAvx2, GemmPath::kAvx512, GemmPath::kNeon}) {
      std::vector<float> c(s.m * ldc, 42.f);
      if (!sgemm_on_path(path, s.m, s.n, s.k, 1.f, {a_wide.data() + pad, lda, 1}, {b.data(), 1, s.k}, 0.f, nullptr,
                         c.data(), ldc, ws.data()))
        continue;
      std::vector<float> got(s.m * s.n);
      for (int64_t i = 0; i < s.m; ++i) {
        for (int64_t j = 0; j < s.n; ++j) got[i * s.n + j] = c[i * ldc + j];
        for (int64_t j = s.n; j < ldc; ++j) CHECK(c[i * ldc + j] == 42.f);
      }
      CHECK_CLOSE(got.data(), expected.data(), got.size(), 1e-6 + 5e-8 * s.k);
    }
  }
}

namespace {

using executorch::kernels::cpu::BFloat16;
using executorch::kernels::cpu::Elem;
using executorch::kernels::cpu::Half;

// B as storage type T in both layouts: `rows` is k x n row-major (packed by the plain copy),
// `cols` is the same matrix stored n x k (a transposed weight, packed by the unit-row path).
template <typename T>
void check_transposed_b_packs_identically(GemmPath path, Elem elem, const Shape& s) {
  auto a = ktest::random_floats(s.m * s.k, 21);
  auto values = ktest::random_floats(s.k * s.n, 22);
  // Exact conversions must survive too: signed zero, infinity, a subnormal, the largest half.
  const float specials[] = {-0.f, INFINITY, -INFINITY, 6.0e-8f, 65504.f, -2.5f};
  for (size_t i = 0; i < values.size(); i += 7) values[i] = specials[(i / 7) % 6];
  std::vector<T> rows(s.k * s.n), cols(s.k * s.n);
  for (int64_t p = 0; p < s.k; ++p)
    for (int64_t j = 0; j < s.n; ++j) {
      T v;
      if constexpr (std::is_same<T, float>::value)
        v = values[p * s.n + j];
      else if constexpr (std::is_same<T, Half>::value)
        v = executorch::kernels::cpu::to_half(values[p * s.n + j]);
      else
        v = executorch::kernels::cpu::to_bfloat16(values[p * s.n + j]);
      rows[p * s.n + j] = v;
      cols[j * s.k + p] = v;
    }
  std::vector<float> ws(sgemm_workspace_floats(s.m, s.n, s.k));
  std::vector<float> want(s.m * s.n), got(s.m * s.n, 3.f);
  if (!sgemm_on_path(path, s.m, s.n, s.k, 1.f, {a.data(), s.k, 1}, {rows.data(), s.n, 1, elem}, 0.f, nullptr,
                     want.data(), s.n, ws.data()))
    return;
  CHECK(sgemm_on_path(path, s.m, s.n, s.k, 1.f, {a.data(), s.k, 1}, {cols.data(), 1, s.k, elem}, 0.f, nullptr,
                      got.data(), s.n, ws.data()));
  // Packing only moves (and exactly widens) values: the products must agree bit for bit.
  CHECK(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
}

// Full and partial slivers (a last one of 1..15 columns, one of exactly 8), k not a multiple
// of 8, k past one 256-deep block, parallel packing (m * n * k large), n past one 2048 panel.
const Shape kPackShapes[] = {{7, 16, 8},  {7, 5, 3},     {13, 37, 300},  {6, 24, 521},
                             {9, 33, 17}, {30, 100, 64}, {145, 70, 300}, {3, 2100, 20}};

}  // namespace

KTEST(gemm_transposed_b_packs_bit_identically) {
  for (GemmPath path : {GemmPath::kBaseline, GemmPath::kAvx2, GemmPath::kAvx512, GemmPath::kNeon})
    for (const Shape& s : kPackShapes) {
      check_transposed_b_packs_identically<float>(path, Elem::kF32, s);
      check_transposed_b_packs_identically<Half>(path, Elem::kF16, s);
      check_transposed_b_packs_identically<BFloat16>(path, Elem::kBF16, s);
    }
}
