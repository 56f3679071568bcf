// Load pass: an int8 program's dequantize -> op -> quantize chains run as int8 kernels.
//
// A pt2e int8 program computes each quantized op in float between a dequantize of its int8
// inputs and a quantize of its result. Where the pattern matches, the op's instruction instead
// reads the int8 inputs and writes the int8 result itself, and the dequantize and quantize
// instructions go (the float tensors between them are then never written):
// - dequantize_per_tensor(x) -> convolution(weight = dequantize_per_channel(int8, zero points
//   0, axis 0)) [-> relu/hardtanh/clamp] -> quantize_per_tensor: the QS8 convolution
//   (cpu/quantized.h) over weights packed as int8 at load, bias quantized to int32 at
//   in_scale * weight_scale. Its requantization rounds once from the exact int32 sum, where the
//   float path rounds the float convolution (and the bias is rounded to the accumulator's
//   scale): an output near a rounding boundary may land a step away from it. An activation the
//   program quantizes on its own after it (`q -> dq -> hardtanh -> q`) stays a chain of its own:
//   folding it into the requantization would round once where the float path rounds twice, a
//   step off far more often.
// - dequantize_per_tensor -> relu/hardtanh/clamp -> quantize_per_tensor: the float path's own
//   arithmetic fused into one pass over the int8 tensors, so bit-identical to it.
// - add [-> relu/hardtanh/clamp] -> quantize_per_tensor [-> dq -> activation -> q]: the float
//   path's arithmetic in one pass to the int8 result, reading an operand dequantized from int8 as int8 where that tensor is
//   still intact at the add; bit-identical to the float path. (XNNPACK's fixed-point QS8 add
//   would differ from it by a step and gains nothing on an op this memory-bound.)
// An int8 input must still be intact when the rewritten instruction reads it (nothing between its
// dequantize and the op names memory meeting it), the quantize and a folded activation must
// follow the op directly (frees aside), and the float tensors dropped must be read by nothing
// else.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kernels/cpu/quantized.h"
#include "kernels/cpu/vectorize.h"
#include "kernels/portable/load_passes.h"
#include "kernels/portable/util/kernel_util.h"
#include "kernels/portable/util/load_pass_util.h"

