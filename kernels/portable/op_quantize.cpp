// pt2e quantize/dequantize (quantized_decomposed::*): per tensor and per channel, affine int8/uint8/int16/int32.
// Arithmetic follows torch's reference formulas operation for operation (float32 multiply by the
// reciprocal, round half to even, add the zero point, clamp), so results match the converted
// pt2e module bit for bit when the inputs do.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vectorize.h"
#include "kernels/portable/load_passes.h"
#include "kernels/portable/util/kernel_util.h"

namespace executorch {
namespace kernels {
namespace {

bool quantized_dtype(ScalarType t) {
  return t == ScalarType::Byte || t == ScalarType::Char || t == ScalarType::Short || t == ScalarType::Int;
}

bool same_layout(const Tensor& a, const Tensor& b) {
  if (a.dim() != b.dim()) return false;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (a.dim_order()[d] != b.dim_order()[d]) return false;
  return true;
}

// The dtype argument (any int64 in a malformed program) as a ScalarType: one outside int8 would
// be narrowed to some other dtype, so it becomes -1, which names no dtype and prepare() refuses.
ScalarType qtype_arg(const EValue& v) {
  const int64_t t = v.toInt();
  return static_cast<ScalarType>(t >= INT8_MIN && t <= INT8_MAX ? t : -1);
}

// The values `t` holds; quant_min/max outside them would make the float clamps below overflow the cast.
bool range_fits(ScalarType t, int64_t qmin, int64_t qmax) {
  int64_t lo = INT32_MIN, hi = INT32_MAX;
  if (t == ScalarType::Byte) lo = 0, hi = 255;
  if (t == ScalarType::Char) lo = -128, hi = 127;
  if (t == ScalarType::Short) lo = -32768, hi = 32767;
  return lo <= qmin && qmin <= qmax && qmax <= hi;
}

// Checks shared by every op: dtypes, the range, and `out` resized to the input's shape and layout.
bool prepare(KernelRuntimeContext& ctx, const char* op, const Tensor& in, const Tensor& out, ScalarType qtype,
             int64_t qmin, int64_t qmax) {
  ET_KERNEL_CHECK_MSG(ctx, quantized_dtype(qtype) && range_fits(qtype, qmin, qmax), InvalidArgument, false,
                      "%s: dtype %s with range [%lld, %lld] is not an integer quantization within the dtype", op,
                      runtime::scalar_type_name(qtype), static_cast<long long>(qmin), static_cast<long long>(qmax));
  if (!resize_out(ctx, out, in)) return false;
  ET_KERNEL_CHECK_MSG(ctx, same_layout(in, out), InvalidArgument, false,
                      "%s: input and output must share one dim order", op);
  return true;
}

template <typename Q>
void quantize_loop(const float* in, Q* out, int64_t n, float inv_scale, float zp, int64_t qmin, int64_t qmax) {
  const float lo = static_cast<float>(qmin), hi = static_cast<float>(qmax);
  for (int64_t i = 0; i < n; ++i) {
    float v = std::nearbyint(in[i] * inv_scale) + zp;
    v = v < lo ? lo : (v > hi ? hi : v);
    // NaN maps to the low bound; int32's max rounds up to 2^31 as a float, so clamp again as an integer.
    const int64_t q = v == v ? static_cast<int64_t>(v) : qmin;
    out[i] = static_cast<Q>(q > qmax ? qmax : q);
  }
}

// The 8-bit forms (every activation of an int8 program), vectorized per ISA: the clamped value is
// within 8 bits, so it converts through int32 exactly, and each element's arithmetic is the same
// on every ISA (nothing there fuses), so are the bytes.
template <typename Q>
ET_ALWAYS_INLINE void quantize_loop_8bit(const float* in, Q* out, int64_t n, float inv_scale, float zp, float lo,
                                         float hi) {
  for (int64_t i = 0; i < n; ++i) {
    float v = std::nearbyint(in[i] * inv_scale) + zp;
    v = v < lo ? lo : (v > hi ? hi : v);
    out[i] = static_cast<Q>(static_cast<int32_t>(v == v ? v : lo));
  }
}
ET_MULTIVERSION void quantize_i8(const float* in, int8_t* out, int64_t n, float inv, float zp, float lo, float hi) {
  quantize_loop_8bit(in, out, n, inv, zp, lo, hi);
}
ET_MULTIVERSION void quantize_u8(const float* in, uint8_t* out, int64_t n, float inv, float zp, float lo, float hi) {
  quantize_loop_8bit(in, out, n, inv, zp, lo, hi);
}

// Elements per chunk of the thread pool's share-out (fixed, so results do not depend on threads).
constexpr int64_t kQuantGrain = 1 << 15;

template <typename Q>
void quantize_into(const float* in, Q* out, int64_t n, float inv_scale, float zp, int64_t qmin, int64_t qmax) {
  const float lo = static_cast<float>(qmin), hi = static_cast<float>(qmax);
  cpu::parallel_for(0, n, kQuantGrain, [&](int64_t b, int64_t e) {
    if constexpr (std::is_same_v<Q, int8_t>)
      quantize_i8(in + b, out + b, e - b, inv_scale, zp, lo, hi);
    else if constexpr (std::is_same_v<Q, uint8_t>)
      quantize_u8(in + b, out + b, e - b, inv_scale, zp, lo, hi);
    else
      quantize_loop(in + b, out + b, e - b, inv_scale, zp, qmin, qmax);
  });
}

void quantize_tensor(KernelRuntimeContext& ctx, const Tensor& in, double scale, int64_t zp, int64_t qmin, int64_t qmax,
                     ScalarType qtype, const Tensor& out) {
  if (!prepare(ctx, "quantize_per_tensor", in, out, qtype, qmin, qmax)) return;
  ET_KERNEL_CHECK_MSG(ctx, in.scalar_type() == ScalarType::Float && out.scalar_type() == qtype, InvalidType, ,
                      "quantize_per_tensor: takes float32 to the dtype argument, got %s -> %s",
                      runtime::scalar_type_name(in.scalar_type()), runtime::scalar_type_name(out.scalar_type()));
  const float inv = static_cast<float>(1.0 / scale), z = static_cast<float>(zp);
  const int64_t lo = qmin, hi = qmax;
  const float* x = in.const_data_ptr<float>();
  const int64_t n = in.numel();
  switch (qtype) {
    case ScalarType::Byte: quantize_into(x, static_cast<uint8_t*>(out.mutable_data_ptr()), n, inv, z, lo, hi); break;
    case ScalarType::Char: quantize_into(x, static_cast<int8_t*>(out.mutable_data_ptr()), n, inv, z, lo, hi); break;
    case ScalarType::Short: quantize_into(x, static_cast<int16_t*>(out.mutable_data_ptr()), n, inv, z, lo, hi); break;
    default: quantize_into(x, static_cast<int32_t*>(out.mutable_data_ptr()), n, inv, z, lo, hi); break;
  }
}

template <typename Q>
ET_ALWAYS_INLINE void dequantize_loop(const Q* in, float* out, int64_t n, float scale, float zp) {
  for (int64_t i = 0; i < n; ++i) out[i] = (static_cast<float>(in[i]) - zp) * scale;
}
ET_MULTIVERSION void dequantize_i8(const int8_t* in, float* out, int64_t n, float scale, float zp) {
  dequantize_loop(in, out, n, scale, zp);
}
ET_MULTIVERSION void dequantize_u8(const uint8_t* in, float* out, int64_t n, float scale, float zp) {
  dequantize_loop(in, out, n, scale, zp);
}

template <typename Q>
void dequantize_into(const Q* in, float* out, int64_t n, float scale, float zp) {
  cpu::parallel_for(0, n, kQuantGrain, [&](int64_t b, int64_t e) {
    if constexpr (std::is_same_v<Q, int8_t>)
      dequantize_i8(in + b, out + b, e - b, scale, zp);
    else if constexpr (std::is_same_v<Q, uint8_t>)
      dequantize_u8(in + b, out + b, e - b, scale, zp);
    else
      dequantize_loop(in + b, out + b, e - b, scale, zp);
  });
}

bool dequant_types_ok(KernelRuntimeContext& ctx, const char* op, const Tensor& in, ScalarType qtype,
                      const EValue& out_dtype, const Tensor& out) {
  const bool float_out = out.scalar_type() == ScalarType::Float &&
                         (out_dtype.isNone() || out_dtype.toInt() == static_cast<int64_t>(ScalarType::Float));
  ET_KERNEL_CHECK_MSG(ctx, in.scalar_type() == qtype && float_out, InvalidType, false,
                      "%s: takes the dtype argument to float32, got %s -> %s", op,
                      runtime::scalar_type_name(in.scalar_type()), runtime::scalar_type_name(out.scalar_type()));
  return true;
}

void dequantize_tensor(KernelRuntimeContext& ctx, const Tensor& in, double scale, int64_t zp, int64_t qmin,
                       int64_t qmax, ScalarType qtype, const EValue& out_dtype, const Tensor& out) {
  if (!prepare(ctx, "dequantize_per_tensor", in, out, qtype, qmin, qmax)) return;
  if (!dequant_types_ok(ctx, "dequantize_per_tensor", in, qtype, out_dtype, out)) return;
  const float s = static_cast<float>(scale), z = static_cast<float>(zp);
  float* y = out.mutable_data_ptr<float>();
  const int64_t n = in.numel();
  switch (qtype) {
    case ScalarType::Byte: dequantize_into(in.const_data_ptr<uint8_t>(), y, n, s, z); break;
    case ScalarType::Char: dequantize_into(in.const_data_ptr<int8_t>(), y, n, s, z); break;
    case ScalarType::Short: dequantize_into(in.const_data_ptr<int16_t>(), y, n, s, z); break;
    default: dequantize_into(in.const_data_ptr<int32_t>(), y, n, s, z); break;
  }
}

// A one-element float tensor's value, or false after failing `ctx`.
bool scalar_of(KernelRuntimeContext& ctx, const char* op, const Tensor& t, double* v) {
  ET_KERNEL_CHECK_MSG(ctx, t.numel() == 1 && (is_floating(t.scalar_type()) || is_integral(t.scalar_type(), false)),
                      InvalidArgument, false, "%s: scale and zero point must be one-element numeric tensors", op);
  *v = load_double(t.const_data_ptr(), t.scalar_type(), 0);
  return true;
}

// Per-channel: the channel of the element at memory offset i is (i / stride[axis]) % size[axis]
// for any dense layout, so one pass in memory order serves contiguous and channels-last tensors.
struct Channels {
  int64_t stride = 1, count = 1;
  int64_t of(int64_t i) const { return (i / stride) % count; }
};

bool channels_of(KernelRuntimeContext& ctx, const char* op, const Tensor& in, int64_t axis, const Tensor& scales,
                 const Tensor* zps, Channels* ch) {
  int64_t a = 0;
  ET_KERNEL_CHECK_MSG(ctx, in.dim() > 0 && normalize_dim(axis, in.dim(), &a), InvalidArgument, false,
                      "%s: axis %lld is out of range for a %lld-dim input", op, static_cast<long long>(axis),
                      static_cast<long long>(in.dim()));
  ch->stride = in.stride(a) > 0 ? in.stride(a) : 1;
  ch->count = in.size(a);
  ET_KERNEL_CHECK_MSG(ctx, scales.numel() == ch->count && is_floating(scales.scalar_type()), InvalidArgument, false,
                      "%s: %lld float scales for %lld channels", op, static_cast<long long>(scales.numel()),
                      static_cast<long long>(ch->count));
  ET_KERNEL_CHECK_MSG(ctx, zps == nullptr || (zps->numel() == ch->count && is_integral(zps->scalar_type(), false)),
                      InvalidArgument, false, "%s: zero points must be integers, one per channel", op);
  return true;
}

// scales in their own dtype (float32 or float64), as torch's reference broadcasts them.
template <typename S>
void quantize_channels(KernelRuntimeContext& ctx, const Tensor& in, const Tensor& scales, const Tensor& zps,
                       const Channels& ch, int64_t qmin, int64_t qmax, const Tensor& out) {
  const float* x = in.const_data_ptr<float>();
  const S* s = scales.const_data_ptr<S>();
  for (int64_t i = 0; i < in.numel(); ++i) {
    const int64_t c = ch.of(i);
    const S inv = static_cast<S>(1) / s[c];
    S v = std::nearbyint(static_cast<S>(x[i]) * inv) +
          static_cast<S>(load_int(zps.const_data_ptr(), zps.scalar_type(), c));
    v = v < qmin ? static_cast<S>(qmin) : (v > qmax ? static_cast<S>(qmax) : v);
    const int64_t q = v == v ? static_cast<int64_t>(v) : qmin;  // |v| <= 2^31: prepare bounded the range
    store_int(out.mutable_data_ptr(), out.scalar_type(), i, q > qmax ? qmax : q);
  }
  (void)ctx;
}

// quantize_per_channel.out(input, scales, zero_points, int axis, int quant_min, int quant_max, ScalarType dtype, *, out)
void quantize_per_channel_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(
      ctx, args_ok(args, {Tag::Tensor, Tag::Tensor, Tag::Tensor, Tag::Int, Tag::Int, Tag::Int, Tag::Int, Tag::Tensor}),
      InvalidArgument);
  const Tensor &in = args[0]->toTensor(), &scales = args[1]->toTensor(), &zps = args[2]->toTensor();
  const Tensor& out = args[7]->toTensor();
  const auto qtype = qtype_arg(*args[6]);
  const int64_t qmin = args[4]->toInt(), qmax = args[5]->toInt();
  if (!prepare(ctx, "quantize_per_channel", in, out, qtype, qmin, qmax)) return;
  ET_KERNEL_CHECK_MSG(ctx, in.scalar_type() == ScalarType::Float && out.scalar_type() == qtype, InvalidType, ,
                      "quantize_per_channel: takes float32 to the dtype argument");
  Channels ch;
  if (!channels_of(ctx, "quantize_per_channel", in, args[3]->toInt(), scales, &zps, &ch)) return;
  if (scales.scalar_type() == ScalarType::Double)
    quantize_channels<double>(ctx, in, scales, zps, ch, qmin, qmax, out);
  else
    quantize_channels<float>(ctx, in, scales, zps, ch, qmin, qmax, out);
}

// One channel's run of 8-bit values: (q - z) * s in S, as dequantize_channels() computes each.
// With |z| <= 2^23 the difference is exact in S (float or double), so it is taken there, where
// the loop vectorizes.
template <typename Q, typename S>
void dequantize_run(const Q* q, float* y, int64_t n, int64_t z, S s) {
  if (z >= -(int64_t{1} << 23) && z <= (int64_t{1} << 23)) {
    const S zs = static_cast<S>(z);
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>((static_cast<S>(q[i]) - zs) * s);
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    y[i] = static_cast<float>(static_cast<S>(static_cast<int64_t>(static_cast<uint64_t>(static_cast<int64_t>(q[i])) -
                                                                  static_cast<uint64_t>(z))) *
                              s);
}

template <typename S>
void dequantize_channels(const Tensor& in, const Tensor& scales, const Tensor* zps, const Channels& ch,
                         const Tensor& out) {
  const S* s = scales.const_data_ptr<S>();
  float* y = out.mutable_data_ptr<float>();
  if (in.scalar_type() == ScalarType::Char || in.scalar_type() == ScalarType::Byte) {
    // 8-bit weights (an int8 program's, dequantized at load): runs of `stride` elements share a
    // channel, so its scale and zero point are read once per run; the same arithmetic as below.
    const bool is_signed = in.scalar_type() == ScalarType::Char;
    const int64_t n = in.numel();
    for (int64_t start = 0, run = 0; start < n; start += ch.stride, ++run) {
      const int64_t c = run % ch.count, end = start + ch.stride < n ? start + ch.stride : n;
      const int64_t z = zps ? load_int(zps->const_data_ptr(), zps->scalar_type(), c) : 0;
      const S sc = s[c];
      if (is_signed)
        dequantize_run(in.const_data_ptr<int8_t>() + start, y + start, end - start, z, sc);
      else
        dequantize_run(in.const_data_ptr<uint8_t>() + start, y + start, end - start, z, sc);
    }
    return;
  }
  for (int64_t i = 0; i < in.numel(); ++i) {
    const int64_t c = ch.of(i);
    const int64_t q = load_int(in.const_data_ptr(), in.scalar_type(), i);
    const int64_t z = zps ? load_int(zps->const_data_ptr(), zps->scalar_type(), c) : 0;
    // Zero points are file data: the difference wraps rather than overflow (in range it is exact).
    const int64_t d = static_cast<int64_t>(static_cast<uint64_t>(q) - static_cast<uint64_t>(z));
    y[i] = static_cast<float>(static_cast<S>(d) * s[c]);
  }
}

// dequantize_per_channel.out(input, scales, zero_points?, int axis, int quant_min, int quant_max, ScalarType dtype, *,
//                            out_dtype, out)
void dequantize_per_channel_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx,
                  args_ok(args, {Tag::Tensor, Tag::Tensor, Tag::None, Tag::Int, Tag::Int, Tag::Int, Tag::Int, Tag::None,
                                 Tag::Tensor}),
                  InvalidArgument);
  ET_KERNEL_CHECK(ctx, args[2]->isNone() || args[2]->isTensor(), InvalidArgument);
  const Tensor &in = args[0]->toTensor(), &scales = args[1]->toTensor(), &out = args[8]->toTensor();
  const Tensor zp_tensor = args[2]->isTensor() ? args[2]->toTensor() : Tensor(nullptr);
  const Tensor* zps = args[2]->isTensor() ? &zp_tensor : nullptr;
  const auto qtype = qtype_arg(*args[6]);
  if (!prepare(ctx, "dequantize_per_channel", in, out, qtype, args[4]->toInt(), args[5]->toInt())) return;
  if (!dequant_types_ok(ctx, "dequantize_per_channel", in, qtype, *args[7], out)) return;
  Channels ch;
  if (!channels_of(ctx, "dequantize_per_channel", in, args[3]->toInt(), scales, zps, &ch)) return;
  if (scales.scalar_type() == ScalarType::Double)
    dequantize_channels<double>(in, scales, zps, ch, out);
  else
    dequantize_channels<float>(in, scales, zps, ch, out);
}

// quantize_per_tensor.out(input, float scale, int zero_point, int quant_min, int quant_max, ScalarType dtype, *, out)
void quantize_per_tensor_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx, args_ok(args, {Tag::Tensor, Tag::Double, Tag::Int, Tag::Int, Tag::Int, Tag::Int, Tag::Tensor}),
                  InvalidArgument);
  quantize_tensor(ctx, args[0]->toTensor(), args[1]->toDouble(), args[2]->toInt(), args[3]->toInt(), args[4]->toInt(),
                  qtype_arg(*args[5]), args[6]->toTensor());
}
// quantize_per_tensor.Tensor_out: scale and zero point as one-element tensors.
void quantize_per_tensor_tensor_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx,
                  args_ok(args, {Tag::Tensor, Tag::Tensor, Tag::Tensor, Tag::Int, Tag::Int, Tag::Int, Tag::Tensor}),
                  InvalidArgument);
  double scale = 0, zp = 0;
  if (!scalar_of(ctx, "quantize_per_tensor", args[1]->toTensor(), &scale) ||
      !scalar_of(ctx, "quantize_per_tensor", args[2]->toTensor(), &zp))
    return;
  quantize_tensor(ctx, args[0]->toTensor(), scale, saturating_int(zp), args[3]->toInt(), args[4]->toInt(),
                  qtype_arg(*args[5]), args[6]->toTensor());
}
// dequantize_per_tensor.out(input, float scale, int zero_point, int quant_min, int quant_max, ScalarType dtype, *, out_dtype, out)
void dequantize_per_tensor_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(
      ctx, args_ok(args, {Tag::Tensor, Tag::Double, Tag::Int, Tag::Int, Tag::Int, Tag::Int, Tag::None, Tag::Tensor}),
      InvalidArgument);
  dequantize_tensor(ctx, args[0]->toTensor(), args[1]->toDouble(), args[2]->toInt(), args[3]->toInt(), args[4]->toInt(),
                    qtype_arg(*args[5]), *args[6], args[7]->toTensor());
}
void dequantize_per_tensor_tensor_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(
      ctx, args_ok(args, {Tag::Tensor, Tag::Tensor, Tag::Tensor, Tag::Int, Tag::Int, Tag::Int, Tag::None, Tag::Tensor}),
      InvalidArgument);
  double scale = 0, zp = 0;
  if (!scalar_of(ctx, "dequantize_per_tensor", args[1]->toTensor(), &scale) ||
      !scalar_of(ctx, "dequantize_per_tensor", args[2]->toTensor(), &zp))
    return;
  dequantize_tensor(ctx, args[0]->toTensor(), scale, saturating_int(zp), args[3]->toInt(), args[4]->toInt(),
                    qtype_arg(*args[5]), *args[6], args[7]->toTensor());
}

