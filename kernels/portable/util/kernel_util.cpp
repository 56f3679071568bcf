// Dtype conversions and shape helpers shared by the kernels.
#include "kernels/portable/util/kernel_util.h"

#include <cmath>
#include <limits>

#include "kernels/cpu/half.h"

namespace executorch {
namespace kernels {

bool is_supported_dtype(ScalarType t) {
  switch (t) {
    case ScalarType::Float:
    case ScalarType::Double:
    case ScalarType::Half:
    case ScalarType::BFloat16:
    case ScalarType::Long:
    case ScalarType::Int:
    case ScalarType::Short:
    case ScalarType::Char:
    case ScalarType::Byte:
    case ScalarType::Bool: return true;
    default: return false;
  }
}

bool is_floating(ScalarType t) { return t == ScalarType::Float || t == ScalarType::Double || is_half(t); }

bool is_integral(ScalarType t, bool include_bool) {
  switch (t) {
    case ScalarType::Long:
    case ScalarType::Int:
    case ScalarType::Short:
    case ScalarType::Char:
    case ScalarType::Byte: return true;
    case ScalarType::Bool: return include_bool;
    default: return false;
  }
}

double load_double(const void* data, ScalarType t, int64_t i) {
  switch (t) {
    case ScalarType::Float: return static_cast<const float*>(data)[i];
    case ScalarType::Double: return static_cast<const double*>(data)[i];
    case ScalarType::Half: return cpu::to_float(static_cast<const cpu::Half*>(data)[i]);
    case ScalarType::BFloat16: return cpu::to_float(static_cast<const cpu::BFloat16*>(data)[i]);
    case ScalarType::Long: return static_cast<double>(static_cast<const int64_t*>(data)[i]);
    case ScalarType::Int: return static_cast<const int32_t*>(data)[i];
    case ScalarType::Short: return static_cast<const int16_t*>(data)[i];
    case ScalarType::Char: return static_cast<const int8_t*>(data)[i];
    case ScalarType::Byte: return static_cast<const uint8_t*>(data)[i];
    case ScalarType::Bool: return load_bool(data, i) ? 1.0 : 0.0;
    default: return 0.0;
  }
}

int64_t load_int(const void* data, ScalarType t, int64_t i) {
  switch (t) {
    case ScalarType::Long: return static_cast<const int64_t*>(data)[i];
    case ScalarType::Int: return static_cast<const int32_t*>(data)[i];
    case ScalarType::Short: return static_cast<const int16_t*>(data)[i];
    case ScalarType::Char: return static_cast<const int8_t*>(data)[i];
    case ScalarType::Byte: return static_cast<const uint8_t*>(data)[i];
    case ScalarType::Bool: return load_bool(data, i) ? 1 : 0;
    default: {
      const double v = load_double(data, t, i);
      // Out-of-range float to int conversion is undefined in C++; saturate instead.
      if (!(v == v)) return 0;
      if (v >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
      if (v <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
      return static_cast<int64_t>(v);
    }
  }
}

namespace {

// Float to integer the way torch does it for in-range values, without UB for the rest.
template <typename I>
I double_to_int(double v) {
  if (!(v == v)) return 0;
  if (v >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  if (v <= static_cast<double>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  return static_cast<I>(v);
}

}  // namespace

void store_double(void* data, ScalarType t, int64_t i, double v) {
  switch (t) {
    case ScalarType::Float: static_cast<float*>(data)[i] = static_cast<float>(v); break;
    case ScalarType::Double: static_cast<double*>(data)[i] = v; break;
    // Through float, as torch narrows a double: the double-to-float step rounds first.
    case ScalarType::Half: static_cast<cpu::Half*>(data)[i] = cpu::to_half(static_cast<float>(v)); break;
    case ScalarType::BFloat16: static_cast<cpu::BFloat16*>(data)[i] = cpu::to_bfloat16(static_cast<float>(v)); break;
    // Narrow integers wrap like torch's casts: go through int64 first.
    case ScalarType::Long: static_cast<int64_t*>(data)[i] = double_to_int<int64_t>(v); break;
    case ScalarType::Int: static_cast<int32_t*>(data)[i] = static_cast<int32_t>(double_to_int<int64_t>(v)); break;
    case ScalarType::Short: static_cast<int16_t*>(data)[i] = static_cast<int16_t>(double_to_int<int64_t>(v)); break;
    case ScalarType::Char: static_cast<int8_t*>(data)[i] = static_cast<int8_t>(double_to_int<int64_t>(v)); break;
    case ScalarType::Byte: static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(double_to_int<int64_t>(v)); break;
    case ScalarType::Bool: static_cast<bool*>(data)[i] = v != 0.0; break;
    default: break;
  }
}

void store_int(void* data, ScalarType t, int64_t i, int64_t v) {
  switch (t) {
    case ScalarType::Float: static_cast<float*>(data)[i] = static_cast<float>(v); break;
    case ScalarType::Double: static_cast<double*>(data)[i] = static_cast<double>(v); break;
    case ScalarType::Half: static_cast<cpu::Half*>(data)[i] = cpu::to_half(static_cast<float>(v)); break;
    case ScalarType::BFloat16: static_cast<cpu::BFloat16*>(data)[i] = cpu::to_bfloat16(static_cast<float>(v)); break;
    case ScalarType::Long: static_cast<int64_t*>(data)[i] = v; break;
    case ScalarType::Int: static_cast<int32_t*>(data)[i] = static_cast<int32_t>(v); break;
    case ScalarType::Short: static_cast<int16_t*>(data)[i] = static_cast<int16_t>(v); break;
    case ScalarType::Char: static_cast<int8_t*>(data)[i] = static_cast<int8_t>(v); break;
    case ScalarType::Byte: static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(v); break;
    case ScalarType::Bool: static_cast<bool*>(data)[i] = v != 0; break;
    default: break;
  }
}

int64_t saturating_int(double v) {
  if (!(v == v)) return 0;
  if (v >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
  if (v <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

bool check(KernelRuntimeContext& ctx, bool ok, const char* what) {
  if (!ok) {
    ET_LOG(Error, "kernel argument check failed: %s", what);
    ctx.fail(Error::InvalidArgument);
  }
  return ok;
}

bool resize_out(KernelRuntimeContext& ctx, const Tensor& out, Span<const int64_t> sizes) {
  const Error e = out.resize(sizes);
  if (e != Error::Ok) {
    ET_LOG(Error, "output tensor cannot take the computed shape (rank %zu): %s", sizes.size(), runtime::error_name(e));
    ctx.fail(e);
    return false;
  }
  return true;
}

bool resize_out(KernelRuntimeContext& ctx, const Tensor& out, const Tensor& like) {
  int64_t sizes[kMaxDim];
  const size_t n = sizes_of(like, sizes);
  return resize_out(ctx, out, {sizes, n});
}

bool normalize_dim(int64_t dim, int64_t rank, int64_t* out) {
  const int64_t r = rank == 0 ? 1 : rank;
  if (dim < -r || dim >= r) return false;
  *out = dim < 0 ? dim + r : dim;
  return true;
}

size_t sizes_of(const Tensor& t, int64_t* out) {
  const size_t n = static_cast<size_t>(t.dim());
  for (size_t i = 0; i < n && i < kMaxDim; ++i) out[i] = t.sizes()[i];
  return n < kMaxDim ? n : kMaxDim;
}

bool same_shape(const Tensor& a, const Tensor& b) {
  if (a.dim() != b.dim()) return false;
  for (int64_t i = 0; i < a.dim(); ++i)
    if (a.size(i) != b.size(i)) return false;
  return true;
}

}  // namespace kernels
}  // namespace executorch