namespace executorch {
namespace kernels {
namespace {

struct Ops {
  runtime::OpFunction dq, q, dq_channel, conv, relu, hardtanh, clamp, add;
};

const Ops& ops() {
  static const Ops o{runtime::get_op_function("quantized_decomposed::dequantize_per_tensor", "out"),
                     runtime::get_op_function("quantized_decomposed::quantize_per_tensor", "out"),
                     runtime::get_op_function("quantized_decomposed::dequantize_per_channel", "out"),
                     runtime::get_op_function("aten::convolution", "out"),
                     runtime::get_op_function("aten::relu", "out"),
                     runtime::get_op_function("aten::hardtanh", "out"),
                     runtime::get_op_function("aten::clamp", "out"),
                     runtime::get_op_function("aten::add", "out")};
  return o;
}

// A per-tensor int8 quantization read from a quantize/dequantize call.
struct QParams {
  double scale = 1;
  int64_t zero_point = 0, qmin = -128, qmax = 127;
};

// Instruction `pc` is quantize_per_tensor.out (dequantize with `dequant`) to or from int8 with
// constant parameters in range: its parameters, int8 tensor and float tensor.
bool per_tensor_int8(runtime::MethodRewriter& m, size_t pc, bool dequant, QParams* p, EValue** int8, EValue** real) {
  if (m.kernel(pc) == nullptr || m.kernel(pc) != (dequant ? ops().dq : ops().q)) return false;
  const Args a = m.args(pc);
  const size_t n = dequant ? 9 : 8;
  if (a.size() != n || a[n - 1] != a[n - 2] || !a[n - 1]->isTensor() || !a[0]->isTensor()) return false;
  for (size_t i = 1; i <= 5; ++i)
    if (!m.is_constant(a[i])) return false;
  if (!a[1]->isDouble() || !a[2]->isInt() || !a[3]->isInt() || !a[4]->isInt() || !a[5]->isInt() ||
      a[5]->toInt() != static_cast<int64_t>(ScalarType::Char))
    return false;
  if (dequant && !(a[6]->isNone() || (a[6]->isInt() && a[6]->toInt() == static_cast<int64_t>(ScalarType::Float))))
    return false;
  p->scale = a[1]->toDouble();
  p->zero_point = a[2]->toInt();
  p->qmin = a[3]->toInt();
  p->qmax = a[4]->toInt();
  const float s = static_cast<float>(p->scale);
  if (!(s > 0.f) || !std::isfinite(s) || !std::isfinite(static_cast<float>(1.0 / p->scale)) || p->qmin < -128 ||
      p->qmax > 127 || p->qmin > p->qmax || p->zero_point < -128 || p->zero_point > 127)
    return false;
  *int8 = dequant ? a[0] : a[n - 1];
  *real = dequant ? a[n - 1] : a[0];
  const Tensor q = (*int8)->toTensor(), f = (*real)->toTensor();
  return q.scalar_type() == ScalarType::Char && f.scalar_type() == ScalarType::Float && same_shape(q, f) &&
         q.const_data_ptr() != nullptr;
}

// Whether every instruction strictly between `from` and `to` does nothing.
bool quiet_between(runtime::MethodRewriter& m, size_t from, size_t to) {
  for (size_t k = from + 1; k < to; ++k)
    if (!m.does_nothing(k)) return false;
  return from < to;
}

// Whether int8 tensor `x` still holds at `to` what it held at `from`: no instruction between
// them writes it or names a tensor whose memory meets it (the memory plan may give a tensor
// written later the memory of one read for the last time at `from`).
bool intact_between(runtime::MethodRewriter& m, const EValue* x, size_t from, size_t to) {
  const Tensor t = x->toTensor();
  if (t.const_data_ptr() == nullptr || m.aliased(x)) return false;
  for (size_t k = from + 1; k < to; ++k) {
    if (m.does_nothing(k)) continue;
    if (m.kernel(k) == nullptr) return false;  // a delegate, move or jump: what it writes is unseen
    const Args a = m.args(k);
    if (a.size() > 0 && a[a.size() - 1] == x) return false;
    for (const EValue* v : a) {
      if (v->isTensorList() || v->isListOptionalTensor()) return false;
      if (!v->isTensor() || v == x || m.is_constant(v)) continue;
      const Tensor u = v->toTensor();
      if (u.const_data_ptr() == nullptr || overlap(u.const_data_ptr(), bytes_of(u), t.const_data_ptr(), bytes_of(t)))
        return false;
    }
  }
  return from < to;
}

// The dequantize writing `v`, which `pc` reads: its parameters and int8 input; `*shared` when
// other instructions read `v` too (the dequantize then stays for them).
bool dequantized_input(runtime::MethodRewriter& m, size_t pc, const EValue* v, size_t* dq, QParams* p, EValue** int8,
                       bool* shared) {
  constexpr size_t kMaxUses = 8;
  size_t pcs[kMaxUses];
  EValue* real = nullptr;
  const size_t n = v->isTensor() && !m.aliased(v) ? m.uses(v, pcs, kMaxUses) : 0;
  if (n < 2 || n > kMaxUses) return false;
  bool read_at_pc = false;
  for (size_t i = 1; i < n; ++i) read_at_pc = read_at_pc || pcs[i] == pc;
  *dq = pcs[0];
  *shared = n > 2;
  return read_at_pc && per_tensor_int8(m, *dq, true, p, int8, &real) && real == v;
}

// A ReLU/hardtanh/clamp call with constant bounds: its float bounds.
bool activation(runtime::MethodRewriter& m, size_t pc, float* lo, float* hi) {
  const runtime::OpFunction op = m.kernel(pc);
  const Args b = m.args(pc);
  *lo = -std::numeric_limits<float>::infinity();
  *hi = std::numeric_limits<float>::infinity();
  if (op == nullptr || b.size() < 3 || b[b.size() - 1] != b[b.size() - 2] || !b[0]->isTensor()) return false;
  if (op == ops().relu && b.size() == 3) {
    *lo = 0.f;
    return true;
  }
  if (op == ops().hardtanh && b.size() == 5) return constant_scalar(m, b[1], lo) && constant_scalar(m, b[2], hi);
  if (op == ops().clamp && b.size() == 5)
    return (b[1]->isNone() || constant_scalar(m, b[1], lo)) && (b[2]->isNone() || constant_scalar(m, b[2], hi));
  return false;
}

// The op's float result `v` (written at `pc`) through an optional activation to the quantize
// that only follows: the quantize, the activation (0 when none), its bounds, and the int8 tensor.
bool quantized_output(runtime::MethodRewriter& m, size_t pc, EValue* v, size_t* q, size_t* act, float* lo, float* hi,
                      QParams* p, EValue** int8) {
  size_t pcs[3];
  if (!v->isTensor() || m.aliased(v) || m.uses(v, pcs, 3) != 2 || pcs[0] != pc || !quiet_between(m, pc, pcs[1]))
    return false;
  size_t next = pcs[1];
  *act = 0;
  *lo = -std::numeric_limits<float>::infinity();
  *hi = std::numeric_limits<float>::infinity();
  if (m.kernel(next) != ops().q) {
    if (!activation(m, next, lo, hi) || m.args(next)[0] != v || !(*lo <= *hi)) return false;
    *act = next;
    v = m.args(next)[m.args(next).size() - 1];
    if (!v->isTensor() || m.aliased(v) || m.uses(v, pcs, 3) != 2 || pcs[0] != next || !quiet_between(m, next, pcs[1]))
      return false;
    next = pcs[1];
  }
  EValue* real = nullptr;
  *q = next;
  return per_tensor_int8(m, next, false, p, int8, &real) && real == v;
}

// The int8 clamp a float activation's bounds become after quantizing with `p` (quantizing is
// monotone, so clamping before it equals clamping after it at the quantized bounds).
void int8_bounds(float lo, float hi, const QParams& p, int8_t* qlo, int8_t* qhi) {
  const int32_t l =
      std::isinf(lo) ? static_cast<int32_t>(p.qmin) : quantize_8bit_value(lo, p.scale, p.zero_point, p.qmin, p.qmax);
  const int32_t h =
      std::isinf(hi) ? static_cast<int32_t>(p.qmax) : quantize_8bit_value(hi, p.scale, p.zero_point, p.qmin, p.qmax);
  *qlo = static_cast<int8_t>(l);
  *qhi = static_cast<int8_t>(h);
}

// A dequantize -> ReLU/hardtanh/clamp -> quantize chain right after quantize `q`, reading only its
// int8 output `y` with the same parameters `p`: its instructions, float bounds, and the final
// quantize's parameters and int8 output.
struct ActivationAfter {
  size_t dq = 0, act = 0, q = 0;
  float lo = 0, hi = 0;
  QParams p;
  EValue* y = nullptr;
};

bool activation_after(runtime::MethodRewriter& m, size_t q, EValue* y, const QParams& p, ActivationAfter* r) {
  size_t pcs[3];
  QParams in;
  EValue *int8 = nullptr, *real = nullptr;
  if (m.aliased(y) || m.uses(y, pcs, 3) != 2 || pcs[0] != q || !quiet_between(m, q, pcs[1])) return false;
  r->dq = pcs[1];
  if (!per_tensor_int8(m, r->dq, true, &in, &int8, &real) || int8 != y || in.scale != p.scale ||
      in.zero_point != p.zero_point || m.aliased(real) || m.uses(real, pcs, 3) != 2 || pcs[0] != r->dq ||
      !quiet_between(m, r->dq, pcs[1]))
    return false;
  r->act = pcs[1];
  const Args b = m.args(r->act);
  if (!activation(m, r->act, &r->lo, &r->hi) || b[0] != real || !(r->lo <= r->hi)) return false;
  real = b[b.size() - 1];
  if (m.aliased(real) || m.uses(real, pcs, 3) != 2 || pcs[0] != r->act || !quiet_between(m, r->act, pcs[1]))
    return false;
  r->q = pcs[1];
  EValue* f = nullptr;
  return per_tensor_int8(m, r->q, false, &r->p, &r->y, &f) && f == real;
}

// ---- convolution ----

struct Int8Conv {
  cpu::ConvNhwc geometry;
  const void* packed;
  int8_t out_min, out_max;
  bool output_over_input;  // the output may share memory with the input: written via temp memory
};

void int8_convolution_out(KernelRuntimeContext& ctx, Args args) {
  const auto* st = static_cast<const Int8Conv*>(ctx.call_state());
  const Tensor in = args[0]->toTensor(), out = args[9]->toTensor();
  const cpu::ConvNhwc& g = st->geometry;
  ET_KERNEL_CHECK_MSG(ctx,
                      in.scalar_type() == ScalarType::Char && out.scalar_type() == ScalarType::Char && in.dim() == 4 &&
                          in.size(1) == g.in_channels() && (in.is_contiguous() || channels_last(in)) &&
                          (out.is_contiguous() || channels_last(out)),
                      InvalidArgument, , "convolution (int8): input does not match the packed weights");
  const int64_t n = in.size(0), h = in.size(2), w = in.size(3), oh = g.out_h(h), ow = g.out_w(w);
  ET_KERNEL_CHECK_MSG(ctx, oh > 0 && ow > 0, InvalidArgument, , "convolution (int8): input smaller than the kernel");
  const int64_t sizes[4] = {n, g.out_channels(), oh, ow};
  if (!resize_out(ctx, out, {sizes, 4})) return;
  const int8_t* x = in.const_data_ptr<int8_t>();
  int8_t* y = out.mutable_data_ptr<int8_t>();
  int8_t* y_nhwc = nullptr;
  if (!channels_last(in)) {
    auto mem = ctx.allocate_temp(in.nbytes(), 64);
    ET_KERNEL_CHECK_MSG(ctx, mem.ok(), MemoryAllocationFailed, , "convolution (int8): no temp memory for its input");
    transpose_planes(x, static_cast<int8_t*>(*mem), n, g.in_channels(), h * w);
    x = static_cast<int8_t*>(*mem);
  }
  if (!channels_last(out) || st->output_over_input) {
    auto mem = ctx.allocate_temp(out.nbytes(), 64);
    ET_KERNEL_CHECK_MSG(ctx, mem.ok(), MemoryAllocationFailed, , "convolution (int8): no temp memory for its output");
    y_nhwc = static_cast<int8_t*>(*mem);
  }
  ET_KERNEL_CHECK_MSG(ctx,
                      cpu::conv2d_nhwc_qs8(g, st->packed, n, h, w, x, y_nhwc ? y_nhwc : y, st->out_min, st->out_max),
                      InvalidArgument, , "convolution (int8): the packed kernel refused the shapes");
  if (y_nhwc != nullptr && channels_last(out))
    std::memcpy(y, y_nhwc, out.nbytes());
  else if (y_nhwc != nullptr)
    transpose_planes(y_nhwc, y, n, oh * ow, g.out_channels());
}

// The per-channel int8 weight dequantize `pc` (symmetric, axis 0, constant): the int8 weight's
// value and its float scales (written to `scales`, `channels` of them).
bool int8_weight(runtime::MethodRewriter& m, size_t pc, int64_t channels, EValue** weight, float* scales) {
  if (m.kernel(pc) != ops().dq_channel) return false;
  const Args a = m.args(pc);
  if (a.size() != 10 || a[9] != a[8] || !a[0]->isTensor() || !a[1]->isTensor() || !a[3]->isInt() || !a[6]->isInt() ||
      !a[8]->isTensor() || !same_shape(a[0]->toTensor(), a[8]->toTensor()) ||
      !(a[7]->isNone() || (a[7]->isInt() && a[7]->toInt() == static_cast<int64_t>(ScalarType::Float))))
    return false;
  for (size_t i = 0; i <= 6; ++i)
    if (!a[i]->isNone() && !m.is_constant(a[i])) return false;
  const Tensor w = a[0]->toTensor(), s = a[1]->toTensor();
  if (w.scalar_type() != ScalarType::Char || w.dim() != 4 || !w.is_contiguous() || w.size(0) != channels ||
      a[3]->toInt() != 0 || a[6]->toInt() != static_cast<int64_t>(ScalarType::Char) || s.numel() != channels ||
      (s.scalar_type() != ScalarType::Float && s.scalar_type() != ScalarType::Double))
    return false;
  if (a[2]->isTensor()) {
    const Tensor z = a[2]->toTensor();
    if (z.numel() != channels || !is_integral(z.scalar_type(), false)) return false;
    for (int64_t c = 0; c < channels; ++c)
      if (load_int(z.const_data_ptr(), z.scalar_type(), c) != 0) return false;
  } else if (!a[2]->isNone()) {
    return false;
  }
  for (int64_t c = 0; c < channels; ++c) {
    scales[c] = static_cast<float>(load_double(s.const_data_ptr(), s.scalar_type(), c));
    if (!(scales[c] > 0.f) || !std::isfinite(scales[c])) return false;
  }
  *weight = a[0];
  return true;
}

bool int8_conv_chain(runtime::MethodRewriter& m, size_t pc) {
  const Args a = m.args(pc);
  if (a.size() != 11 || !a[0]->isTensor() || !a[1]->isTensor() || !a[9]->isTensor() || a[9] != a[10]) return false;
  const Tensor fin = a[0]->toTensor(), fw = a[1]->toTensor(), fout = a[9]->toTensor();
  if (fin.dim() != 4 || fw.dim() != 4 || fout.dim() != 4 || !fw.is_contiguous()) return false;
  cpu::ConvNhwc g;
  if (!conv_geometry(m, a, fw, fin.size(1), &g)) return false;
  const int64_t oc = g.out_channels();
  // Input: a dequantize right before; weight: a dequantize of constants only this call reads.
  size_t dq = 0, wdq = 0, q = 0, act = 0;
  QParams in_q, out_q;
  EValue *x = nullptr, *y = nullptr, *weight = nullptr;
  float lo = 0, hi = 0;
  bool shared = false;
  if (!dequantized_input(m, pc, a[0], &dq, &in_q, &x, &shared) || !intact_between(m, x, dq, pc)) return false;
  size_t pcs[3];
  if (m.uses(a[1], pcs, 3) != 2 || pcs[1] != pc || m.aliased(a[1])) return false;
  wdq = pcs[0];
  m.free_temp();
  auto* wscale = static_cast<float*>(m.allocate_temp(static_cast<size_t>(oc) * sizeof(float), 64));
  if (wscale == nullptr || !int8_weight(m, wdq, oc, &weight, wscale) || m.args(wdq)[9] != a[1]) return false;
  if (!quantized_output(m, pc, a[9], &q, &act, &lo, &hi, &out_q, &y)) return false;
  const float* bias = nullptr;
  if (!a[2]->isNone()) {
    if (!a[2]->isTensor() || !m.is_constant(a[2])) return false;
    const Tensor b = a[2]->toTensor();
    if (b.scalar_type() != ScalarType::Float || b.numel() != oc) return false;
    bias = b.const_data_ptr<float>();
  }
  const Tensor xt = x->toTensor(), yt = y->toTensor(), wt = weight->toTensor();
  if (!same_shape(yt, fout) || yt.const_data_ptr() == nullptr) return false;
  // The kernel takes the quantized bounds of the quantize and of the folded activations.
  int8_t out_min = static_cast<int8_t>(out_q.qmin), out_max = static_cast<int8_t>(out_q.qmax);
  if (act != 0) {
    int8_t alo = 0, ahi = 0;
    int8_bounds(lo, hi, out_q, &alo, &ahi);
    out_min = alo > out_min ? alo : out_min;
    out_max = ahi < out_max ? ahi : out_max;
  }
  if (in_q.qmin != -128 || in_q.qmax != 127) return false;  // the kernel reads any int8 input
  // Bias at in_scale * weight_scale, as XNNPACK's QS8 convolution takes it.
  auto* qbias = static_cast<int32_t*>(m.allocate_temp(static_cast<size_t>(oc) * sizeof(int32_t), 64));
  auto* ohwi = static_cast<int8_t*>(m.allocate_temp(static_cast<size_t>(wt.numel()), 64));
  if (qbias == nullptr || ohwi == nullptr) return false;
  const float in_scale = static_cast<float>(in_q.scale);
  for (int64_t c = 0; c < oc; ++c) {
    const double v = bias ? std::nearbyint(double(bias[c]) / (double(in_scale) * double(wscale[c]))) : 0.0;
    if (!(std::fabs(v) < double(1 << 30))) return false;
    qbias[c] = static_cast<int32_t>(v);
  }
  const int64_t taps = g.kernel_h * g.kernel_w, gin = g.group_in_channels;
  const int8_t* w = wt.const_data_ptr<int8_t>();
  for (int64_t o = 0; o < oc; ++o)
    for (int64_t t = 0; t < taps; ++t)
      for (int64_t i = 0; i < gin; ++i) ohwi[(o * taps + t) * gin + i] = w[(o * gin + i) * taps + t];
  cpu::Qs8ConvQuant quant;
  quant.in_scale = in_scale;
  quant.in_zero_point = static_cast<int32_t>(in_q.zero_point);
  quant.weight_scales = wscale;
  quant.out_scale = static_cast<float>(out_q.scale);
  quant.out_zero_point = static_cast<int32_t>(out_q.zero_point);
  const cpu::Isa isa = cpu::best_float_isa();
  const size_t bytes = cpu::conv2d_nhwc_qs8_packed_bytes(g, isa);
  auto* state = static_cast<Int8Conv*>(m.allocate(sizeof(Int8Conv), alignof(Int8Conv)));
  void* packed = bytes > 0 && state != nullptr ? m.allocate(bytes, 64) : nullptr;
  if (packed == nullptr || !cpu::conv2d_nhwc_qs8_pack(g, cpu::ConvWeights::kOhwi, ohwi, qbias, quant, isa, packed))
    return false;
  // Runs may need temp memory for the input and the output (NCHW, or the output over the input).
  m.free_temp();
  if (m.allocate_temp(bytes_of(xt), 64) == nullptr || m.allocate_temp(bytes_of(yt), 64) == nullptr) return false;
  m.free_temp();
  *state = Int8Conv{g, packed, out_min, out_max,
                    overlap(xt.const_data_ptr(), bytes_of(xt), yt.const_data_ptr(), bytes_of(yt))};
  m.set_kernel(pc, int8_convolution_out, state);
  a[0] = x;
  a[1] = weight;
  a[9] = a[10] = y;
  if (!shared) m.remove(dq);
  m.remove(wdq);
  if (act != 0) m.remove(act);
  m.remove(q);
  return true;
}

// ---- elementwise: activations and add ----

// The float path of dequantize -> clamp -> quantize, per element: the dequantized value, clamped
// to the activation's bounds, quantized (the quantized_decomposed kernels' arithmetic,
// op_quantize.cpp; nothing here fuses, so every ISA gives the same bytes).
struct Int8Activation {
  float in_scale, in_zero_point, lo, hi, inv_out_scale, out_zero_point, qmin, qmax;
};

Int8Activation activation_params(const QParams& in, float lo, float hi, const QParams& out) {
  return Int8Activation{static_cast<float>(in.scale),
                        static_cast<float>(in.zero_point),
                        lo,
                        hi,
                        static_cast<float>(1.0 / out.scale),
                        static_cast<float>(out.zero_point),
                        static_cast<float>(out.qmin),
                        static_cast<float>(out.qmax)};
}

ET_MULTIVERSION void activate_int8(const int8_t* x, int8_t* y, int64_t n, Int8Activation p) {
  for (int64_t i = 0; i < n; ++i) {
    float f = (static_cast<float>(x[i]) - p.in_zero_point) * p.in_scale;
    f = f < p.lo ? p.lo : f;
    f = f > p.hi ? p.hi : f;
    float v = std::nearbyint(f * p.inv_out_scale) + p.out_zero_point;
    v = v < p.qmin ? p.qmin : (v > p.qmax ? p.qmax : v);
    y[i] = static_cast<int8_t>(static_cast<int32_t>(v));
  }
}

// Over tensors of one shape and layout; an output overlapping the input other than exactly goes
// through temp memory.
void int8_activation_out(KernelRuntimeContext& ctx, Args args) {
  const auto* st = static_cast<const Int8Activation*>(ctx.call_state());
  const Tensor in = args[0]->toTensor(), out = args[args.size() - 1]->toTensor();
  ET_KERNEL_CHECK_MSG(ctx, in.scalar_type() == ScalarType::Char && out.scalar_type() == ScalarType::Char, InvalidType, ,
                      "int8 activation: takes int8 to int8");
  if (!resize_out(ctx, out, in)) return;
  ET_KERNEL_CHECK_MSG(ctx, same_dim_order(in, out), InvalidArgument, ,
                      "int8 activation: input and output layouts differ");
  const int8_t* x = in.const_data_ptr<int8_t>();
  int8_t* y = out.mutable_data_ptr<int8_t>();
  if (x != y && overlap(x, in.nbytes(), y, out.nbytes())) {
    auto mem = ctx.allocate_temp(in.nbytes(), 64);
    ET_KERNEL_CHECK_MSG(ctx, mem.ok(), MemoryAllocationFailed, , "int8 activation: no temp memory");
    std::memcpy(*mem, x, in.nbytes());
    x = static_cast<const int8_t*>(*mem);
  }
  const Int8Activation p = *st;
  cpu::parallel_for(0, in.numel(), int64_t(1) << 16,
                    [&](int64_t b, int64_t e) { activate_int8(x + b, y + b, e - b, p); });
}

bool int8_activation_chain(runtime::MethodRewriter& m, size_t pc) {
  float lo = 0, hi = 0;
  if (!activation(m, pc, &lo, &hi) || !(lo <= hi)) return false;
  const Args a = m.args(pc);
  size_t dq = 0;
  QParams in_q, out_q;
  EValue *x = nullptr, *y = nullptr, *real = nullptr;
  bool shared = false;
  if (!dequantized_input(m, pc, a[0], &dq, &in_q, &x, &shared) || !intact_between(m, x, dq, pc)) return false;
  EValue* v = a[a.size() - 1];
  size_t pcs[3];
  if (!v->isTensor() || m.aliased(v) || m.uses(v, pcs, 3) != 2 || pcs[0] != pc) return false;
  const size_t q = pcs[1];
  if (!quiet_between(m, pc, q) || !per_tensor_int8(m, q, false, &out_q, &y, &real) || real != v) return false;
  auto* state = static_cast<Int8Activation*>(m.allocate(sizeof(Int8Activation), alignof(Int8Activation)));
  if (state == nullptr) return false;
  *state = activation_params(in_q, lo, hi, out_q);
  m.set_kernel(pc, int8_activation_out, state);
  a[0] = x;
  a[a.size() - 1] = a[a.size() - 2] = y;
  if (!shared) m.remove(dq);
  m.remove(q);
  return true;
}

// add -> quantize, each operand int8 (dequantized in the loop) or float: the float path's own
// arithmetic (dequantize, a + b, clamp, quantize) fused into one pass, so bit-identical to it.
struct Int8Add {
  float scale[2], zero_point[2];  // of int8 operands
  float lo, hi, inv_out_scale, out_zero_point, qmin, qmax;
  // A dq -> activation -> q after the add's quantize, applied to each chunk of the result while
  // it is in cache: the float path's second rounding, exactly.
  bool then_activate;
  Int8Activation activation;
};

template <typename A, typename B>
ET_ALWAYS_INLINE void add_loop(const A* a, const B* b, int8_t* y, int64_t n, const Int8Add& p) {
  for (int64_t i = 0; i < n; ++i) {
    float fa, fb;
    if constexpr (std::is_same_v<A, int8_t>)
      fa = (static_cast<float>(a[i]) - p.zero_point[0]) * p.scale[0];
    else
      fa = a[i];
    if constexpr (std::is_same_v<B, int8_t>)
      fb = (static_cast<float>(b[i]) - p.zero_point[1]) * p.scale[1];
    else
      fb = b[i];
    float f = fa + fb;
    f = f < p.lo ? p.lo : f;
    f = f > p.hi ? p.hi : f;
    float v = std::nearbyint(f * p.inv_out_scale) + p.out_zero_point;
    v = v < p.qmin ? p.qmin : (v > p.qmax ? p.qmax : v);
    y[i] = static_cast<int8_t>(static_cast<int32_t>(v == v ? v : p.qmin));
  }
}
ET_MULTIVERSION void add_qq(const int8_t* a, const int8_t* b, int8_t* y, int64_t n, Int8Add p) {
  add_loop(a, b, y, n, p);
}
ET_MULTIVERSION void add_fq(const float* a, const int8_t* b, int8_t* y, int64_t n, Int8Add p) {
  add_loop(a, b, y, n, p);
}
ET_MULTIVERSION void add_qf(const int8_t* a, const float* b, int8_t* y, int64_t n, Int8Add p) {
  add_loop(a, b, y, n, p);
}
ET_MULTIVERSION void add_ff(const float* a, const float* b, int8_t* y, int64_t n, Int8Add p) {
  add_loop(a, b, y, n, p);
}

void int8_add_out(KernelRuntimeContext& ctx, Args args) {
  const Int8Add p = *static_cast<const Int8Add*>(ctx.call_state());
  const Tensor a = args[0]->toTensor(), b = args[1]->toTensor(), out = args[3]->toTensor();
  const auto ok = [](const Tensor& t) {
    return t.scalar_type() == ScalarType::Char || t.scalar_type() == ScalarType::Float;
  };
  ET_KERNEL_CHECK_MSG(ctx, ok(a) && ok(b) && out.scalar_type() == ScalarType::Char && same_shape(a, b), InvalidArgument,
                      , "add (int8): takes int8 or float32 operands of one shape to int8");
  if (!resize_out(ctx, out, a)) return;
  ET_KERNEL_CHECK_MSG(ctx, same_dim_order(a, b) && same_dim_order(a, out), InvalidArgument, ,
                      "add (int8): operand layouts differ");
  const void* x[2] = {a.const_data_ptr(), b.const_data_ptr()};
  const size_t bytes[2] = {a.nbytes(), b.nbytes()};
  int8_t* y = out.mutable_data_ptr<int8_t>();
  for (int i = 0; i < 2; ++i) {
    // Read and written at the same index only when the operand is int8 in exactly y's place.
    const bool in_place = x[i] == y && bytes[i] == out.nbytes();
    if (in_place || !overlap(x[i], bytes[i], y, out.nbytes())) continue;
    auto mem = ctx.allocate_temp(bytes[i], 64);
    ET_KERNEL_CHECK_MSG(ctx, mem.ok(), MemoryAllocationFailed, , "add (int8): no temp memory");
    std::memcpy(*mem, x[i], bytes[i]);
    x[i] = *mem;
  }
  const bool qa = a.scalar_type() == ScalarType::Char, qb = b.scalar_type() == ScalarType::Char;
  cpu::parallel_for(0, a.numel(), int64_t(1) << 15, [&](int64_t s, int64_t e) {
    const auto* ia = static_cast<const int8_t*>(x[0]) + s;
    const auto* ib = static_cast<const int8_t*>(x[1]) + s;
    const auto* fa = static_cast<const float*>(x[0]) + s;
    const auto* fb = static_cast<const float*>(x[1]) + s;
    if (qa && qb)
      add_qq(ia, ib, y + s, e - s, p);
    else if (qb)
      add_fq(fa, ib, y + s, e - s, p);
    else if (qa)
      add_qf(ia, fb, y + s, e - s, p);
    else
      add_ff(fa, fb, y + s, e - s, p);
    if (p.then_activate) activate_int8(y + s, y + s, e - s, p.activation);
  });
}

bool int8_add_chain(runtime::MethodRewriter& m, size_t pc) {
  const Args a = m.args(pc);
  if (m.kernel(pc) != ops().add || a.size() != 5 || a[3] != a[4] || !a[0]->isTensor() || !a[1]->isTensor() ||
      !a[2]->isScalar() || !m.is_constant(a[2]) || a[2]->toScalarDouble() != 1.0 || a[0] == a[1])
    return false;
  const Tensor out = a[3]->toTensor();
  for (int i = 0; i < 2; ++i) {
    const Tensor t = a[i]->toTensor();
    if (t.scalar_type() != ScalarType::Float || !same_shape(t, out) || t.const_data_ptr() == nullptr) return false;
  }
  size_t q = 0, act = 0;
  float lo = 0, hi = 0;
  QParams out_q;
  EValue* y = nullptr;
  if (!quantized_output(m, pc, a[3], &q, &act, &lo, &hi, &out_q, &y)) return false;
  auto* state = static_cast<Int8Add*>(m.allocate(sizeof(Int8Add), alignof(Int8Add)));
  if (state == nullptr) return false;
  *state = Int8Add{{1.f, 1.f},
                   {0.f, 0.f},
                   lo,
                   hi,
                   static_cast<float>(1.0 / out_q.scale),
                   static_cast<float>(out_q.zero_point),
                   static_cast<float>(out_q.qmin),
                   static_cast<float>(out_q.qmax),
                   false,
                   Int8Activation{}};
  ActivationAfter after;
  if (!activation_after(m, q, y, out_q, &after)) after = ActivationAfter{};  // fields a failed match left
  if (after.act != 0) {
    state->then_activate = true;
    state->activation = activation_params(out_q, after.lo, after.hi, after.p);
    y = after.y;
  }
  // An operand dequantized from int8 is read as int8 when that tensor is still intact at the add
  // (a residual's int8 tensor may not be: the memory plan reuses it after its last reader).
  size_t dq[2] = {0, 0};
  EValue* x[2] = {nullptr, nullptr};
  bool shared[2] = {false, false};
  for (int i = 0; i < 2; ++i) {
    QParams p;
    if (!dequantized_input(m, pc, a[i], &dq[i], &p, &x[i], &shared[i]) || !intact_between(m, x[i], dq[i], pc)) {
      x[i] = nullptr;
      continue;
    }
    state->scale[i] = static_cast<float>(p.scale);
    state->zero_point[i] = static_cast<float>(p.zero_point);
  }
  m.set_kernel(pc, int8_add_out, state);
  for (int i = 0; i < 2; ++i)
    if (x[i] != nullptr) a[i] = x[i];
  a[3] = a[4] = y;
  for (int i = 0; i < 2; ++i)
    if (x[i] != nullptr && !shared[i]) m.remove(dq[i]);
  if (act != 0) m.remove(act);
  m.remove(q);
  if (after.act != 0) {
    m.remove(after.dq);
    m.remove(after.act);
    m.remove(after.q);
  }
  return true;
}

}  // namespace

bool is_int8_conv_kernel(runtime::OpFunction op) { return op != nullptr && op == int8_convolution_out; }

bool is_int8_elementwise_kernel(runtime::OpFunction op) {
  return op != nullptr && (op == int8_activation_out || op == int8_add_out);
}

size_t run_int8_chains(runtime::MethodRewriter& m) {
  if (ops().dq == nullptr || ops().q == nullptr) return 0;
  size_t done = 0;
  for (size_t pc = 0; pc < m.num_steps(); ++pc) {
    const runtime::OpFunction op = m.kernel(pc);
    if (op == nullptr) continue;
    bool changed = false;
    if (op == ops().conv)
      changed = int8_conv_chain(m, pc);
    else if (op == ops().add)
      changed = int8_add_chain(m, pc);
    else if (op == ops().relu || op == ops().hardtanh || op == ops().clamp)
      changed = int8_activation_chain(m, pc);
    m.free_temp();
    done += changed ? 1 : 0;
  }
  return done;
}

}  // namespace kernels
}  // namespace executorch
