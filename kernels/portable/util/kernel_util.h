// Shared kernel plumbing: the runtime types by short names, dtype loads/stores, shape checks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "runtime/core/evalue.h"
#include "runtime/core/kernel_runtime_context.h"
#include "runtime/core/operator_registry.h"
#include "runtime/core/span.h"
#include "runtime/core/tensor.h"

namespace executorch {
namespace kernels {

using runtime::Error;
using runtime::EValue;
using runtime::KernelRuntimeContext;
using runtime::ScalarType;
using runtime::Span;
using runtime::Tag;
using runtime::Tensor;
using Args = runtime::Span<runtime::EValue*>;

constexpr size_t kMaxDim = runtime::kTensorDimensionLimit;

// True when `args` starts with arguments tagged `tags` (Tag::None: any; Tag::ListScalar: any
// scalar). Programs list the schema's arguments, then the out arguments, then the returned
// values again (one tensor, or a list of them); kernels read by position and ignore the last.
inline bool args_ok(Args args, std::initializer_list<Tag> tags) {
  if (args.size() != tags.size() && args.size() != tags.size() + 1) return false;
  return runtime::args_match({args.data(), tags.size()}, tags);
}

// True when `args` holds `n` arguments (plus the optional trailing returns), none null.
inline bool args_count_ok(Args args, size_t n) {
  if (args.size() != n && args.size() != n + 1) return false;
  for (size_t i = 0; i < n; ++i)
    if (args[i] == nullptr) return false;
  return true;
}

// dtypes the portable kernels compute with (quantized and 8-bit float types are refused).
bool is_supported_dtype(ScalarType t);
bool is_floating(ScalarType t);  // Float, Double, Half or BFloat16
// The 16-bit float storage types: stored as bits, computed in float32.
inline bool is_half(ScalarType t) { return t == ScalarType::Half || t == ScalarType::BFloat16; }
bool is_integral(ScalarType t, bool include_bool);

// Bool element `i`, read as its byte: a bool tensor's memory can hold any byte (file data, a
// buffer another tensor aliases), and loading a byte other than 0/1 as C++ bool is undefined.
inline bool load_bool(const void* data, int64_t i) { return static_cast<const uint8_t*>(data)[i] != 0; }

// Element `i` of a buffer of dtype `t`, converted; callers check is_supported_dtype first.
double load_double(const void* data, ScalarType t, int64_t i);
int64_t load_int(const void* data, ScalarType t, int64_t i);
// Stores `v` converted to `t` (bool: nonzero -> true; ints truncate toward zero as C++ casts do).
void store_double(void* data, ScalarType t, int64_t i, double v);
void store_int(void* data, ScalarType t, int64_t i, int64_t v);

// A double as int64 the way a C cast does for in-range values; NaN is 0 and out-of-range
// values saturate (the plain cast is undefined behaviour for them).
int64_t saturating_int(double v);

// A Scalar argument (Int, Bool or Double) as int64, without undefined behaviour.
inline int64_t scalar_int(const EValue& v) { return v.isDouble() ? saturating_int(v.toDouble()) : v.toScalarInt(); }

// Overflow-checked int64 arithmetic, for anything computed from a program's integers (sizes,
// int lists, Int scalars, indices): true when the result does not fit (then *out is the wrapped
// value and the kernel must refuse the call). Output shapes are bounded later by resize_out.
inline bool add_overflows(int64_t a, int64_t b, int64_t* out) { return __builtin_add_overflow(a, b, out); }
inline bool sub_overflows(int64_t a, int64_t b, int64_t* out) { return __builtin_sub_overflow(a, b, out); }
inline bool mul_overflows(int64_t a, int64_t b, int64_t* out) { return __builtin_mul_overflow(a, b, out); }

// Resizes `out` to `sizes`; on failure records the error in `ctx` and returns false.
bool resize_out(KernelRuntimeContext& ctx, const Tensor& out, Span<const int64_t> sizes);
bool resize_out(KernelRuntimeContext& ctx, const Tensor& out, const Tensor& like);

// `dim` in [-rank, rank) (a 0-d tensor accepts -1 and 0) mapped to [0, rank); false if outside.
bool normalize_dim(int64_t dim, int64_t rank, int64_t* out);

// True when `t` holds indices: int64 or int32.
inline bool index_dtype(const Tensor& t) {
  return t.scalar_type() == ScalarType::Long || t.scalar_type() == ScalarType::Int;
}

// Index `raw` into a dim of `size` (negative counts from the end) into `out`; false when out of range.
inline bool wrap_index(int64_t raw, int64_t size, int64_t* out) {
  const int64_t i = raw < 0 ? raw + size : raw;
  if (i < 0 || i >= size) return false;
  *out = i;
  return true;
}

// Sizes of `t` as int64 into `out` (kMaxDim entries); returns the rank.
size_t sizes_of(const Tensor& t, int64_t* out);

// True when the tensor's elements sit in row-major order of its logical indices.
inline bool is_row_major(const Tensor& t) { return t.is_contiguous(); }

// True when a and b have the same rank and sizes.
bool same_shape(const Tensor& a, const Tensor& b);

// Fails `ctx` with InvalidArgument and logs `what` when `ok` is false; returns `ok`.
bool check(KernelRuntimeContext& ctx, bool ok, const char* what);

}  // namespace kernels
}  // namespace executorch
