// Registered kernels called as the executor calls them, checked against loops in the test.
#include <cmath>
#include <vector>

#include "test/cpp/kernels/check.h"
#include "test/cpp/kernels/op_harness.h"

using ktest::Call;
using ktest::Error;
using ktest::EValue;
using ktest::OwnedTensor;
using ktest::ScalarType;

namespace {

constexpr ScalarType F32 = ScalarType::Float;
constexpr ScalarType I64 = ScalarType::Long;
constexpr ScalarType BOOL = ScalarType::Bool;

EValue t(OwnedTensor& x) { return EValue(x.tensor()); }
EValue i(int64_t v) { return EValue(v); }
EValue d(double v) { return EValue(v); }
EValue b(bool v) { return EValue(v); }

std::vector<float> iota(size_t n, float scale = 1.f, float shift = 0.f) {
  std::vector<float> v(n);
  for (size_t k = 0; k < n; ++k) v[k] = static_cast<float>(k) * scale + shift;
  return v;
}

}  // namespace

KTEST(op_add_broadcasts_with_alpha) {
  Call c;
  auto x = ktest::random_floats(2 * 3 * 4, 1);
  auto y = ktest::random_floats(3 * 1, 2);
  auto& a = c.tensor(F32, {2, 3, 4}, x);
  auto& bb = c.tensor(F32, {3, 1}, y);
  auto& out = c.out(F32, {2, 3, 4}, 24);
  CHECK(c.run("aten::add.out", {t(a), t(bb), d(2.5), t(out)}) == Error::Ok);
  std::vector<float> expect(24);
  for (int n = 0; n < 2; ++n)
    for (int r = 0; r < 3; ++r)
      for (int k = 0; k < 4; ++k) expect[(n * 3 + r) * 4 + k] = x[(n * 3 + r) * 4 + k] + 2.5f * y[r];
  CHECK_CLOSE(out.data<float>(), expect.data(), 24, 1e-6);
}

KTEST(op_integer_arithmetic_is_exact_and_safe) {
  Call c;
  auto& a = c.tensor<int64_t>(I64, {4}, {-7, 7, (int64_t(1) << 53) + 1, 5});
  auto& bb = c.tensor<int64_t>(I64, {4}, {2, -2, 1, 0});
  auto& sum = c.out(I64, {4}, 4);
  CHECK(c.run("aten::add.out", {t(a), t(bb), i(1), t(sum)}) == Error::Ok);
  CHECK(sum.data<int64_t>()[2] == (int64_t(1) << 53) + 2);
  auto& fd = c.out(I64, {4}, 4);
  CHECK(c.run("aten::div.out_mode", {t(a), t(bb), EValue(std::string_view("floor")), t(fd)}) == Error::Ok);
  CHECK(fd.data<int64_t>()[0] == -4 && fd.data<int64_t>()[1] == -4 && fd.data<int64_t>()[3] == 0);
  auto& rem = c.out(I64, {4}, 4);
  CHECK(c.run("aten::remainder.Scalar_out", {t(a), i(3), t(rem)}) == Error::Ok);
  CHECK(rem.data<int64_t>()[0] == 2 && rem.data<int64_t>()[1] == 1);
}

KTEST(op_true_division_of_ints_gives_float) {
  Call c;
  auto& a = c.tensor<int64_t>(I64, {3}, {1, -3, 7});
  auto& out = c.out(F32, {3}, 3);
  CHECK(c.run("aten::div.Scalar_out", {t(a), i(2), t(out)}) == Error::Ok);
  const float expect[] = {0.5f, -1.5f, 3.5f};
  CHECK_CLOSE(out.data<float>(), expect, 3, 0);
}

KTEST(op_compare_where_masked_fill) {
  Call c;
  auto x = ktest::random_floats(6, 3);
  auto y = ktest::random_floats(6, 4);
  auto& a = c.tensor(F32, {2, 3}, x);
  auto& bb = c.tensor(F32, {2, 3}, y);
  auto& gt = c.out(BOOL, {2, 3}, 6);
  CHECK(c.run("aten::gt.Tensor_out", {t(a), t(bb), t(gt)}) == Error::Ok);
  auto& w = c.out(F32, {2, 3}, 6);
  CHECK(c.run("aten::where.self_out", {t(gt), t(a), t(bb), t(w)}) == Error::Ok);
  auto& mf = c.out(F32, {2, 3}, 6);
  CHECK(c.run("aten::masked_fill.Scalar_out", {t(a), t(gt), d(-1.0), t(mf)}) == Error::Ok);
  for (int k = 0; k < 6; ++k) {
    CHECK(gt.data<bool>()[k] == (x[k] > y[k]));
    CHECK(w.data<float>()[k] == std::fmax(x[k], y[k]));
    CHECK(mf.data<float>()[k] == (x[k] > y[k] ? -1.f : x[k]));
  }
}