// choose_qparams.Tensor_out(input, int quant_min, int quant_max, float eps, ScalarType dtype, *, scale_out,
//                           zero_point_out): a dynamic quantization's parameters, as torch's reference computes
// them in float32: the input's range widened to hold 0 (NaNs skipped), over (quant_max - quant_min), at
// least eps; the zero point quant_min - round(low end / scale), clamped.
void choose_qparams_tensor_out(KernelRuntimeContext& ctx, Args args) {
  ET_KERNEL_CHECK(ctx,
                  args_ok(args, {Tag::Tensor, Tag::Int, Tag::Int, Tag::Double, Tag::Int, Tag::Tensor, Tag::Tensor}),
                  InvalidArgument);
  const Tensor &in = args[0]->toTensor(), &scale_out = args[5]->toTensor(), &zp_out = args[6]->toTensor();
  const int64_t qmin = args[1]->toInt(), qmax = args[2]->toInt();
  const ScalarType qtype = qtype_arg(*args[4]);
  ET_KERNEL_CHECK_MSG(ctx, quantized_dtype(qtype) && range_fits(qtype, qmin, qmax) && qmin < qmax, InvalidArgument, ,
                      "choose_qparams: dtype %s with range [%lld, %lld] is not an integer quantization within the "
                      "dtype",
                      runtime::scalar_type_name(qtype), static_cast<long long>(qmin), static_cast<long long>(qmax));
  ET_KERNEL_CHECK_MSG(ctx, in.scalar_type() == ScalarType::Float && in.numel() > 0, InvalidType, ,
                      "choose_qparams: takes a non-empty float32 tensor, got %s of %lld elements",
                      runtime::scalar_type_name(in.scalar_type()), static_cast<long long>(in.numel()));
  ET_KERNEL_CHECK_MSG(ctx,
                      is_floating(scale_out.scalar_type()) && !is_half(scale_out.scalar_type()) &&
                          is_integral(zp_out.scalar_type(), false),
                      InvalidType, ,
                      "choose_qparams: scale_out must be float32/float64 and zero_point_out an integer tensor");
  const int64_t one[1] = {1};
  if (!resize_out(ctx, scale_out, {one, 1}) || !resize_out(ctx, zp_out, {one, 1})) return;
  const float* x = in.const_data_ptr<float>();
  float lo = 0.0f, hi = 0.0f;
  for (int64_t i = 0; i < in.numel(); ++i) {
    lo = x[i] < lo ? x[i] : lo;
    hi = x[i] > hi ? x[i] : hi;
  }
  float scale = (hi - lo) / static_cast<float>(qmax - qmin);
  const float eps = static_cast<float>(args[3]->toDouble());
  scale = scale < eps ? eps : scale;
  // lo / scale is finite and at most 0 here (scale > 0 unless eps <= 0, when 0 / 0 is NaN: zero point qmin).
  const float r = std::nearbyint(lo / scale);
  const int64_t zp = qmin - (r == r && r > -2147483648.0f ? static_cast<int64_t>(r) : 0);
  store_double(scale_out.mutable_data_ptr(), scale_out.scalar_type(), 0, scale);
  store_int(zp_out.mutable_data_ptr(), zp_out.scalar_type(), 0, zp < qmin ? qmin : (zp > qmax ? qmax : zp));
}

