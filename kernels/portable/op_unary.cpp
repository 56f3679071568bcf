// Elementwise single-input kernels: math functions and activations (parameterised or not).
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/cpu/activation.h"
#include "kernels/portable/util/elementwise.h"

namespace executorch {
namespace kernels {
namespace {

// Runs `f` over args[0] into the out argument, the last of `tags`.
template <typename F>
void unary_kernel(KernelRuntimeContext& ctx, Args args, std::initializer_list<Tag> tags, F f) {
  ET_KERNEL_CHECK(ctx, args_ok(args, tags), InvalidArgument);
  const Operand in[1] = {tensor_operand(args[0]->toTensor())};
  map_elementwise(ctx, in, args[tags.size() - 1]->toTensor(), f);
}

// A computed value as element type T. For integer T a NaN, infinite or out-of-range result
// (log of a negative integer, say) saturates instead of being undefined behaviour.
template <typename T, typename R>
T to_element(R r) {
  if constexpr (std::is_integral_v<T>) {
    if (std::isnan(r)) return 0;
    if (r <= static_cast<R>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
    if (r >= static_cast<R>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  }
  return static_cast<T>(r);
}

// Defines a functor usable on float, double and int64 elements, and its .out kernel.
#define ET_UNARY_OP(name, expr)                                       \
  struct name##_fn {                                                  \
    template <typename T>                                             \
    T operator()(T x) const {                                         \
      using R = std::conditional_t<std::is_integral_v<T>, double, T>; \
      const R v = static_cast<R>(x);                                  \
      (void)v;                                                        \
      return to_element<T>(static_cast<R>(expr));                     \
    }                                                                 \
  };                                                                  \
  void name##_out(KernelRuntimeContext& ctx, Args args) {             \
    unary_kernel(ctx, args, {Tag::Tensor, Tag::Tensor}, name##_fn{}); \
  }

ET_UNARY_OP(exp, std::exp(v))
ET_UNARY_OP(expm1, std::expm1(v))
ET_UNARY_OP(log, std::log(v))
ET_UNARY_OP(log1p, std::log1p(v))
ET_UNARY_OP(log2, std::log2(v))
ET_UNARY_OP(log10, std::log10(v))
ET_UNARY_OP(sqrt, std::sqrt(v))
ET_UNARY_OP(rsqrt, R(1) / std::sqrt(v))
ET_UNARY_OP(reciprocal, R(1) / v)
ET_UNARY_OP(sin, std::sin(v))
ET_UNARY_OP(cos, std::cos(v))
ET_UNARY_OP(tan, std::tan(v))
ET_UNARY_OP(asin, std::asin(v))
ET_UNARY_OP(acos, std::acos(v))
ET_UNARY_OP(atan, std::atan(v))
ET_UNARY_OP(asinh, std::asinh(v))
ET_UNARY_OP(acosh, std::acosh(v))
ET_UNARY_OP(atanh, std::atanh(v))
ET_UNARY_OP(sinh, std::sinh(v))
ET_UNARY_OP(cosh, std::cosh(v))
ET_UNARY_OP(tanh, std::tanh(v))
ET_UNARY_OP(sigmoid, R(1) / (R(1) + std::exp(-v)))
ET_UNARY_OP(erf, std::erf(v))
ET_UNARY_OP(silu, v / (R(1) + std::exp(-v)))
ET_UNARY_OP(hardswish, v* std::fmin(std::fmax(v + R(3), R(0)), R(6)) / R(6))
ET_UNARY_OP(hardsigmoid, std::fmin(std::fmax(v + R(3), R(0)), R(6)) / R(6))
// round() in torch rounds half to even, which nearbyint does in the default rounding mode.
ET_UNARY_OP(round, std::nearbyint(v))
ET_UNARY_OP(floor, std::floor(v))
ET_UNARY_OP(ceil, std::ceil(v))
ET_UNARY_OP(trunc, std::trunc(v))
#undef ET_UNARY_OP

// Exact for integers (no trip through double), as torch computes them.
struct abs_fn {
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_integral_v<T>)
      return x < 0 ? static_cast<T>(0 - static_cast<uint64_t>(x)) : x;
    else
      return std::fabs(x);
  }
};
struct neg_fn {
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(0 - static_cast<uint64_t>(x));
    else
      return -x;
  }
};
struct sign_fn {
  template <typename T>
  T operator()(T x) const {
    if (x != x) return x;  // NaN stays NaN
    return static_cast<T>((T(0) < x) - (x < T(0)));
  }
};
struct relu_fn {
  template <typename T>
  T operator()(T x) const {
    return x < T(0) ? T(0) : x;  // NaN < 0 is false: NaN passes through
  }
};

void abs_out(KernelRuntimeContext& ctx, Args a) { unary_kernel(ctx, a, {Tag::Tensor, Tag::Tensor}, abs_fn{}); }
void neg_out(KernelRuntimeContext& ctx, Args a) { unary_kernel(ctx, a, {Tag::Tensor, Tag::Tensor}, neg_fn{}); }
void sign_out(KernelRuntimeContext& ctx, Args a) { unary_kernel(ctx, a, {Tag::Tensor, Tag::Tensor}, sign_fn{}); }
void relu_out(KernelRuntimeContext& ctx, Args a) { unary_kernel(ctx, a, {Tag::Tensor, Tag::Tensor}, relu_fn{}); }

// min(max(x, lo), hi) with NaN passing through (every comparison with NaN is false, which
// also keeps the float loop branch-free and vectorizable); a missing bound is +-infinity.
struct clamp_fn {
  float flo, fhi;
  double lo, hi;
  int64_t ilo, ihi;
  template <typename T>
  T operator()(T x) const {
    T l, h;
    if constexpr (std::is_same_v<T, float>)
      l = flo, h = fhi;
    else if constexpr (std::is_same_v<T, double>)
      l = lo, h = hi;
    else
      l = ilo, h = ihi;
    const T r = x < l ? l : x;
    return r > h ? h : r;
  }
};

clamp_fn make_clamp(const EValue& lo, const EValue& hi) {
  const double l = lo.isScalar() ? lo.toScalarDouble() : -INFINITY;
  const double h = hi.isScalar() ? hi.toScalarDouble() : INFINITY;
  return {static_cast<float>(l),
          static_cast<float>(h),
          l,
          h,
          lo.isScalar() ? scalar_int(lo) : INT64_MIN,
          hi.isScalar() ? scalar_int(hi) : INT64_MAX};
}

// clamp.out(self, Scalar? min, Scalar? max, *, out)
void clamp_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_count_ok(args, 4), InvalidArgument);
  ET_KERNEL_CHECK(ctx, (args[1]->isNone() || args[1]->isScalar()) && (args[2]->isNone() || args[2]->isScalar()),
                  InvalidArgument);
  unary_kernel(ctx, args, {Tag::Tensor, Tag::None, Tag::None, Tag::Tensor}, make_clamp(*args[1], *args[2]));
}