KTEST(op_unary_math_and_activations) {
  Call c;
  auto x = ktest::random_floats(10, 5);
  for (auto& v : x) v *= 4.f;
  auto& a = c.tensor(F32, {10}, x);
  struct Case {
    const char* name;
    float (*ref)(float);
  };
  const Case cases[] = {
      {"aten::sigmoid.out", [](float v) { return 1.f / (1.f + std::exp(-v)); }},
      {"aten::tanh.out", [](float v) { return std::tanh(v); }},
      {"aten::relu.out", [](float v) { return v > 0 ? v : 0.f; }},
      {"aten::neg.out", [](float v) { return -v; }},
      {"aten::round.out", [](float v) { return std::nearbyint(v); }},
      {"aten::hardswish.out", [](float v) { return v * std::fmin(std::fmax(v + 3, 0.f), 6.f) / 6; }},
      {"aten::silu.out", [](float v) { return v / (1 + std::exp(-v)); }},
  };
  for (const Case& k : cases) {
    auto& out = c.out(F32, {10}, 10);
    CHECK(c.run(k.name, {t(a), t(out)}) == Error::Ok);
    std::vector<float> expect(10);
    for (int j = 0; j < 10; ++j) expect[j] = k.ref(x[j]);
    CHECK_CLOSE(out.data<float>(), expect.data(), 10, 1e-6);
  }
  auto& ht = c.out(F32, {10}, 10);
  CHECK(c.run("aten::hardtanh.out", {t(a), d(0.0), d(6.0), t(ht)}) == Error::Ok);
  for (int j = 0; j < 10; ++j) CHECK(ht.data<float>()[j] == std::fmin(std::fmax(x[j], 0.f), 6.f));
  auto& cl = c.out(F32, {10}, 10);
  CHECK(c.run("aten::clamp.out", {t(a), EValue(), i(1), t(cl)}) == Error::Ok);
  for (int j = 0; j < 10; ++j) CHECK(cl.data<float>()[j] == std::fmin(x[j], 1.f));
}

KTEST(op_convolution_1d_2d_transposed_shapes_and_bias) {
  Call c;
  // conv1d: [1, 2, 7] * [3, 2, 3], padding 1 -> [1, 3, 7]
  auto& in = c.tensor(F32, {1, 2, 7}, iota(14, 0.1f));
  auto& w = c.tensor(F32, {3, 2, 3}, iota(18, 0.05f, -0.4f));
  auto& bias = c.tensor(F32, {3}, std::vector<float>{1.f, 2.f, 3.f});
  auto& out = c.out(F32, {1, 3, 7}, 21);
  CHECK(c.run("aten::convolution.out", {t(in), t(w), t(bias), c.ints({1}), c.ints({1}), c.ints({1}), b(false),
                                        c.ints({0}), i(1), t(out)}) == Error::Ok);
  for (int oc = 0; oc < 3; ++oc)
    for (int o = 0; o < 7; ++o) {
      double acc = oc + 1;
      for (int ic = 0; ic < 2; ++ic)
        for (int k = 0; k < 3; ++k) {
          const int p = o - 1 + k;
          if (p >= 0 && p < 7) acc += (ic * 7 + p) * 0.1 * ((oc * 6 + ic * 3 + k) * 0.05 - 0.4);
        }
      CHECK(std::fabs(out.data<float>()[oc * 7 + o] - acc) < 1e-5);
    }
  // transposed: [1, 3, 5, 5] with weight [3, 2, 3, 3], stride 2, padding 1 -> [1, 2, 9, 9]
  auto& tin = c.tensor(F32, {1, 3, 5, 5}, iota(75, 0.01f));
  auto& tw = c.tensor(F32, {3, 2, 3, 3}, iota(54, 0.02f, -0.5f));
  auto& tout = c.out(F32, {1, 2, 9, 9}, 162);
  CHECK(c.run("aten::convolution.out", {t(tin), t(tw), EValue(), c.ints({2, 2}), c.ints({1, 1}), c.ints({1, 1}),
                                        b(true), c.ints({0, 0}), i(1), t(tout)}) == Error::Ok);
  CHECK(tout.sizes() == (std::vector<int64_t>{1, 2, 9, 9}));
  // Every transposed-conv output is a sum of scattered products; check one interior point.
  double acc = 0;
  for (int ic = 0; ic < 3; ++ic)
    for (int ih = 0; ih < 5; ++ih)
      for (int iw = 0; iw < 5; ++iw)
        for (int kh = 0; kh < 3; ++kh)
          for (int kw = 0; kw < 3; ++kw)
            if (ih * 2 - 1 + kh == 4 && iw * 2 - 1 + kw == 3)
              acc += (ic * 25 + ih * 5 + iw) * 0.01 * ((ic * 18 + 9 + kh * 3 + kw) * 0.02 - 0.5);
  CHECK(std::fabs(tout.data<float>()[81 + 4 * 9 + 3] - acc) < 1e-5);
}

KTEST(op_convolution_runs_without_temp_memory) {
  Call c;
  auto x = ktest::random_floats(2 * 3 * 6 * 6, 7);
  auto wv = ktest::random_floats(4 * 3 * 9, 8);
  auto& in = c.tensor(F32, {2, 3, 6, 6}, x);
  auto& w = c.tensor(F32, {4, 3, 3, 3}, wv);
  auto& with = c.out(F32, {2, 4, 6, 6}, 288);
  auto args = [&](OwnedTensor& o) {
    return std::vector<EValue>{t(in),          t(w),     EValue(),       c.ints({1, 1}), c.ints({1, 1}),
                               c.ints({1, 1}), b(false), c.ints({0, 0}), i(1),           t(o)};
  };
  CHECK(c.run("aten::convolution.out", args(with)) == Error::Ok);
  c.without_temp();
  auto& without = c.out(F32, {2, 4, 6, 6}, 288);
  CHECK(c.run("aten::convolution.out", args(without)) == Error::Ok);
  CHECK_CLOSE(without.data<float>(), with.data<float>(), 288, 1e-5);
}

