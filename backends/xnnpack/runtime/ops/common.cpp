// What the operator families share: output shapes and their checks, window geometry, the GEMM
// glue (bias, fused clamp) and (de)quantization.
#include <cinttypes>
#include <cmath>
#include <cstring>

#include "backends/xnnpack/runtime/ops/ops.h"
#include "kernels/cpu/gemv.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/quantized.h"
#include "kernels/cpu/vectorize.h"

namespace executorch {
namespace backends {
namespace xnnpack {

using kernels::cpu::ConstMatrix;
using kernels::cpu::parallel_for;

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "fp32";
    case DType::kQS8: return "qint8";
    case DType::kQU8: return "quint8";
    case DType::kQD8: return "qdint8";
    case DType::kI32: return "int32";
  }
  return "unknown";
}

bool is_quantized(DType t) { return t == DType::kQS8 || t == DType::kQU8 || t == DType::kQD8; }

int8_t qbound(float x, const Value& v, bool upper) {
  if (!std::isfinite(x)) return upper ? 127 : -128;
  const float q = std::nearbyint(x / v.scale) + static_cast<float>(v.zero_point);
  return static_cast<int8_t>(std::min(127.f, std::max(-128.f, q)));
}

int64_t qd8_rows(const Value& v, const int64_t* dims) {
  int64_t rows = 1;
  for (int d = 0; d < v.rank - v.nonbatch_dims; ++d) rows *= dims[d];
  return rows;
}

int64_t qd8_rows_max(const Value& v) { return qd8_rows(v, v.max_dims); }

Error set_out(const Op& op, Plan& plan, int rank, const int64_t* dims) {
  Value& out = plan.values[op.out];
  ET_CHECK_OR_RETURN(rank == out.rank, InvalidProgram,
                     "XnnpackBackend: node %u (%s) makes a %d-D result; its output value is %d-D", op.node_index,
                     op.name, rank, out.rank);
  int64_t numel = 1;
  for (int d = 0; d < rank; ++d) {
    ET_CHECK_OR_RETURN(dims[d] >= 0 && (dims[d] == 0 || numel <= (int64_t(1) << 40) / dims[d]), InvalidProgram,
                       "XnnpackBackend: node %u (%s) makes an invalid shape", op.node_index, op.name);
    numel *= dims[d];
    out.dims[d] = dims[d];
  }
  ET_CHECK_OR_RETURN(numel <= out.max_numel(), InvalidArgument,
                     "XnnpackBackend: node %u (%s) makes %" PRId64 " elements; the plan holds %" PRId64
                     " (inputs larger than the upper bounds the model was exported with?)",
                     op.node_index, op.name, numel, out.max_numel());
  ET_CHECK_OR_RETURN(out.dtype != DType::kQD8 || qd8_rows(out, out.dims) <= qd8_rows_max(out), InvalidArgument,
                     "XnnpackBackend: node %u (%s) makes more rows than the plan holds quantization parameters for "
                     "(inputs larger than the upper bounds the model was exported with?)",
                     op.node_index, op.name);
  return Error::Ok;
}

Error check_nhwc(const Op& op, const Value& in) {
  ET_CHECK_OR_RETURN(in.rank == 4, InvalidProgram, "XnnpackBackend: node %u (%s) needs a 4-D NHWC input, got %d-D",
                     op.node_index, op.name, in.rank);
  return Error::Ok;
}

Error window_shape(const Op& op, Plan& plan, int64_t out_c) {
  const Value& in = plan.values[op.in[0]];
  ET_TRY(check_nhwc(op, in));
  const ConvParams& p = op.conv;
  const int64_t* d = in.dims;
  const int64_t oh = window_out(d[1], p.pad_top, p.pad_bottom, p.kernel_h, p.dilation_h, p.stride_h);
  const int64_t ow = window_out(d[2], p.pad_left, p.pad_right, p.kernel_w, p.dilation_w, p.stride_w);
  const int64_t dims[4] = {d[0], oh, ow, out_c};
  return set_out(op, plan, 4, dims);
}

Error check_window(const Op& op, const ConvParams& p) {
  const int64_t vals[6] = {p.kernel_h, p.kernel_w, p.stride_h, p.stride_w, p.dilation_h, p.dilation_w};
  for (int64_t x : vals) {
    ET_CHECK_OR_RETURN(x >= 1 && x <= kMaxWindow, InvalidProgram,
                       "XnnpackBackend: node %u (%s) has a kernel, stride or dilation of %" PRId64 " (must be 1..2^20)",
                       op.node_index, op.name, x);
  }
  const int64_t pads[4] = {p.pad_top, p.pad_right, p.pad_bottom, p.pad_left};
  for (int64_t x : pads) {
    ET_CHECK_OR_RETURN(x >= 0 && x <= kMaxWindow, InvalidProgram, "XnnpackBackend: node %u (%s) has padding %" PRId64,
                       op.node_index, op.name, x);
  }
  return Error::Ok;
}

Error dims_param(Op& op, const flatbuffers::Vector<uint32_t>* v, int64_t* dst, const char* what) {
  ET_CHECK_OR_RETURN(v != nullptr && v->size() <= static_cast<uint32_t>(kMaxDims), InvalidProgram,
                     "XnnpackBackend: node %u (%s) has %u %s (at most %d)", op.node_index, op.name, v ? v->size() : 0u,
                     what, kMaxDims);
  for (uint32_t i = 0; i < v->size(); ++i) {
    dst[i] = v->Get(i);
    ET_CHECK_OR_RETURN(dst[i] <= kMaxNumel, InvalidProgram, "XnnpackBackend: node %u (%s) has %s entry %" PRId64,
                       op.node_index, op.name, what, dst[i]);
  }
  op.n_params = static_cast<int>(v->size());
  return Error::Ok;
}

kernels::cpu::ConvNhwc to_conv_nhwc(const ConvParams& p) {
  kernels::cpu::ConvNhwc c;
  c.kernel_h = p.kernel_h, c.kernel_w = p.kernel_w, c.stride_h = p.stride_h, c.stride_w = p.stride_w;
  c.dilation_h = p.dilation_h, c.dilation_w = p.dilation_w;
  c.pad_top = p.pad_top, c.pad_left = p.pad_left, c.pad_bottom = p.pad_bottom, c.pad_right = p.pad_right;
  c.groups = p.groups, c.group_in_channels = p.group_in, c.group_out_channels = p.group_out;
  return c;
}

int64_t window_out(int64_t in, int64_t pad_before, int64_t pad_after, int64_t kernel, int64_t dilation,
                   int64_t stride) {
  const int64_t span = in + pad_before + pad_after - dilation * (kernel - 1) - 1;
  return span < 0 ? 0 : span / stride + 1;
}

Error broadcast_shape(const Op& op, const Value& a, const Value& b, int count, int64_t* dims) {
  const int rank = std::max(a.rank, b.rank);
  for (int d = 0; d < count; ++d) {
    const int da = d - (rank - a.rank), db = d - (rank - b.rank);
    const int64_t x = da >= 0 ? a.dims[da] : 1, y = db >= 0 ? b.dims[db] : 1;
    ET_CHECK_OR_RETURN(x == y || x == 1 || y == 1, InvalidProgram,
                       "XnnpackBackend: node %u (%s) cannot broadcast %" PRId64 " with %" PRId64 " (dim %d)",
                       op.node_index, op.name, x, y, d);
    dims[d] = x == 1 ? y : x;
  }
  return Error::Ok;
}

void broadcast_dims(int rank, const Value& a, const Value& b, int64_t* ad, int64_t* bd) {
  for (int d = 0; d < rank; ++d) {
    const int da = d - (rank - a.rank), db = d - (rank - b.rank);
    ad[d] = da >= 0 ? a.dims[da] : 1;
    bd[d] = db >= 0 ? b.dims[db] : 1;
  }
}

void bias_clamp(float* out, int64_t rows, int64_t cols, int64_t ld, const float* bias, float lo, float hi) {
  const bool clamp = lo > -INFINITY || hi < INFINITY;
  if (!bias && !clamp) return;
  parallel_for(0, rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(cols, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* o = out + r * ld;
      if (bias) {
        for (int64_t c = 0; c < cols; ++c) o[c] = clampf(o[c] + bias[c], lo, hi);
      } else {
        for (int64_t c = 0; c < cols; ++c) o[c] = clampf(o[c], lo, hi);
      }
    }
  });
}