// hardtanh.out(self, Scalar min_val, Scalar max_val, *, out)
void hardtanh_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_count_ok(args, 4), InvalidArgument);
  unary_kernel(ctx, args, {Tag::Tensor, Tag::ListScalar, Tag::ListScalar, Tag::Tensor}, make_clamp(*args[1], *args[2]));
}

// clamp.Tensor_out(self, Tensor? min, Tensor? max, *, out): bounds broadcast like operands.
void clamp_tensor_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::None, Tag::None, Tag::Tensor}), InvalidArgument);
  const double inf = INFINITY;
  const Operand ops[3] = {tensor_operand(args[0]->toTensor()),
                          args[1]->isTensor() ? tensor_operand(args[1]->toTensor()) : double_operand(-inf),
                          args[2]->isTensor() ? tensor_operand(args[2]->toTensor()) : double_operand(inf)};
  map_elementwise(ctx, ops, args[3]->toTensor(), [](auto x, auto lo, auto hi) {
    if (x != x) return x;
    return x < lo ? lo : (x > hi ? hi : x);
  });
}

// leaky_relu.out(self, Scalar negative_slope, *, out)
void leaky_relu_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_count_ok(args, 3), InvalidArgument);
  const double slope = args[1]->toScalarDouble();
  unary_kernel(ctx, args, {Tag::Tensor, Tag::ListScalar, Tag::Tensor}, [slope](auto x) {
    using T = decltype(x);
    return x > T(0) ? x : static_cast<T>(x * slope);
  });
}

// elu.out(self, Scalar alpha, Scalar scale, Scalar input_scale, *, out)
void elu_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_count_ok(args, 5), InvalidArgument);
  const double alpha = args[1]->toScalarDouble(), scale = args[2]->toScalarDouble(),
               in_scale = args[3]->toScalarDouble();
  unary_kernel(ctx, args, {Tag::Tensor, Tag::ListScalar, Tag::ListScalar, Tag::ListScalar, Tag::Tensor}, [=](auto x) {
    using T = decltype(x);
    using R = std::conditional_t<std::is_integral_v<T>, double, T>;
    const R v = static_cast<R>(x);
    return static_cast<T>(v > R(0) ? v * R(scale) : R(alpha) * R(scale) * std::expm1(v * R(in_scale)));
  });
}

// gelu.out(self, str approximate, *, out)
void gelu_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::String, Tag::Tensor}), InvalidArgument);
  const std::string_view mode = args[1]->toString();
  ET_KERNEL_CHECK_MSG(ctx, mode == "none" || mode == "tanh", InvalidArgument, ,
                      "gelu: approximate must be 'none' or 'tanh'");
  const bool tanh_mode = mode == "tanh";
  const Tensor in = args[0]->toTensor(), out = args[2]->toTensor();
  if (in.scalar_type() == ScalarType::Float && out.scalar_type() == ScalarType::Float && in.is_contiguous()) {
    // The transformer case: a vectorised pass over contiguous float32.
    if (!resize_out(ctx, out, in)) return;
    if (out.is_contiguous()) {
      cpu::gelu(in.const_data_ptr<float>(), out.mutable_data_ptr<float>(), in.numel(), tanh_mode);
      return;
    }
  }
  unary_kernel(ctx, args, {Tag::Tensor, Tag::String, Tag::Tensor}, [tanh_mode](auto x) {
    using T = decltype(x);
    using R = std::conditional_t<std::is_integral_v<T>, double, T>;
    const R v = static_cast<R>(x);
    if (tanh_mode) {
      const R k = static_cast<R>(0.7978845608028654);  // sqrt(2 / pi)
      return static_cast<T>(R(0.5) * v * (R(1) + std::tanh(k * (v + R(0.044715) * v * v * v))));
    }
    return static_cast<T>(R(0.5) * v * (R(1) + std::erf(v * static_cast<R>(0.7071067811865476))));
  });
}