KTEST(op_convolution_rejects_bad_input_without_crashing) {
  Call c;
  auto& in = c.tensor<int64_t>(I64, {1, 1, 3, 3}, std::vector<int64_t>(9, 1));
  auto& w = c.tensor(F32, {1, 1, 3, 3}, iota(9));
  auto& out = c.out(F32, {1, 1, 1, 1}, 1);
  CHECK(c.run("aten::convolution.out", {t(in), t(w), EValue(), c.ints({1, 1}), c.ints({0, 0}), c.ints({1, 1}), b(false),
                                        c.ints({0, 0}), i(1), t(out)}) == Error::InvalidType);
  auto& fin = c.tensor(F32, {1, 2, 3, 3}, iota(18));
  CHECK(c.run("aten::convolution.out", {t(fin), t(w), EValue(), c.ints({1, 1}), c.ints({0, 0}), c.ints({1, 1}),
                                        b(false), c.ints({0, 0}), i(3), t(out)}) == Error::InvalidArgument);
  CHECK(c.run("aten::convolution.out", {t(fin), t(w)}) == Error::InvalidArgument);
}

KTEST(op_static_output_of_wrong_shape_is_an_error) {
  Call c;
  auto& a = c.tensor(F32, {2, 2}, iota(4));
  auto& out = c.out(F32, {3}, 4, /*dynamic=*/false);
  CHECK(c.run("aten::relu.out", {t(a), t(out)}) != Error::Ok);
}

KTEST(op_addmm_mm_bmm) {
  Call c;
  auto av = ktest::random_floats(3 * 5, 9), bv = ktest::random_floats(5 * 4, 10), sv = ktest::random_floats(4, 11);
  auto& a = c.tensor(F32, {3, 5}, av);
  auto& bm = c.tensor(F32, {5, 4}, bv);
  auto& s = c.tensor(F32, {4}, sv);
  auto& out = c.out(F32, {3, 4}, 12);
  CHECK(c.run("aten::addmm.out", {t(s), t(a), t(bm), d(0.5), d(2.0), t(out)}) == Error::Ok);
  auto& mm = c.out(F32, {3, 4}, 12);
  CHECK(c.run("aten::mm.out", {t(a), t(bm), t(mm)}) == Error::Ok);
  for (int r = 0; r < 3; ++r)
    for (int k = 0; k < 4; ++k) {
      double acc = 0;
      for (int j = 0; j < 5; ++j) acc += av[r * 5 + j] * bv[j * 4 + k];
      CHECK(std::fabs(out.data<float>()[r * 4 + k] - (0.5 * sv[k] + 2 * acc)) < 1e-5);
      CHECK(std::fabs(mm.data<float>()[r * 4 + k] - acc) < 1e-5);
    }
  auto& ba = c.tensor(F32, {2, 3, 5}, ktest::random_floats(30, 12));
  auto& bb2 = c.tensor(F32, {2, 5, 4}, ktest::random_floats(40, 13));
  auto& bo = c.out(F32, {2, 3, 4}, 24);
  CHECK(c.run("aten::bmm.out", {t(ba), t(bb2), t(bo)}) == Error::Ok);
  double acc = 0;
  for (int j = 0; j < 5; ++j) acc += ba.data<float>()[15 + 2 * 5 + j] * bb2.data<float>()[20 + j * 4 + 1];
  CHECK(std::fabs(bo.data<float>()[12 + 2 * 4 + 1] - acc) < 1e-5);
}

KTEST(op_batch_norm_and_layer_norm) {
  Call c;
  auto xv = ktest::random_floats(2 * 3 * 4, 14);
  auto& x = c.tensor(F32, {2, 3, 4}, xv);
  auto& w = c.tensor(F32, {3}, std::vector<float>{1.f, 2.f, -1.f});
  auto& bias = c.tensor(F32, {3}, std::vector<float>{0.f, 0.5f, 1.f});
  auto& mean = c.tensor(F32, {3}, std::vector<float>{0.1f, -0.2f, 0.3f});
  auto& var = c.tensor(F32, {3}, std::vector<float>{1.f, 0.5f, 2.f});
  auto& out = c.out(F32, {2, 3, 4}, 24);
  auto& s1 = c.out(F32, {0}, 1);
  auto& s2 = c.out(F32, {0}, 1);
  CHECK(c.run("aten::_native_batch_norm_legit_no_training.out",
              {t(x), t(w), t(bias), t(mean), t(var), d(0.1), d(1e-5), t(out), t(s1), t(s2)}) == Error::Ok);
  for (int k = 0; k < 24; ++k) {
    const int ch = (k / 4) % 3;
    const float m = mean.data<float>()[ch], v = var.data<float>()[ch];
    const float expect = (xv[k] - m) / std::sqrt(v + 1e-5f) * w.data<float>()[ch] + bias.data<float>()[ch];
    CHECK(std::fabs(out.data<float>()[k] - expect) < 1e-5);
  }
  auto& ln = c.out(F32, {2, 3, 4}, 24);
  auto& lm = c.out(F32, {2, 3, 1}, 6);
  auto& lr = c.out(F32, {2, 3, 1}, 6);
  CHECK(c.run("aten::native_layer_norm.out", {t(x), c.ints({4}), EValue(), EValue(), d(1e-5), t(ln), t(lm), t(lr)}) ==
        Error::Ok);
  for (int row = 0; row < 6; ++row) {
    double mu = 0, sq = 0;
    for (int k = 0; k < 4; ++k) mu += xv[row * 4 + k] / 4.0;
    for (int k = 0; k < 4; ++k) sq += (xv[row * 4 + k] - mu) * (xv[row * 4 + k] - mu) / 4.0;
    for (int k = 0; k < 4; ++k)
      CHECK(std::fabs(ln.data<float>()[row * 4 + k] - (xv[row * 4 + k] - mu) / std::sqrt(sq + 1e-5)) < 1e-5);
    CHECK(std::fabs(lm.data<float>()[row] - mu) < 1e-6);
  }
}