// Quantized embeddings: rows of a table of `bits`-bit integers, `8 / bits` to a byte (offset by 2^(bits-1):
// the first value in the high nibble for 4 bits, the low bits for 2; int8 or uint8 as is for 8), each row's
// columns split into groups with one scale (and optional zero point) per row and group; the rows `indices`
// name are dequantized into `out` [*indices.shape, cols].
struct EmbeddingTable {
  const uint8_t* data;
  int64_t rows, cols, row_bytes, groups;
  int bits;
  bool is_signed;  // an 8-bit table of int8 (uint8 otherwise)

  int64_t value(int64_t row, int64_t col) const {
    const uint8_t* r = data + row * row_bytes;
    if (bits == 8) return is_signed ? static_cast<int8_t>(r[col]) : r[col];
    const int per_byte = 8 / bits;
    const int slot = static_cast<int>(col % per_byte);
    const int shift = bits == 4 ? (slot == 0 ? 4 : 0) : 2 * slot;
    return static_cast<int64_t>((r[col / per_byte] >> shift) & ((1 << bits) - 1)) - (int64_t{1} << (bits - 1));
  }
};

void quantized_embedding(KernelRuntimeContext& ctx, const char* op, int bits, Args args, const EValue* dtype,
                         const Tensor& out) {
  const Tensor &weight = args[0]->toTensor(), &scales = args[1]->toTensor(), &indices = args[5]->toTensor();
  const Tensor zp_tensor = args[2]->isTensor() ? args[2]->toTensor() : Tensor(nullptr);
  const bool has_zp = args[2]->isTensor();
  const bool is_signed = weight.scalar_type() == ScalarType::Char;
  ET_KERNEL_CHECK_MSG(ctx,
                      weight.dim() == 2 && weight.is_contiguous() &&
                          (weight.scalar_type() == ScalarType::Byte || (bits == 8 && is_signed)),
                      InvalidArgument, , "%s: the table must be a contiguous 2-D uint8 tensor (int8 too for 8 bits)",
                      op);
  const int64_t rows = weight.size(0), cols = weight.size(1) * (8 / bits);
  ET_KERNEL_CHECK_MSG(ctx,
                      is_floating(scales.scalar_type()) && scales.is_contiguous() &&
                          (scales.dim() == 1 || scales.dim() == 2) && scales.size(0) == rows,
                      InvalidArgument, , "%s: scales must be float, [rows] or [rows, groups]", op);
  const int64_t groups = scales.dim() == 2 ? scales.size(1) : 1;
  ET_KERNEL_CHECK_MSG(ctx, groups > 0 && cols % groups == 0, InvalidArgument, ,
                      "%s: %lld groups do not divide the %lld columns", op, static_cast<long long>(groups),
                      static_cast<long long>(cols));
  ET_KERNEL_CHECK_MSG(
      ctx,
      !has_zp || (zp_tensor.numel() == scales.numel() && zp_tensor.is_contiguous() &&
                  (is_floating(zp_tensor.scalar_type()) || is_integral(zp_tensor.scalar_type(), false))),
      InvalidArgument, , "%s: zero points must match the scales in count", op);
  const int64_t qmin = args[3]->toInt(), qmax = args[4]->toInt();
  const int64_t lo = bits == 8 ? (is_signed ? -128 : 0) : -(int64_t{1} << (bits - 1)), hi = lo + (1 << bits) - 1;
  ET_KERNEL_CHECK_MSG(ctx, qmin >= lo && qmax <= hi && qmin <= qmax, InvalidArgument, ,
                      "%s: quant range [%lld, %lld] does not fit %d-bit values", op, static_cast<long long>(qmin),
                      static_cast<long long>(qmax), bits);
  ET_KERNEL_CHECK_MSG(ctx, index_dtype(indices) && indices.is_contiguous(), InvalidArgument, ,
                      "%s: indices must be a contiguous int32 or int64 tensor", op);
  const ScalarType out_type =
      dtype != nullptr && !dtype->isNone() ? static_cast<ScalarType>(dtype->toInt()) : scales.scalar_type();
  ET_KERNEL_CHECK_MSG(ctx, out.scalar_type() == out_type && is_floating(out_type), InvalidType, ,
                      "%s: out must be the requested float dtype", op);
  int64_t sizes[kMaxDim];
  const size_t rank = sizes_of(indices, sizes);
  ET_KERNEL_CHECK_MSG(ctx, rank < kMaxDim, InvalidArgument, , "%s: indices have too many dims", op);
  sizes[rank] = cols;
  if (!resize_out(ctx, out, Span<const int64_t>(sizes, rank + 1))) return;
  const EmbeddingTable table{weight.const_data_ptr<uint8_t>(), rows, cols, weight.size(1), groups, bits, is_signed};
  const int64_t group_size = cols / groups;
  void* y = out.mutable_data_ptr();
  for (int64_t i = 0; i < indices.numel(); ++i) {
    const int64_t row = load_int(indices.const_data_ptr(), indices.scalar_type(), i);
    ET_KERNEL_CHECK_MSG(ctx, row >= 0 && row < rows, InvalidArgument, , "%s: index %lld is outside the %lld rows", op,
                        static_cast<long long>(row), static_cast<long long>(rows));
    for (int64_t g = 0; g < groups; ++g) {
      const double scale = load_double(scales.const_data_ptr(), scales.scalar_type(), row * groups + g);
      const double zp =
          has_zp ? load_double(zp_tensor.const_data_ptr(), zp_tensor.scalar_type(), row * groups + g) : 0.0;
      for (int64_t c = g * group_size; c < (g + 1) * group_size; ++c)
        store_double(y, out_type, i * cols + c, (static_cast<double>(table.value(row, c)) - zp) * scale);
    }
  }
}