// softplus.out(self, Scalar beta, Scalar threshold, *, out)
void softplus_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_count_ok(args, 4), InvalidArgument);
  const double beta = args[1]->toScalarDouble(), threshold = args[2]->toScalarDouble();
  unary_kernel(ctx, args, {Tag::Tensor, Tag::ListScalar, Tag::ListScalar, Tag::Tensor}, [=](auto x) {
    using T = decltype(x);
    using R = std::conditional_t<std::is_integral_v<T>, double, T>;
    const R v = static_cast<R>(x);
    return static_cast<T>(v * R(beta) > R(threshold) ? v : std::log1p(std::exp(v * R(beta))) / R(beta));
  });
}

// logit.out(self, float? eps, *, out): log(x / (1 - x)), x first clamped to [eps, 1 - eps] when eps is given.
void logit_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::None, Tag::Tensor}), InvalidArgument);
  ET_KERNEL_CHECK(ctx, args[1]->isNone() || args[1]->isDouble(), InvalidArgument);
  const bool clamp = args[1]->isDouble();
  const double eps = clamp ? args[1]->toDouble() : 0.0;
  unary_kernel(ctx, args, {Tag::Tensor, Tag::None, Tag::Tensor}, [=](auto x) {
    using T = decltype(x);
    using R = std::conditional_t<std::is_integral_v<T>, double, T>;
    R v = static_cast<R>(x);
    if (clamp) {
      const R lo = static_cast<R>(eps), hi = R(1) - static_cast<R>(eps);
      v = v < lo ? lo : (v > hi ? hi : v);  // NaN passes through
    }
    return to_element<T>(std::log(v / (R(1) - v)));
  });
}

// bitwise_not.out(self, *, out): ~x on integers, logical not on bools; floats are refused as torch refuses them.
void bitwise_not_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Tensor}), InvalidArgument);
  const ScalarType it = args[0]->toTensor().scalar_type(), ot = args[1]->toTensor().scalar_type();
  ET_KERNEL_CHECK_MSG(ctx, is_integral(it, true) && it == ot, InvalidType, ,
                      "bitwise_not: needs an integer or bool tensor and an output of its dtype, got %s -> %s",
                      runtime::scalar_type_name(it), runtime::scalar_type_name(ot));
  if (it == ScalarType::Bool) {
    unary_kernel(ctx, args, {Tag::Tensor, Tag::Tensor}, [](auto x) { return static_cast<decltype(x)>(x == 0); });
    return;
  }
  unary_kernel(ctx, args, {Tag::Tensor, Tag::Tensor}, [](auto x) {
    using T = decltype(x);
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(~x);
    else
      return x;  // unreachable: integer tensors compute in int64
  });
}

// glu.out(self, dim, *, out): the first half along dim times the sigmoid of the second half.
void glu_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Int, Tag::Tensor}), InvalidArgument);
  const Tensor in = args[0]->toTensor(), out = args[2]->toTensor();
  int64_t d;
  ET_KERNEL_CHECK_MSG(ctx, in.dim() > 0 && normalize_dim(args[1]->toInt(), in.dim(), &d), InvalidArgument, ,
                      "glu: dim %lld out of range for a %lld-dim input", static_cast<long long>(args[1]->toInt()),
                      static_cast<long long>(in.dim()));
  ET_KERNEL_CHECK_MSG(ctx, in.size(d) % 2 == 0, InvalidArgument, , "glu: dim %lld has odd size %lld",
                      static_cast<long long>(d), static_cast<long long>(in.size(d)));
  ET_KERNEL_CHECK_MSG(ctx, is_floating(in.scalar_type()) && is_floating(out.scalar_type()), InvalidType, ,
                      "glu: needs floating tensors");
  // The two halves are operands over the output shape: the input's strides, the second moved half a dim in.
  Operand a = tensor_operand(in);
  a.sizes[d] /= 2;
  a.row_major = false;
  Operand b = a;
  b.data = static_cast<const char*>(b.data) +
           a.sizes[d] * a.strides[d] * static_cast<int64_t>(runtime::element_size(in.scalar_type()));
  const Operand ins[2] = {a, b};
  map_elementwise(ctx, ins, out, [](auto x, auto y) {
    using T = decltype(x);
    return static_cast<T>(x / (T(1) + std::exp(-y)));
  });
}

}  // namespace

// Registrations are generated from kernels/portable/functions.yaml (only the selected kernels).
#include "portable_registrations/op_unary.inc"

}  // namespace kernels
}  // namespace executorch