KTEST(op_reductions) {
  Call c;
  auto xv = ktest::random_floats(2 * 3 * 4, 15);
  auto& x = c.tensor(F32, {2, 3, 4}, xv);
  auto& mean = c.out(F32, {2, 1, 1}, 2);
  CHECK(c.run("aten::mean.out", {t(x), c.ints({-1, -2}), b(true), EValue(), t(mean)}) == Error::Ok);
  auto& sum = c.out(F32, {2, 4}, 8);
  CHECK(c.run("aten::sum.IntList_out", {t(x), c.ints({1}), b(false), EValue(), t(sum)}) == Error::Ok);
  auto& am = c.out(I64, {2, 3}, 6);
  CHECK(c.run("aten::argmax.out", {t(x), i(-1), b(false), t(am)}) == Error::Ok);
  auto& mv = c.out(F32, {3, 4}, 12);
  auto& mi = c.out(I64, {3, 4}, 12);
  CHECK(c.run("aten::min.dim_min", {t(x), i(0), b(false), t(mv), t(mi)}) == Error::Ok);
  for (int n = 0; n < 2; ++n) {
    double s = 0;
    for (int k = 0; k < 12; ++k) s += xv[n * 12 + k];
    CHECK(std::fabs(mean.data<float>()[n] - s / 12) < 1e-6);
    for (int k = 0; k < 4; ++k) {
      double cs = 0;
      for (int r = 0; r < 3; ++r) cs += xv[n * 12 + r * 4 + k];
      CHECK(std::fabs(sum.data<float>()[n * 4 + k] - cs) < 1e-6);
    }
    for (int r = 0; r < 3; ++r) {
      int best = 0;
      for (int k = 1; k < 4; ++k)
        if (xv[n * 12 + r * 4 + k] > xv[n * 12 + r * 4 + best]) best = k;
      CHECK(am.data<int64_t>()[n * 3 + r] == best);
    }
  }
  for (int k = 0; k < 12; ++k) {
    const int which = xv[12 + k] < xv[k] ? 1 : 0;
    CHECK(mi.data<int64_t>()[k] == which && mv.data<float>()[k] == xv[which * 12 + k]);
  }
  auto& bad = c.out(F32, {1}, 1);
  CHECK(c.run("aten::sum.IntList_out", {t(x), c.ints({3}), b(false), EValue(), t(bad)}) == Error::InvalidArgument);
}

KTEST(op_softmax_rows) {
  Call c;
  auto xv = ktest::random_floats(3 * 5, 16);
  auto& x = c.tensor(F32, {3, 5}, xv);
  auto& sm = c.out(F32, {3, 5}, 15);
  auto& lsm = c.out(F32, {3, 5}, 15);
  CHECK(c.run("aten::_softmax.out", {t(x), i(0), b(false), t(sm)}) == Error::Ok);
  CHECK(c.run("aten::_log_softmax.out", {t(x), i(1), b(false), t(lsm)}) == Error::Ok);
  for (int col = 0; col < 5; ++col) {
    double z = 0;
    for (int r = 0; r < 3; ++r) z += std::exp(xv[r * 5 + col]);
    for (int r = 0; r < 3; ++r) CHECK(std::fabs(sm.data<float>()[r * 5 + col] - std::exp(xv[r * 5 + col]) / z) < 1e-6);
  }
  for (int r = 0; r < 3; ++r) {
    double z = 0;
    for (int k = 0; k < 5; ++k) z += std::exp(xv[r * 5 + k]);
    for (int k = 0; k < 5; ++k) CHECK(std::fabs(lsm.data<float>()[r * 5 + k] - (xv[r * 5 + k] - std::log(z))) < 1e-5);
  }
}

