// Elementwise arithmetic of two tensors, or a tensor and a Scalar, with broadcasting.
#include <cmath>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "kernels/portable/util/elementwise.h"

namespace executorch {
namespace kernels {
namespace {

// Signed overflow is undefined in C++; torch wraps, so integers go through uint64.
template <typename T>
T wrap_add(T a, T b) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  else
    return a + b;
}
template <typename T>
T wrap_mul(T a, T b) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  else
    return a * b;
}

// Python-style floor division and modulo; integer division by zero yields 0 instead of UB.
template <typename T>
T floor_div(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    if (b == 0 || (b == -1 && a == INT64_MIN)) return b == 0 ? 0 : a;
    T q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
  } else {
    if (b == 0) return a / b;
    const T m = std::fmod(a, b);
    T d = (a - m) / b;
    if (m != 0 && ((b < 0) != (m < 0))) d -= 1;
    // Like torch: round the quotient to the nearest integer to absorb fmod's error.
    const T fl = std::floor(d);
    return d - fl > T(0.5) ? fl + 1 : fl;
  }
}
template <typename T>
T py_mod(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    if (b == 0 || b == -1) return 0;
    T r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
  } else {
    T r = std::fmod(a, b);
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
  }
}
template <typename T>
T c_fmod(T a, T b) {
  if constexpr (std::is_integral_v<T>)
    return b == 0 || b == -1 ? 0 : a % b;
  else
    return std::fmod(a, b);
}
template <typename T>
T int_pow(T base, T exp) {
  if (exp < 0) return base == 1 ? 1 : (base == -1 ? (exp % 2 ? -1 : 1) : 0);
  T r = 1;
  while (exp) {
    if (exp & 1) r = wrap_mul(r, base);
    base = wrap_mul(base, base);
    exp >>= 1;
  }
  return r;
}

// The second operand: a tensor argument or a Scalar argument.
bool second_operand(const EValue& v, Operand* out) {
  if (v.isTensor()) {
    *out = tensor_operand(v.toTensor());
    return true;
  }
  return scalar_operand(v, out);
}

// self (tensor or scalar) OP other (tensor or scalar) into the out argument args[nargs - 1].
template <typename F>
void binary_kernel(KernelRuntimeContext& ctx, Args args, size_t nargs, F f) {
  ET_KERNEL_CHECK(ctx, args_count_ok(args, nargs), InvalidArgument);
  ET_KERNEL_CHECK(ctx, args[nargs - 1]->isTensor(), InvalidArgument);
  Operand ops[2];
  ET_KERNEL_CHECK(ctx, second_operand(*args[0], &ops[0]) && second_operand(*args[1], &ops[1]), InvalidArgument);
  map_elementwise(ctx, ops, args[nargs - 1]->toTensor(), f);
}

// alpha from the optional Scalar argument at `i` (1 when absent).
double alpha_at(Args args, size_t i) {
  return i < args.size() && args[i] && args[i]->isScalar() ? args[i]->toScalarDouble() : 1.0;
}
int64_t ialpha_at(Args args, size_t i) {
  return i < args.size() && args[i] && args[i]->isScalar() ? scalar_int(*args[i]) : 1;
}
// -x with wrap-around (INT64_MIN stays itself) instead of signed overflow.
int64_t wrap_neg(int64_t x) { return static_cast<int64_t>(0 - static_cast<uint64_t>(x)); }

struct add_fn {
  double alpha;
  int64_t ialpha;
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return wrap_add(a, wrap_mul(b, static_cast<T>(ialpha)));
    else
      return alpha == 1.0 ? a + b : a + static_cast<T>(alpha) * b;
  }
};

// add.out / add.Scalar_out(self, other, alpha, *, out); sub is add with -alpha.
void add_out(KernelRuntimeContext& ctx, Args args) {
  binary_kernel(ctx, args, 4, add_fn{alpha_at(args, 2), ialpha_at(args, 2)});
}
void sub_out(KernelRuntimeContext& ctx, Args args) {
  binary_kernel(ctx, args, 4, add_fn{-alpha_at(args, 2), wrap_neg(ialpha_at(args, 2))});
}
// rsub.Scalar_out(self, other, alpha, *, out) = other - alpha * self
void rsub_out(KernelRuntimeContext& ctx, Args args) {
  const double alpha = alpha_at(args, 2);
  const int64_t ialpha = ialpha_at(args, 2);
  binary_kernel(ctx, args, 4, [=](auto a, auto b) { return add_fn{-alpha, wrap_neg(ialpha)}(b, a); });
}
void mul_out(KernelRuntimeContext& ctx, Args args) {
  binary_kernel(ctx, args, 3, [](auto a, auto b) { return wrap_mul(a, b); });
}
void div_out(KernelRuntimeContext& ctx, Args args) {
  binary_kernel(ctx, args, 3, [](auto a, auto b) {
    using T = decltype(a);
    if constexpr (std::is_integral_v<T>)
      return b == 0 ? T(0) : floor_div(a, b);
    else
      return a / b;
  });
}