void gemm_rows(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, ConstMatrix b, float* c, int64_t ldc,
               float* scratch) {
  const ConstMatrix am{a, lda, 1};
  if (kernels::cpu::gemv_supports(m, b)) {
    kernels::cpu::gemv(m, n, k, 1.f, am, b, 0.f, c, ldc, scratch);
  } else {
    kernels::cpu::sgemm(m, n, k, 1.f, am, b, 0.f, nullptr, c, ldc, scratch);
  }
}

size_t gemm_scratch(int64_t m, int64_t n, int64_t k) {
  return std::max(kernels::cpu::sgemm_workspace_floats(m, n, k), static_cast<size_t>(m * k));
}

namespace {
// Round half to even of x * inv, clamped to [lo, hi] (offsets from the zero point): clamp first,
// then add and subtract 1.5 * 2^23, which rounds to nearest even in float32 for |v| < 2^22. A NaN
// maps to 0 (the zero point). Branch-free, so the loop vectorizes (per ISA: IEEE operations
// without a fused multiply-add, so every ISA gives the same bytes).
template <typename T>
ET_MULTIVERSION void quantize_loop(const float* x, int64_t n, float inv, int32_t zero_point, float lo, float hi,
                                   T* out) {
  constexpr float kMagic = 12582912.f;
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] * inv;
    v = v == v ? v : 0.f;
    v = std::min(std::max(v, lo), hi);
    v = (v + kMagic) - kMagic;
    out[i] = static_cast<T>(static_cast<int32_t>(v) + zero_point);
  }
}
}  // namespace