KTEST(op_layout_permute_slice_select_expand_cat) {
  Call c;
  auto xv = iota(24);
  auto& x = c.tensor(F32, {2, 3, 4}, xv);
  auto& p = c.out(F32, {4, 2, 3}, 24);
  CHECK(c.run("aten::permute_copy.out", {t(x), c.ints({2, 0, 1}), t(p)}) == Error::Ok);
  for (int a = 0; a < 4; ++a)
    for (int n = 0; n < 2; ++n)
      for (int r = 0; r < 3; ++r) CHECK(p.data<float>()[(a * 2 + n) * 3 + r] == xv[(n * 3 + r) * 4 + a]);
  auto& s = c.out(F32, {2, 3, 2}, 12);
  CHECK(c.run("aten::slice_copy.Tensor_out", {t(x), i(-1), i(1), i(100), i(2), t(s)}) == Error::Ok);
  CHECK(s.sizes() == (std::vector<int64_t>{2, 3, 2}));
  CHECK(s.data<float>()[0] == 1 && s.data<float>()[1] == 3 && s.data<float>()[11] == 23);
  auto& sel = c.out(F32, {2, 4}, 8);
  CHECK(c.run("aten::select_copy.int_out", {t(x), i(1), i(-1), t(sel)}) == Error::Ok);
  CHECK(sel.data<float>()[0] == 8 && sel.data<float>()[7] == 23);
  auto& col = c.tensor(F32, {3, 1}, iota(3));
  auto& e = c.out(F32, {2, 3, 4}, 24);
  CHECK(c.run("aten::expand_copy.out", {t(col), c.ints({2, -1, 4}), b(false), t(e)}) == Error::Ok);
  for (int k = 0; k < 24; ++k) CHECK(e.data<float>()[k] == static_cast<float>((k / 4) % 3));
  auto& y = c.tensor(F32, {2, 1, 4}, iota(8, 1, 100));
  auto& cat = c.out(F32, {2, 4, 4}, 32);
  CHECK(c.run("aten::cat.out", {c.tensors({&x, &y}), i(1), t(cat)}) == Error::Ok);
  CHECK(cat.data<float>()[12] == 100 && cat.data<float>()[16] == 12 && cat.data<float>()[31] == 107);
  auto& o1 = c.out(F32, {2, 3, 1}, 6);
  auto& o2 = c.out(F32, {2, 3, 3}, 18);
  CHECK(c.run("aten::split_with_sizes_copy.out", {t(x), c.ints({1, 3}), i(2), c.tensors({&o1, &o2})}) == Error::Ok);
  CHECK(o1.data<float>()[1] == 4 && o2.data<float>()[0] == 1 && o2.data<float>()[17] == 23);
  auto& bad = c.out(F32, {2, 3, 3}, 18);
  CHECK(c.run("aten::select_copy.int_out", {t(x), i(1), i(3), t(bad)}) == Error::InvalidArgument);
}

KTEST(op_dim_order_copy_to_channels_last_and_back) {
  Call c;
  auto xv = iota(2 * 3 * 2 * 2);
  auto& x = c.tensor(F32, {2, 3, 2, 2}, xv);
  auto& cl = c.out(F32, {2, 3, 2, 2}, 24);
  // An output in channels-last order: its memory holds (n, h, w, c).
  ktest::OwnedTensor nhwc(F32, {2, 3, 2, 2}, 24, {0, 2, 3, 1});
  CHECK(c.run("dim_order_ops::_clone_dim_order.out", {t(x), b(false), c.ints({0, 2, 3, 1}), EValue(nhwc.tensor())}) ==
        Error::Ok);
  CHECK(nhwc.data<float>()[1] == 4.f);  // (n0, h0, w0, c1) = x[0][1][0][0]
  CHECK(c.run("dim_order_ops::_clone_dim_order.out", {EValue(nhwc.tensor()), b(false), EValue(), t(cl)}) == Error::Ok);
  CHECK_CLOSE(cl.data<float>(), xv.data(), 24, 0);
  auto& ints = c.out(I64, {2, 3, 2, 2}, 24);
  CHECK(c.run("dim_order_ops::_to_dim_order_copy.out", {t(x), b(false), EValue(), t(ints)}) == Error::Ok);
  CHECK(ints.data<int64_t>()[23] == 23);
}

KTEST(op_pool_and_upsample) {
  Call c;
  auto& x = c.tensor(F32, {1, 1, 4, 4}, iota(16));
  auto& mp = c.out(F32, {1, 1, 2, 2}, 4);
  auto& idx = c.out(I64, {1, 1, 2, 2}, 4);
  CHECK(c.run("aten::max_pool2d_with_indices.out", {t(x), c.ints({2, 2}), c.ints({}), c.ints({0, 0}), c.ints({1, 1}),
                                                    b(false), t(mp), t(idx)}) == Error::Ok);
  CHECK(mp.data<float>()[0] == 5 && mp.data<float>()[3] == 15 && idx.data<int64_t>()[1] == 7);
  auto& up = c.out(F32, {1, 1, 8, 8}, 64);
  CHECK(c.run("aten::upsample_nearest2d.vec_out",
              {t(x), EValue(), EValue(executorch::runtime::Span<const double>(nullptr, 0)), t(up)}) ==
        Error::InvalidArgument);
  static const double scales[2] = {2.0, 2.0};
  CHECK(c.run("aten::upsample_nearest2d.vec_out",
              {t(x), EValue(), EValue(executorch::runtime::Span<const double>(scales, 2)), t(up)}) == Error::Ok);
  CHECK(up.data<float>()[8 * 3 + 5] == 6);
}