template <int Bits>
void embedding_out(KernelRuntimeContext& ctx, Args args) {
  // embedding_Nbit.out(weight, weight_scales, weight_zero_points?, int quant_min, int quant_max, indices, *, out)
  ET_KERNEL_CHECK(ctx,
                  args_count_ok(args, 7) && args[0]->isTensor() && args[1]->isTensor() &&
                      (args[2]->isNone() || args[2]->isTensor()) && args[3]->isInt() && args[4]->isInt() &&
                      args[5]->isTensor() && args[6]->isTensor(),
                  InvalidArgument);
  quantized_embedding(ctx, Bits == 8 ? "embedding_byte" : (Bits == 4 ? "embedding_4bit" : "embedding_2bit"), Bits, args,
                      nullptr, args[6]->toTensor());
}

template <int Bits>
void embedding_dtype_out(KernelRuntimeContext& ctx, Args args) {
  // embedding_Nbit.dtype_out(..., indices, *, ScalarType? dtype, out)
  ET_KERNEL_CHECK(ctx,
                  args_count_ok(args, 8) && args[0]->isTensor() && args[1]->isTensor() &&
                      (args[2]->isNone() || args[2]->isTensor()) && args[3]->isInt() && args[4]->isInt() &&
                      args[5]->isTensor() && (args[6]->isNone() || args[6]->isInt()) && args[7]->isTensor(),
                  InvalidArgument);
  quantized_embedding(ctx, Bits == 8 ? "embedding_byte" : (Bits == 4 ? "embedding_4bit" : "embedding_2bit"), Bits, args,
                      args[6], args[7]->toTensor());
}

}  // namespace