// div.out_mode / div.Scalar_mode_out(self, other, str? rounding_mode, *, out)
void div_mode_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_count_ok(args, 4) && (args[2]->isNone() || args[2]->isString()), InvalidArgument);
  const std::string_view mode = args[2]->toString();
  if (args[2]->isNone()) {
    binary_kernel(ctx, args, 4, [](auto a, auto b) { return a / b; });
  } else if (mode == "trunc") {
    binary_kernel(ctx, args, 4, [](auto a, auto b) {
      using T = decltype(a);
      if constexpr (std::is_integral_v<T>)
        return b == 0 || (b == -1 && a == INT64_MIN) ? T(0) : a / b;
      else
        return std::trunc(a / b);
    });
  } else if (mode == "floor") {
    binary_kernel(ctx, args, 4, [](auto a, auto b) { return floor_div(a, b); });
  } else {
    ET_KERNEL_CHECK_MSG(ctx, false, InvalidArgument, , "div: rounding_mode must be trunc or floor");
  }
}

void floor_divide_out(KernelRuntimeContext& ctx, Args args) {
  binary_kernel(ctx, args, 3, [](auto a, auto b) { return floor_div(a, b); });
}
void remainder_out(KernelRuntimeContext& ctx, Args args) {
  binary_kernel(ctx, args, 3, [](auto a, auto b) { return py_mod(a, b); });
}
void fmod_out(KernelRuntimeContext& ctx, Args args) {
  binary_kernel(ctx, args, 3, [](auto a, auto b) { return c_fmod(a, b); });
}
void pow_out(KernelRuntimeContext& ctx, Args args) {
  binary_kernel(ctx, args, 3, [](auto a, auto b) {
    using T = decltype(a);
    if constexpr (std::is_integral_v<T>)
      return int_pow(a, b);
    else
      return std::pow(a, b);
  });
}
void atan2_out(KernelRuntimeContext& ctx, Args args) {
  binary_kernel(ctx, args, 3, [](auto a, auto b) {
    using T = decltype(a);
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(std::atan2(double(a), double(b)));
    else
      return std::atan2(a, b);
  });
}
// maximum/minimum propagate NaN.
void maximum_out(KernelRuntimeContext& ctx, Args args) {
  binary_kernel(ctx, args, 3, [](auto a, auto b) { return a != a ? a : (b != b ? b : (a > b ? a : b)); });
}
void minimum_out(KernelRuntimeContext& ctx, Args args) {
  binary_kernel(ctx, args, 3, [](auto a, auto b) { return a != a ? a : (b != b ? b : (a < b ? a : b)); });
}

// Bitwise ops on integers/bools; on floats torch refuses them, so do we.
template <typename F>
void bitwise_kernel(KernelRuntimeContext& ctx, Args args, F f) {
  ET_KERNEL_CHECK(ctx, args_count_ok(args, 3) && args[2]->isTensor(), InvalidArgument);
  const Tensor out = args[2]->toTensor();
  ET_KERNEL_CHECK_MSG(ctx, is_integral(out.scalar_type(), true), InvalidType, ,
                      "bitwise ops need integer or bool tensors");
  binary_kernel(ctx, args, 3, [f](auto a, auto b) {
    using T = decltype(a);
    if constexpr (std::is_integral_v<T>)
      return f(a, b);
    else
      return T(0);
  });
}
void bitwise_and_out(KernelRuntimeContext& ctx, Args a) {
  bitwise_kernel(ctx, a, [](int64_t x, int64_t y) { return x & y; });
}
void bitwise_or_out(KernelRuntimeContext& ctx, Args a) {
  bitwise_kernel(ctx, a, [](int64_t x, int64_t y) { return x | y; });
}
void bitwise_xor_out(KernelRuntimeContext& ctx, Args a) {
  bitwise_kernel(ctx, a, [](int64_t x, int64_t y) { return x ^ y; });
}

// Shifts as torch computes them on integers: a count past the value's bits (or negative)
// shifts everything out, leaving 0, or for a right shift the sign. Computed in int64 and
// stored truncated to the output's width, which gives the narrower types' results too.
int64_t shift_left(int64_t x, int64_t n) {
  return n < 0 || n >= 64 ? 0 : static_cast<int64_t>(static_cast<uint64_t>(x) << n);
}
int64_t shift_right(int64_t x, int64_t n) { return n < 0 || n >= 64 ? (x < 0 ? -1 : 0) : x >> n; }

// bitwise_left_shift / bitwise_right_shift .Tensor_out and .Tensor_Scalar_out(self, other, *, out)
void bitwise_left_shift_out(KernelRuntimeContext& ctx, Args a) { bitwise_kernel(ctx, a, shift_left); }
void bitwise_right_shift_out(KernelRuntimeContext& ctx, Args a) { bitwise_kernel(ctx, a, shift_right); }

}  // namespace

// Registrations are generated from kernels/portable/functions.yaml (only the selected kernels).
#include "portable_registrations/op_binary.inc"

}  // namespace kernels
}  // namespace executorch