KTEST(op_index_select_embedding_gather_topk) {
  Call c;
  auto& x = c.tensor(F32, {3, 4}, iota(12));
  auto& idx = c.tensor<int64_t>(I64, {2}, {2, -3});
  auto& sel = c.out(F32, {3, 2}, 6);
  CHECK(c.run("aten::index_select.out", {t(x), i(1), t(idx), t(sel)}) == Error::Ok);
  CHECK(sel.data<float>()[0] == 2 && sel.data<float>()[1] == 1 && sel.data<float>()[5] == 9);
  auto& rows = c.tensor<int64_t>(I64, {2, 2}, {2, 0, 1, 2});
  auto& emb = c.out(F32, {2, 2, 4}, 16);
  CHECK(c.run("aten::embedding.out", {t(x), t(rows), i(-1), b(false), b(false), t(emb)}) == Error::Ok);
  CHECK(emb.data<float>()[0] == 8 && emb.data<float>()[4] == 0 && emb.data<float>()[15] == 11);
  auto& oob = c.tensor<int64_t>(I64, {1}, {3});
  auto& emb2 = c.out(F32, {1, 4}, 4);
  CHECK(c.run("aten::embedding.out", {t(x), t(oob), i(-1), b(false), b(false), t(emb2)}) == Error::InvalidArgument);
  auto& gi = c.tensor<int64_t>(I64, {3, 2}, {3, 0, 1, 1, 0, 2});
  auto& g = c.out(F32, {3, 2}, 6);
  CHECK(c.run("aten::gather.out", {t(x), i(1), t(gi), b(false), t(g)}) == Error::Ok);
  const float gexp[] = {3, 0, 5, 5, 8, 10};
  CHECK_CLOSE(g.data<float>(), gexp, 6, 0);
  auto& v = c.tensor(F32, {2, 5}, std::vector<float>{3, 1, 4, 1, 5, 9, 2, 6, 5, 3});
  auto& tv = c.out(F32, {2, 2}, 4);
  auto& ti = c.out(I64, {2, 2}, 4);
  CHECK(c.run("aten::topk.values", {t(v), i(2), i(-1), b(true), b(true), t(tv), t(ti)}) == Error::Ok);
  CHECK(tv.data<float>()[0] == 5 && tv.data<float>()[1] == 4 && ti.data<int64_t>()[2] == 0 &&
        ti.data<int64_t>()[3] == 2);
  auto& sv = c.out(F32, {2, 5}, 10);
  auto& si = c.out(I64, {2, 5}, 10);
  CHECK(c.run("aten::sort.values", {t(v), i(1), b(false), t(sv), t(si)}) == Error::Ok);
  const float sexp[] = {1, 1, 3, 4, 5, 2, 3, 5, 6, 9};
  CHECK_CLOSE(sv.data<float>(), sexp, 10, 0);
  CHECK(si.data<int64_t>()[0] == 1 && si.data<int64_t>()[1] == 3);
}

KTEST(op_fill_and_arange) {
  Call c;
  auto& f = c.out(F32, {2, 3}, 6);
  CHECK(c.run("aten::full.out", {c.ints({2, 3}), d(2.5), t(f)}) == Error::Ok);
  CHECK(f.data<float>()[5] == 2.5f);
  auto& a = c.out(I64, {4}, 8);
  CHECK(c.run("aten::arange.start_out", {i(2), i(10), i(3), t(a)}) == Error::Ok);
  CHECK(a.sizes() == std::vector<int64_t>{3});
  CHECK(a.data<int64_t>()[2] == 8);
  CHECK(c.run("aten::arange.start_out", {i(0), i(10), i(0), t(a)}) == Error::InvalidArgument);
}

KTEST(op_permute_of_large_matrices_is_a_transpose) {
  // Big enough for the tiled transpose path (partial tiles on both sides), with a batch dim.
  Call c;
  const int64_t n = 2, r = 45, k = 70;
  auto xv = iota(static_cast<size_t>(n * r * k));
  auto& x = c.tensor(F32, {n, r, k}, xv);
  auto& out = c.out(F32, {n, k, r}, static_cast<size_t>(n * r * k));
  CHECK(c.run("aten::permute_copy.out", {t(x), c.ints({0, 2, 1}), t(out)}) == Error::Ok);
  bool same = true;
  for (int64_t b2 = 0; b2 < n; ++b2)
    for (int64_t i2 = 0; i2 < r; ++i2)
      for (int64_t j = 0; j < k; ++j)
        same = same && out.data<float>()[(b2 * k + j) * r + i2] == xv[(b2 * r + i2) * k + j];
  CHECK(same);
  auto& whole = c.out(F32, {k, r, n}, static_cast<size_t>(n * r * k));
  CHECK(c.run("aten::permute_copy.out", {t(x), c.ints({2, 1, 0}), t(whole)}) == Error::Ok);
  CHECK(whole.data<float>()[(5 * r + 7) * n + 1] == xv[(1 * r + 7) * k + 5]);
}