void quantize(const float* x, int64_t n, float scale, int32_t zero_point, int32_t qmin, int32_t qmax, void* out,
              bool is_signed) {
  const float inv = 1.f / scale;
  const float lo = static_cast<float>(qmin - zero_point), hi = static_cast<float>(qmax - zero_point);
  parallel_for(0, n, kFlatGrain, [&](int64_t i0, int64_t i1) {
    if (is_signed) {
      quantize_loop(x + i0, i1 - i0, inv, zero_point, lo, hi, static_cast<int8_t*>(out) + i0);
    } else {
      quantize_loop(x + i0, i1 - i0, inv, zero_point, lo, hi, static_cast<uint8_t*>(out) + i0);
    }
  });
}

void dequantize(const void* q, int64_t n, float scale, int32_t zero_point, bool is_signed, float* out) {
  parallel_for(0, n, kFlatGrain, [&](int64_t i0, int64_t i1) {
    if (is_signed) {
      const int8_t* s = static_cast<const int8_t*>(q);
      for (int64_t i = i0; i < i1; ++i) out[i] = static_cast<float>(int32_t(s[i]) - zero_point) * scale;
    } else {
      const uint8_t* s = static_cast<const uint8_t*>(q);
      for (int64_t i = i0; i < i1; ++i) out[i] = static_cast<float>(int32_t(s[i]) - zero_point) * scale;
    }
  });
}

void quantize_rows(const float* x, int64_t rows, int64_t cols, int8_t* out, float* scale, int32_t* zero_point) {
  // The QD8 fully connected kernels' row quantization (XNNPACK's: x * (255 / range), not x / scale,
  // which differs on a rounding boundary), so a Convert to qdint8 gives the rows they would.
  parallel_for(0, rows, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      kernels::cpu::quantize_row_qd8(x + r * cols, cols, out + r * cols, scale + r, zero_point + r);
    }
  });
}

void dequantize_rows(const int8_t* q, int64_t rows, int64_t cols, const float* scale, const int32_t* zero_point,
                     float* out) {
  for (int64_t r = 0; r < rows; ++r) dequantize(q + r * cols, cols, scale[r], zero_point[r], true, out + r * cols);
}

}  // namespace xnnpack
}  // namespace backends
}  // namespace executorch