int32_t quantize_8bit_value(float x, double scale, int64_t zero_point, int64_t quant_min, int64_t quant_max) {
  int8_t out = 0;
  quantize_loop_8bit(&x, &out, 1, static_cast<float>(1.0 / scale), static_cast<float>(zero_point),
                     static_cast<float>(quant_min), static_cast<float>(quant_max));
  return out;
}

// Load pass: a dequantize of constants (an int8 weight, its scales and zero points) runs once at
// load into memory the method owns, and its instruction is dropped; the float weight then counts
// as a constant for later passes (a linear weight's transpose is read in place). Skipped when
// the dequantized tensor may be written by another instruction or the method allocator is full.
size_t dequantize_constants_once(runtime::MethodRewriter& m) {
  constexpr size_t kMaxUses = 8;
  size_t done = 0;
  for (size_t pc = 0; pc < m.num_steps(); ++pc) {
    const runtime::OpFunction op = m.kernel(pc);
    if (op != dequantize_per_channel_out && op != dequantize_per_tensor_out && op != dequantize_per_tensor_tensor_out)
      continue;
    const Args args = m.args(pc);
    if (args.size() < 3 || args[args.size() - 1] != args[args.size() - 2] || !args[args.size() - 1]->isTensor())
      continue;
    const EValue* out = args[args.size() - 1];
    bool ok = true;
    for (size_t i = 0; i + 2 < args.size(); ++i) ok = ok && (args[i]->isNone() || m.is_constant(args[i]));
    size_t pcs[kMaxUses];
    const size_t n = ok ? m.uses(out, pcs, kMaxUses) : 0;
    ok = ok && n <= kMaxUses;
    for (size_t u = 0; ok && u < n; ++u) {
      const Args reader = m.args(pcs[u]);
      ok = pcs[u] == pc || (m.kernel(pcs[u]) != nullptr && reader[reader.size() - 1] != out);
    }
    ok = ok && !m.aliased(out);  // a view of its planned memory would read it there
    runtime::TensorImpl* t = out->toTensor().unsafeGetTensorImpl();
    void* data = ok ? m.allocate(t->nbytes() == 0 ? 1 : t->nbytes(), 64) : nullptr;
    if (data == nullptr) continue;
    void* planned = t->data();
    const size_t capacity = t->capacity_bytes();
    t->set_data(data);
    t->set_capacity_bytes(t->nbytes());
    KernelRuntimeContext ctx;
    op(ctx, args);
    if (ctx.failure_state() != Error::Ok) {  // it fails again at run time, where it is reported
      t->set_data(planned);
      t->set_capacity_bytes(capacity);
      continue;
    }
    m.make_constant(out, data, t->nbytes());
    m.remove(pc);
    ++done;
  }
  return done;
}

// Registrations are generated from kernels/portable/functions.yaml (only the selected kernels).
#include "portable_registrations/op_quantize.inc"

}  // namespace kernels
}  // namespace executorch