KTEST(op_clamp_and_relu_pass_nan_through) {
  Call c;
  const float nan = std::nanf("");
  auto& x = c.tensor(F32, {4}, std::vector<float>{nan, -3.f, 0.5f, 9.f});
  auto& ht = c.out(F32, {4}, 4);
  CHECK(c.run("aten::hardtanh.out", {t(x), d(0.0), d(6.0), t(ht)}) == Error::Ok);
  CHECK(std::isnan(ht.data<float>()[0]) && ht.data<float>()[1] == 0.f && ht.data<float>()[3] == 6.f);
  auto& r = c.out(F32, {4}, 4);
  CHECK(c.run("aten::relu.out", {t(x), t(r)}) == Error::Ok);
  CHECK(std::isnan(r.data<float>()[0]) && r.data<float>()[1] == 0.f && r.data<float>()[2] == 0.5f);
  auto& xi = c.tensor<int64_t>(I64, {3}, {-5, 3, 100});
  auto& ci = c.out(I64, {3}, 3);
  CHECK(c.run("aten::clamp.out", {t(xi), i(0), EValue(), t(ci)}) == Error::Ok);
  CHECK(ci.data<int64_t>()[0] == 0 && ci.data<int64_t>()[2] == 100);
}

KTEST(op_every_kernel_survives_malformed_arguments) {
  // A malformed program can hand any kernel any values: wrong tags, wrong counts, empty
  // tensors. Each must return (failing the context) rather than crash.
  auto kernels = executorch::runtime::registered_kernels();
  CHECK(kernels.size() > 150);
  for (const auto& k : kernels) {
    for (size_t n = 0; n <= 12; ++n) {
      for (int variant = 0; variant < 4; ++variant) {
        Call c;
        std::vector<EValue> args;
        auto& empty = c.out(F32, {0}, 1);
        for (size_t j = 0; j < n; ++j) {
          switch (variant) {
            case 0: args.push_back(i(-1)); break;
            case 1: args.push_back(EValue()); break;
            case 2: args.push_back(t(empty)); break;
            default: args.push_back(j % 2 ? c.ints({-7, 99}) : d(std::nan(""))); break;
          }
        }
        c.run(k.name, std::move(args));
      }
    }
  }
}

