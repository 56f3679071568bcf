// Elementwise maps over tensors and scalars with broadcasting, strides and dtype conversion.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/cpu/half.h"
#include "kernels/cpu/parallel.h"
#include "kernels/portable/util/kernel_util.h"
// Which compute paths this build compiles (EXECUTORCH_DTYPE_SELECTIVE_BUILD): generated per build.
#include "portable_registrations/selected_dtypes.h"

namespace executorch {
namespace kernels {

// One input of an elementwise op: a tensor, or a Scalar argument broadcast everywhere.
struct Operand {
  const void* data = nullptr;
  ScalarType type = ScalarType::Float;  // for a scalar: Double, Long or Bool
  size_t ndim = 0;
  int64_t sizes[kMaxDim] = {};
  int64_t strides[kMaxDim] = {};
  bool row_major = true;
  bool is_scalar = false;
  double scalar_d = 0;
  int64_t scalar_i = 0;
};

Operand tensor_operand(const Tensor& t);
// From a Scalar EValue (Int, Double or Bool); false when `v` is none of these.
bool scalar_operand(const EValue& v, Operand* out);
Operand double_operand(double v);

inline bool operand_integral(const Operand& o) { return is_integral(o.type, true); }
inline bool operand_float32(const Operand& o) { return o.is_scalar || o.type == ScalarType::Float; }

inline double load_d(const Operand& o, int64_t off) {
  return o.is_scalar ? o.scalar_d : load_double(o.data, o.type, off);
}
inline int64_t load_i(const Operand& o, int64_t off) {
  return o.is_scalar ? o.scalar_i : load_int(o.data, o.type, off);
}

// The broadcast of the operands' shapes (torch rules); false when they do not broadcast.
bool broadcast_shape(const Operand* ops, size_t n, int64_t* sizes, size_t* ndim);

// An iteration over an output shape with the element strides of each operand (0 where broadcast).
struct Walk {
  size_t ndim = 0;
  int64_t sizes[kMaxDim] = {};
  int64_t strides[4][kMaxDim] = {};  // [0] is the output, then the inputs
  size_t count = 1;
  bool linear = false;  // every operand has the output's sizes and strides (or is a scalar)
  bool dense = false;  // linear, and no operand is a scalar or a single broadcast element
};

// Plans the walk of `out` (already resized to the broadcast shape) over `ins`.
Walk plan_walk(const Tensor& out, const Operand* ins, size_t n);

// Plans a walk over the broadcast of `ins` (tensors) whose output offset is the row-major
// position in that shape: for ops whose output is not the broadcast (masked_select). False when
// the shapes do not broadcast.
bool plan_broadcast_walk(const Operand* ins, size_t n, Walk* w);

// Mask elements (bool, or uint8 as torch also takes) are tested as bytes.
inline bool is_mask_dtype(const Tensor& t) {
  return t.scalar_type() == ScalarType::Bool || t.scalar_type() == ScalarType::Byte;
}

// Calls f(out_offset, in_offsets) for every output element.
template <typename F>
void walk(const Walk& w, F&& f) {
  int64_t offs[4] = {0, 0, 0, 0};
  if (w.linear) {
    int64_t total = 1;
    for (size_t d = 0; d < w.ndim; ++d) total *= w.sizes[d];
    for (int64_t i = 0; i < total; ++i) {
      for (size_t k = 0; k < w.count; ++k) offs[k] = w.strides[k][0] == 0 && k > 0 ? 0 : i;
      f(offs[0], offs + 1);
    }
    return;
  }
  int64_t idx[kMaxDim] = {};
  for (size_t d = 0; d < w.ndim; ++d)
    if (w.sizes[d] == 0) return;
  const size_t last = w.ndim == 0 ? 0 : w.ndim - 1;
  const int64_t inner = w.ndim == 0 ? 1 : w.sizes[last];
  while (true) {
    int64_t base[4];
    for (size_t k = 0; k < w.count; ++k) base[k] = offs[k];
    for (int64_t i = 0; i < inner; ++i) {
      f(offs[0], offs + 1);
      if (w.ndim == 0) break;
      for (size_t k = 0; k < w.count; ++k) offs[k] += w.strides[k][last];
    }
    for (size_t k = 0; k < w.count; ++k) offs[k] = base[k];
    // Odometer over the outer dimensions.
    size_t d = last;
    while (true) {
      if (d == 0) return;
      --d;
      if (++idx[d] < w.sizes[d]) {
        for (size_t k = 0; k < w.count; ++k) offs[k] += w.strides[k][d];
        break;
      }
      for (size_t k = 0; k < w.count; ++k) offs[k] -= w.strides[k][d] * (w.sizes[d] - 1);
      idx[d] = 0;
    }
  }
}

// How the inputs should be combined: in float32, in int64 (exact integers) or in double;
// kHalf is float32 arithmetic over tensors some of which are stored as Half or BFloat16.
enum class ComputeKind { kFloat32, kInt64, kDouble, kHalf };

// The load/store tag of a Float, Half or BFloat16 tensor.
inline cpu::Elem elem_of(ScalarType t) {
  return t == ScalarType::Half ? cpu::Elem::kF16 : (t == ScalarType::BFloat16 ? cpu::Elem::kBF16 : cpu::Elem::kF32);
}
ComputeKind compute_kind(ScalarType out, const Operand* ins, size_t n);

// out = f(ins...) elementwise for 1..3 operands; F provides operator() for float, double
// and int64_t arguments. Checks dtypes, broadcasts, resizes `out`; failures go to `ctx`.
template <typename F, size_t N>
void map_elementwise(KernelRuntimeContext& ctx, const Operand (&ins)[N], const Tensor& out, F f);

// Like map_elementwise but the result is a predicate written as bool/0/1 in out's dtype.
template <typename F, size_t N>
void map_predicate(KernelRuntimeContext& ctx, const Operand (&ins)[N], const Tensor& out, F f);

// v rounded to float32 (nearest, ties to even) and widened back, without an out-of-range cast.
double round_to_float(double v);
// v rounded to `type` (Float, Half or BFloat16, through float32 as torch casts a number) and
// widened back; other types return v.
double round_to(ScalarType type, double v);
// Whether torch compares tensors with a number in another dtype than double/int64 would give,
// and which (`type`): the tensors' one dtype when that is Float, Half or BFloat16; or, when a
// number is floating, the tensors' one integer (or Bool) dtype, compared in float32. False for
// no number, tensors of several dtypes, Double, or integer tensors with an integer number.
bool number_comparison_type(const Operand* ins, size_t n, ScalarType* type);

// Fails `ctx` for a call whose dtypes need a compute path the dtype-selective build left out.
void dtype_not_selected(KernelRuntimeContext& ctx, ScalarType out);

// Validates dtypes, broadcasts and resizes; returns false (ctx failed) on bad input.
bool prepare_elementwise(KernelRuntimeContext& ctx, const Operand* ins, size_t n, const Tensor& out);

// out[i] = f(ins[k][i]...) over `n` elements of one 16-bit storage type T, computed in float.
template <typename T, typename F, size_t N>
void map_dense(const Operand (&ins)[N], void* out, int64_t n, F f) {
  const T* p[N];
  for (size_t k = 0; k < N; ++k) p[k] = static_cast<const T*>(ins[k].data);
  T* o = static_cast<T*>(out);
  for (int64_t i = 0; i < n; ++i) {
    float r;
    if constexpr (N == 1)
      r = f(cpu::to_float(p[0][i]));
    else if constexpr (N == 2)
      r = f(cpu::to_float(p[0][i]), cpu::to_float(p[1][i]));
    else
      r = f(cpu::to_float(p[0][i]), cpu::to_float(p[1][i]), cpu::to_float(p[2][i]));
    if constexpr (std::is_same_v<T, cpu::Half>)
      o[i] = cpu::to_half(r);
    else
      o[i] = cpu::to_bfloat16(r);
  }
}

// Elements per chunk of a dense float32 map: large enough that a chunk outweighs handing it out.
constexpr int64_t kElementwiseGrain = 1 << 15;

template <typename F, size_t N>
void map_elementwise(KernelRuntimeContext& ctx, const Operand (&ins)[N], const Tensor& out, F f) {
  static_assert(N >= 1 && N <= 3, "1 to 3 operands");
  if (!prepare_elementwise(ctx, ins, N, out)) return;
  const Walk w = plan_walk(out, ins, N);
  void* o = out.mutable_data_ptr();
  const ScalarType ot = out.scalar_type();
  const ComputeKind kind = compute_kind(ot, ins, N);
  if ((kind == ComputeKind::kFloat32 && !ET_SELECTED_COMPUTE_FLOAT32) ||
      (kind == ComputeKind::kInt64 && !ET_SELECTED_COMPUTE_INT64) ||
      (kind == ComputeKind::kDouble && !ET_SELECTED_COMPUTE_DOUBLE) ||
      (kind == ComputeKind::kHalf && !ET_SELECTED_COMPUTE_HALF)) {
    dtype_not_selected(ctx, ot);
    return;
  }
  switch (kind) {
    case ComputeKind::kFloat32:
      if constexpr (ET_SELECTED_COMPUTE_FLOAT32) {
        float* of = static_cast<float*>(o);
        const float* p[N];
        float s[N];
        for (size_t k = 0; k < N; ++k) {
          p[k] = static_cast<const float*>(ins[k].data);
          s[k] = static_cast<float>(ins[k].scalar_d);
        }
        const int64_t n = out.numel();
        if (w.dense) {
          // The hot case (same shapes, row-major): plain loops the compiler vectorizes, in chunks
          // the thread pool can share out (each element written by one chunk).
          cpu::parallel_for(0, n, kElementwiseGrain, [&](int64_t lo, int64_t hi) {
            if constexpr (N == 1) {
              for (int64_t i = lo; i < hi; ++i) of[i] = f(p[0][i]);
            } else if constexpr (N == 2) {
              for (int64_t i = lo; i < hi; ++i) of[i] = f(p[0][i], p[1][i]);
            } else {
              for (int64_t i = lo; i < hi; ++i) of[i] = f(p[0][i], p[1][i], p[2][i]);
            }
          });
          return;
        }
        if constexpr (N == 2) {
          if (w.linear && w.ndim > 0) {
            // Same shapes but one side (or both) a scalar or a single element (x * 0.125 in
            // attention; both full is the dense case above): that value is loaded once and the
            // loop over the other side vectorizes.
            const bool var0 = !ins[0].is_scalar && w.strides[1][0] != 0;
            const bool var1 = !ins[1].is_scalar && w.strides[2][0] != 0;
            const float c0 = var0 ? 0.f : (ins[0].is_scalar ? s[0] : p[0][0]);
            const float c1 = var1 ? 0.f : (ins[1].is_scalar ? s[1] : p[1][0]);
            cpu::parallel_for(0, n, kElementwiseGrain, [&](int64_t lo, int64_t hi) {
              if (var0) {
                for (int64_t i = lo; i < hi; ++i) of[i] = f(p[0][i], c1);
              } else if (var1) {
                for (int64_t i = lo; i < hi; ++i) of[i] = f(c0, p[1][i]);
              } else {
                for (int64_t i = lo; i < hi; ++i) of[i] = f(c0, c1);
              }
            });
            return;
          }
        }
        walk(w, [&](int64_t oo, const int64_t* io) {
          float v[N];
          for (size_t k = 0; k < N; ++k) v[k] = ins[k].is_scalar ? s[k] : p[k][io[k]];
          if constexpr (N == 1)
            of[oo] = f(v[0]);
          else if constexpr (N == 2)
            of[oo] = f(v[0], v[1]);
          else
            of[oo] = f(v[0], v[1], v[2]);
        });
        return;
      }
      return;
    case ComputeKind::kInt64:
      if constexpr (ET_SELECTED_COMPUTE_INT64)
        walk(w, [&](int64_t oo, const int64_t* io) {
          int64_t v[N];
          for (size_t k = 0; k < N; ++k) v[k] = load_i(ins[k], io[k]);
          int64_t r;
          if constexpr (N == 1)
            r = f(v[0]);
          else if constexpr (N == 2)
            r = f(v[0], v[1]);
          else
            r = f(v[0], v[1], v[2]);
          store_int(o, ot, oo, r);
        });
      return;
    case ComputeKind::kDouble:
      if constexpr (ET_SELECTED_COMPUTE_DOUBLE)
        walk(w, [&](int64_t oo, const int64_t* io) {
          double v[N];
          for (size_t k = 0; k < N; ++k) v[k] = load_d(ins[k], io[k]);
          double r;
          if constexpr (N == 1)
            r = f(v[0]);
          else if constexpr (N == 2)
            r = f(v[0], v[1]);
          else
            r = f(v[0], v[1], v[2]);
          store_double(o, ot, oo, r);
        });
      return;
    case ComputeKind::kHalf:
      if constexpr (ET_SELECTED_COMPUTE_HALF) {
        cpu::Elem e[N];
        float s[N];
        for (size_t k = 0; k < N; ++k) {
          e[k] = elem_of(ins[k].type);
          s[k] = static_cast<float>(ins[k].scalar_d);
        }
        const cpu::Elem oe = elem_of(ot);
        bool same = w.dense;
        for (size_t k = 0; k < N; ++k) same = same && ins[k].type == ot;
        if (same) {
          // The hot case (one 16-bit dtype, same shapes, row-major): typed loops, no per-element switch.
          if (oe == cpu::Elem::kBF16)
            map_dense<cpu::BFloat16>(ins, o, out.numel(), f);
          else
            map_dense<cpu::Half>(ins, o, out.numel(), f);
          return;
        }
        walk(w, [&](int64_t oo, const int64_t* io) {
          float v[N];
          for (size_t k = 0; k < N; ++k) v[k] = ins[k].is_scalar ? s[k] : cpu::load_elem(ins[k].data, e[k], io[k]);
          float r;
          if constexpr (N == 1)
            r = f(v[0]);
          else if constexpr (N == 2)
            r = f(v[0], v[1]);
          else
            r = f(v[0], v[1], v[2]);
          cpu::store_elem(o, oe, oo, r);
        });
      }
      return;
  }
}

// map_predicate over a linear walk into a Bool output, every tensor operand stored as T and read
// as C (float for Float, int64 0/1 for Bool: the values the generic path compares). An operand
// whose walk stride is 0 (a scalar or a one-element tensor) is loaded once.
template <typename T, typename C, typename F, size_t N>
void predicate_dense(const Walk& w, const Operand (&ins)[N], bool* o, int64_t n, F f) {
  const T* p[N];
  C c[N];
  bool var[N];
  for (size_t k = 0; k < N; ++k) {
    p[k] = static_cast<const T*>(ins[k].data);
    var[k] = !ins[k].is_scalar && w.strides[k + 1][0] != 0;
    if constexpr (std::is_floating_point_v<C>)
      c[k] = var[k] ? 0 : static_cast<C>(load_d(ins[k], 0));
    else
      c[k] = var[k] ? 0 : (load_i(ins[k], 0) != 0 ? 1 : 0);
  }
  const auto at = [](const T* q, int64_t i) -> C {
    if constexpr (std::is_floating_point_v<C>)
      return static_cast<C>(q[i]);
    else
      return q[i] != 0 ? 1 : 0;
  };
  cpu::parallel_for(0, n, kElementwiseGrain, [&](int64_t lo, int64_t hi) {
    if constexpr (N == 1) {
      if (var[0]) {
        for (int64_t i = lo; i < hi; ++i) o[i] = f(at(p[0], i));
      } else {
        for (int64_t i = lo; i < hi; ++i) o[i] = f(c[0]);
      }
    } else {
      if (var[0] && var[1]) {
        for (int64_t i = lo; i < hi; ++i) o[i] = f(at(p[0], i), at(p[1], i));
      } else if (var[0]) {
        for (int64_t i = lo; i < hi; ++i) o[i] = f(at(p[0], i), c[1]);
      } else if (var[1]) {
        for (int64_t i = lo; i < hi; ++i) o[i] = f(c[0], at(p[1], i));
      } else {
        for (int64_t i = lo; i < hi; ++i) o[i] = f(c[0], c[1]);
      }
    }
  });
}

// predicate_dense writes Bool tensors, one byte per element, through bool*.
static_assert(sizeof(bool) == 1, "Bool tensors hold one byte per element");

template <typename F, size_t N>
void map_predicate(KernelRuntimeContext& ctx, const Operand (&args)[N], const Tensor& out, F f) {
  if (!prepare_elementwise(ctx, args, N, out)) return;
  Operand ins[N];
  bool all_int = true, all_f32 = true, all_bool = true;
  for (size_t k = 0; k < N; ++k) {
    ins[k] = args[k];
    all_int = all_int && operand_integral(ins[k]);
    all_f32 = all_f32 && (ins[k].is_scalar || ins[k].type == ScalarType::Float);
    all_bool = all_bool && (ins[k].is_scalar || ins[k].type == ScalarType::Bool);
  }
  // torch compares in the operands' promoted dtype. Tensors of one floating dtype against a
  // number: the number is rounded to that dtype (x == 0.1 holds where x holds half(0.1)).
  // Integer or Bool tensors against a floating number: both sides in float32, the default dtype.
  ScalarType common;
  bool ints_as_f32 = false;
  if (number_comparison_type(ins, N, &common)) {
    ints_as_f32 = is_integral(common, true);
    const ScalarType compute = ints_as_f32 ? ScalarType::Float : common;
    for (size_t k = 0; k < N; ++k)
      if (ins[k].is_scalar) ins[k].scalar_d = round_to(compute, ins[k].scalar_d);
  }
  const Walk w = plan_walk(out, ins, N);
  void* o = out.mutable_data_ptr();
  const ScalarType ot = out.scalar_type();
  if (all_int && !ET_SELECTED_COMPUTE_INT64) {
    dtype_not_selected(ctx, ot);
    return;
  }
  // The hot cases (attention masks: x == -inf, logical_not of a mask): same-shape row-major
  // Float or Bool tensors, scalars, into a Bool output; plain loops the compiler vectorizes.
  if (w.linear && w.ndim > 0 && ot == ScalarType::Bool) {
    bool* ob = static_cast<bool*>(o);
    if (all_f32 && !all_int) {
      // Every value is a float32 now, so comparing in float32 gives the double path's answers.
      predicate_dense<float, float>(w, ins, ob, out.numel(), f);
      return;
    }
    if (ET_SELECTED_COMPUTE_INT64 && all_bool && all_int) {
      predicate_dense<uint8_t, int64_t>(w, ins, ob, out.numel(), f);
      return;
    }
  }
  walk(w, [&](int64_t oo, const int64_t* io) {
    bool r;
    if (ET_SELECTED_COMPUTE_INT64 && all_int) {
      int64_t v[N];
      for (size_t k = 0; k < N; ++k) v[k] = load_i(ins[k], io[k]);
      if constexpr (N == 1)
        r = f(v[0]);
      else
        r = f(v[0], v[1]);
    } else {
      double v[N];
      for (size_t k = 0; k < N; ++k) {
        v[k] = load_d(ins[k], io[k]);
        if (ints_as_f32 && !ins[k].is_scalar) v[k] = round_to_float(v[k]);
      }
      if constexpr (N == 1)
        r = f(v[0]);
      else
        r = f(v[0], v[1]);
    }
    store_int(o, ot, oo, r ? 1 : 0);
  });
}

}  // namespace kernels
}  // namespace executorch
