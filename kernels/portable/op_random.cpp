// Random tensors: rand, randn and dropout, from one process-wide stream of seeds (no heap, no locks).
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>

#include "kernels/portable/util/kernel_util.h"

namespace executorch {
namespace kernels {
namespace {

// A splitmix64 generator: small, fast, and good enough for initialising and masking tensors.
struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1), with float's or double's resolution.
  float uniform_f() { return static_cast<float>(next() >> 40) * 0x1.0p-24f; }
  double uniform_d() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
};

// Each call draws from its own stream: a seed taken from a counter started at the clock, so
// calls (and threads) never share values and separate runs differ, as torch's unseeded ones do.
Rng call_rng() {
  static std::atomic<uint64_t> counter{
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) * 0x2545f4914f6cdd1dull};
  Rng seeder{counter.fetch_add(0x9e3779b97f4a7c15ull, std::memory_order_relaxed)};
  return Rng{seeder.next()};
}

bool random_out(KernelRuntimeContext& ctx, const Tensor& out, const char* op) {
  ET_KERNEL_CHECK_MSG(ctx, is_floating(out.scalar_type()), InvalidType, false,
                      "%s: the output must be a floating dtype, got %s", op,
                      runtime::scalar_type_name(out.scalar_type()));
  ET_KERNEL_CHECK_MSG(ctx, out.is_contiguous(), NotSupported, false, "%s: the output must be contiguous", op);
  return true;
}

// rand.out(size, *, out): uniform in [0, 1).
void rand_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::ListInt, Tag::Tensor}), InvalidArgument);
  const Tensor out = args[1]->toTensor();
  if (!random_out(ctx, out, "rand") || !resize_out(ctx, out, args[0]->toIntList())) return;
  Rng rng = call_rng();
  const int64_t n = out.numel();
  if (out.scalar_type() == ScalarType::Float) {
    float* o = out.mutable_data_ptr<float>();
    for (int64_t i = 0; i < n; ++i) o[i] = rng.uniform_f();
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    // Rounding a value just below 1 to a 16-bit float can give 1: keep the interval half-open.
    double v = out.scalar_type() == ScalarType::Double ? rng.uniform_d() : rng.uniform_f();
    store_double(out.mutable_data_ptr(), out.scalar_type(), i, v);
    if (load_double(out.const_data_ptr(), out.scalar_type(), i) >= 1.0)
      store_double(out.mutable_data_ptr(), out.scalar_type(), i, 0.0);
  }
}

// randn.out(size, *, out): standard normal, two values per pair of uniforms (Box-Muller).
void randn_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::ListInt, Tag::Tensor}), InvalidArgument);
  const Tensor out = args[1]->toTensor();
  if (!random_out(ctx, out, "randn") || !resize_out(ctx, out, args[0]->toIntList())) return;
  Rng rng = call_rng();
  const int64_t n = out.numel();
  const double two_pi = 6.283185307179586;
  for (int64_t i = 0; i < n; i += 2) {
    const double u1 = 1.0 - rng.uniform_d();  // (0, 1]: the log stays finite
    const double r = std::sqrt(-2.0 * std::log(u1)), t = two_pi * rng.uniform_d();
    store_double(out.mutable_data_ptr(), out.scalar_type(), i, r * std::cos(t));
    if (i + 1 < n) store_double(out.mutable_data_ptr(), out.scalar_type(), i + 1, r * std::sin(t));
  }
}

// native_dropout.out(input, p, train?, *, out0, out1): in training, each element kept with
// probability 1 - p and scaled by 1 / (1 - p), the mask of kept elements in out1; otherwise (train
// false) the input and an all-true mask.
void native_dropout_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Double, Tag::None, Tag::Tensor, Tag::Tensor}), InvalidArgument);
  ET_KERNEL_CHECK(ctx, args[2]->isNone() || args[2]->isBool(), InvalidArgument);
  const Tensor in = args[0]->toTensor(), out = args[3]->toTensor(), mask = args[4]->toTensor();
  const double p = args[1]->toDouble();
  const bool train = args[2]->isNone() || args[2]->toBool();
  ET_KERNEL_CHECK_MSG(ctx, p >= 0.0 && p <= 1.0, InvalidArgument, , "native_dropout: p = %g is outside [0, 1]", p);
  ET_KERNEL_CHECK_MSG(ctx, is_floating(in.scalar_type()) && in.scalar_type() == out.scalar_type(), InvalidType, ,
                      "native_dropout: needs a floating input and an output of its dtype");
  ET_KERNEL_CHECK_MSG(ctx, mask.scalar_type() == ScalarType::Bool, InvalidType, ,
                      "native_dropout: the mask output must be bool, got %s",
                      runtime::scalar_type_name(mask.scalar_type()));
  ET_KERNEL_CHECK_MSG(ctx, in.is_contiguous(), NotSupported, , "native_dropout: the input must be contiguous");
  if (!resize_out(ctx, out, in) || !resize_out(ctx, mask, in)) return;
  ET_KERNEL_CHECK_MSG(ctx, out.is_contiguous() && mask.is_contiguous(), NotSupported, ,
                      "native_dropout: the outputs must be contiguous");
  const int64_t n = in.numel();
  bool* m = mask.mutable_data_ptr<bool>();
  const ScalarType t = in.scalar_type();
  if (!train || p == 0.0) {
    for (int64_t i = 0; i < n; ++i) m[i] = true;
    for (int64_t i = 0; i < n; ++i) store_double(out.mutable_data_ptr(), t, i, load_double(in.const_data_ptr(), t, i));
    return;
  }
  Rng rng = call_rng();
  const double scale = p < 1.0 ? 1.0 / (1.0 - p) : 0.0;
  if (t == ScalarType::Float) {
    const float* x = in.const_data_ptr<float>();
    float* y = out.mutable_data_ptr<float>();
    const float s = static_cast<float>(scale);
    for (int64_t i = 0; i < n; ++i) {
      m[i] = rng.uniform_d() >= p;
      y[i] = m[i] ? x[i] * s : 0.f;
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    m[i] = rng.uniform_d() >= p;
    store_double(out.mutable_data_ptr(), t, i, m[i] ? load_double(in.const_data_ptr(), t, i) * scale : 0.0);
  }
}

}  // namespace

// Registrations are generated from kernels/portable/functions.yaml (only the selected kernels).
#include "portable_registrations/op_random.inc"

}  // namespace kernels
}  // namespace executorch