KTEST(op_integer_arguments_at_the_int64_limits) {
  // Ints, int lists and integer tensor data come from the program file: whatever a kernel
  // computes from them (sizes, counts, offsets, sums) is overflow-checked. Run under UBSan
  // (test/cpp/fuzz/run_fuzz.sh) a signed overflow aborts; here the results are checked.
  constexpr int64_t kMax = INT64_MAX, kMin = INT64_MIN;
  // 0x5555555555555556 * 3 * 3 wraps to 6 in int64: a size list whose product "is" 6.
  constexpr int64_t kWrapsToTwo = 0x5555555555555556;
  Call c;
  auto& x6 = c.tensor(F32, {2, 3}, iota(6));
  auto& o6 = c.out(F32, {6}, 64);
  CHECK(c.run("aten::view_copy.out", {t(x6), c.ints({kWrapsToTwo, 3, 3}), t(o6)}) != Error::Ok);
  CHECK(c.run("aten::view_copy.out", {t(x6), c.ints({kMax, kMax, -1}), t(o6)}) != Error::Ok);
  CHECK(c.run("executorch_prim::et_view.default", {t(x6), c.ints({kWrapsToTwo, 3, 3}), t(o6)}) != Error::Ok);
  auto& grow = c.out(F32, {1, 6}, 64);
  CHECK(c.run("executorch_prim::et_copy_index.tensor", {t(grow), t(o6), i(kMax)}) != Error::Ok);
  CHECK(c.run("aten::repeat.out", {t(x6), c.ints({kMax, 1}), t(o6)}) != Error::Ok);
  CHECK(c.run("aten::constant_pad_nd.out", {t(x6), c.ints({kMax, kMax}), d(0), t(o6)}) != Error::Ok);
  CHECK(c.run("aten::constant_pad_nd.out", {t(x6), c.ints({kMin, 0}), d(0), t(o6)}) != Error::Ok);

  // A step past the end takes one element (torch's answer), whatever the step.
  auto& x5 = c.tensor(F32, {5}, iota(5));
  auto& one = c.out(F32, {1}, 5);
  CHECK(c.run("aten::slice_copy.Tensor_out", {t(x5), i(0), i(1), i(kMax), i(kMax), t(one)}) == Error::Ok);
  CHECK(one.tensor().numel() == 1 && one.data<float>()[0] == 1.f);
  CHECK(c.run("aten::slice_copy.Tensor_out", {t(x5), i(0), i(kMin), i(kMin), i(kMax), t(one)}) == Error::Ok);
  CHECK(one.tensor().numel() == 0);
  auto& src1 = c.tensor(F32, {1}, std::vector<float>{-9.f});
  auto& scattered = c.out(F32, {5}, 5);
  CHECK(c.run("aten::slice_scatter.out", {t(x5), t(src1), i(0), i(2), EValue(), i(kMax), t(scattered)}) == Error::Ok);
  CHECK(scattered.data<float>()[2] == -9.f && scattered.data<float>()[3] == 3.f);
  auto& whole = c.out(F32, {5}, 5);
  CHECK(c.run("aten::split_copy.Tensor_out", {t(x5), i(kMax), i(0), c.tensors({&whole})}) == Error::Ok);
  CHECK(whole.data<float>()[4] == 4.f);

  // N * C * HxW wraps to the input's 6 elements: refused, not a loop over 2^62 groups.
  auto& gmean = c.out(F32, {1, 1}, 8);
  auto& grstd = c.out(F32, {1, 1}, 8);
  auto& gout = c.out(F32, {2, 3}, 6);
  CHECK(c.run("aten::native_group_norm.out", {t(x6), EValue(), EValue(), i(kWrapsToTwo), i(3), i(3), i(1), d(1e-5),
                                              t(gout), t(gmean), t(grstd)}) != Error::Ok);
  auto& img = c.tensor(F32, {1, 1, 2, 2}, iota(4));
  auto& wgt = c.tensor(F32, {1, 1, 1, 1}, iota(1, 0.f, 1.f));
  auto& conv = c.out(F32, {1, 1, 2, 2}, 4);
  CHECK(c.run("aten::convolution.out", {t(img), t(wgt), EValue(), c.ints({1, 1}), c.ints({0, 0}), c.ints({1, 1}),
                                        b(false), c.ints({0, 0}), i(kMax), t(conv)}) != Error::Ok);

  // Integer results that fit are computed exactly even when a product on the way would not.
  auto& ar = c.out(I64, {4}, 4);
  CHECK(c.run("aten::arange.start_out", {i(kMin), i(kMax), i(int64_t(1) << 62), t(ar)}) == Error::Ok);
  CHECK(ar.tensor().numel() == 4 && ar.data<int64_t>()[0] == kMin && ar.data<int64_t>()[3] == int64_t(1) << 62);
  auto& big = c.tensor<int64_t>(I64, {2}, {kMax, 5});
  auto& idx = c.tensor<int64_t>(I64, {1}, {0});
  auto& add1 = c.tensor<int64_t>(I64, {1}, {1});
  auto& sums = c.out(I64, {2}, 2);
  CHECK(c.run("aten::scatter_add.out", {t(big), i(0), t(idx), t(add1), t(sums)}) == Error::Ok);
  CHECK(sums.data<int64_t>()[0] == kMin && sums.data<int64_t>()[1] == 5);  // wraps, as torch does

  // Quantization ranges and dtypes outside the target dtype are refused (not a float-to-int overflow).
  auto& q = c.out(ScalarType::Char, {2, 3}, 6);
  CHECK(c.run("quantized_decomposed::quantize_per_tensor.out",
              {t(x6), d(0.1), i(0), i(-128), i(kMax), i(static_cast<int64_t>(ScalarType::Char)), t(q)}) != Error::Ok);
  CHECK(c.run("quantized_decomposed::quantize_per_tensor.out",
              {t(x6), d(0.1), i(0), i(-128), i(127), i(256 + static_cast<int64_t>(ScalarType::Char)), t(q)}) !=
        Error::Ok);
  CHECK(c.run("quantized_decomposed::quantize_per_tensor.out",
              {t(x6), d(0.1), i(0), i(-128), i(127), i(static_cast<int64_t>(ScalarType::Char)), t(q)}) == Error::Ok);
  auto& q32 = c.out(ScalarType::Int, {2, 3}, 6);
  auto& huge = c.tensor(F32, {2, 3}, iota(6, 1e30f));
  CHECK(c.run("quantized_decomposed::quantize_per_tensor.out",
              {t(huge), d(1.0), i(0), i(INT32_MIN), i(INT32_MAX), i(static_cast<int64_t>(ScalarType::Int)), t(q32)}) ==
        Error::Ok);
  CHECK(q32.data<int32_t>()[5] == INT32_MAX && q32.data<int32_t>()[0] == 0);
  auto& qin = c.tensor<int8_t>(ScalarType::Char, {2}, {1, -1});
  auto& sc = c.tensor(F32, {2}, std::vector<float>{1.f, 1.f});
  auto& zp = c.tensor<int64_t>(I64, {2}, {kMin, kMax});
  auto& deq = c.out(F32, {2}, 2);
  CHECK(c.run("quantized_decomposed::dequantize_per_channel.out",
              {t(qin), t(sc), t(zp), i(0), i(-128), i(127), i(static_cast<int64_t>(ScalarType::Char)), EValue(),
               t(deq)}) == Error::Ok);
}

KTEST(op_exp_based_kernels_pass_nan_through) {
  // NaN in file data reaches vexp's integer step (undefined as a float-to-int conversion before
  // it was taken out; fuzz-421cda6a74eb.pte, through an XNNPACK GELU node): NaN in, NaN out.
  Call c;
  auto& x = c.tensor(F32, {3}, std::vector<float>{std::nanf(""), 1.f, -200.f});
  for (const char* approx : {"none", "tanh"}) {
    auto& out = c.out(F32, {3}, 3);
    CHECK(c.run("aten::gelu.out", {t(x), EValue(std::string_view(approx)), t(out)}) == Error::Ok);
    CHECK(std::isnan(out.data<float>()[0]) && std::fabs(out.data<float>()[1] - 0.8413f) < 2e-3f &&
          out.data<float>()[2] == 0.f);
  }
  auto& sm = c.out(F32, {3}, 3);
  CHECK(c.run("aten::_softmax.out", {t(x), i(0), b(false), t(sm)}) == Error::Ok);
  CHECK(std::isnan(sm.data<float>()[1]));
}
