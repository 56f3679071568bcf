// Elementwise ops: the binary kinds (Add, Subtract, Multiply, Divide, Minimum, Maximum, PReLU; numpy
// broadcasting), the unary kinds (Clamp, Hardswish, Sigmoid, ... LeakyReLU), Softmax over the last
// dim, and Convert (a change of element type: quantize, dequantize, requantize). Float kernels with
// the fused output clamp; QS8 add, subtract and multiply and a QS8 clamp run in integers.
#include <cmath>

#include "backends/xnnpack/runtime/ops/ops.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/quantized.h"
#include "kernels/cpu/softmax.h"
#include "kernels/cpu/vmath.h"

namespace executorch {
namespace backends {
namespace xnnpack {
namespace {

using kernels::cpu::parallel_for;

// ---- kernels --------------------------------------------------------------------------------

// out = f(a, b) with numpy broadcasting; f gives the stored element (clamp included).
template <typename T, typename F>
void broadcast_loop(int rank, const int64_t* a_dims, const T* a, const int64_t* b_dims, const T* b,
                    const int64_t* out_dims, T* out, F f) {
  int64_t total = 1;
  for (int d = 0; d < rank; ++d) total *= out_dims[d];
  if (total == 0) return;
  const int64_t inner = rank ? out_dims[rank - 1] : 1;
  const int64_t as = rank && a_dims[rank - 1] != 1 ? 1 : 0, bs = rank && b_dims[rank - 1] != 1 ? 1 : 0;
  // Strides of A and B per output dim (0 where broadcast).
  int64_t a_str[kMaxDims] = {}, b_str[kMaxDims] = {};
  int64_t sa = 1, sb = 1;
  for (int d = rank - 1; d >= 0; --d) {
    a_str[d] = a_dims[d] == 1 ? 0 : sa;
    b_str[d] = b_dims[d] == 1 ? 0 : sb;
    sa *= a_dims[d];
    sb *= b_dims[d];
  }
  if (std::equal(a_dims, a_dims + rank, out_dims) && std::equal(b_dims, b_dims + rank, out_dims)) {
    // Same shapes (residual adds): one flat loop the compiler vectorizes.
    parallel_for(0, total, kFlatGrain, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) out[i] = f(a[i], b[i]);
    });
    return;
  }
  const int64_t lines = total / inner;
  parallel_for(0, lines, std::max<int64_t>(1, kGrain / std::max<int64_t>(inner, 1)), [&](int64_t l0, int64_t l1) {
    for (int64_t l = l0; l < l1; ++l) {
      int64_t rem = l, ao = 0, bo = 0;
      for (int d = rank - 2; d >= 0; --d) {
        const int64_t idx = rem % out_dims[d];
        rem /= out_dims[d];
        ao += idx * a_str[d];
        bo += idx * b_str[d];
      }
      const T* pa = a + ao;
      const T* pb = b + bo;
      T* po = out + l * inner;
      if (as && bs) {
        for (int64_t i = 0; i < inner; ++i) po[i] = f(pa[i], pb[i]);
      } else if (as) {
        const T vb = pb[0];
        for (int64_t i = 0; i < inner; ++i) po[i] = f(pa[i], vb);
      } else if (bs) {
        const T va = pa[0];
        for (int64_t i = 0; i < inner; ++i) po[i] = f(va, pb[i]);
      } else {
        const T v = f(pa[0], pb[0]);
        for (int64_t i = 0; i < inner; ++i) po[i] = v;
      }
    }
  });
}

template <typename F>
void binary_loop(int rank, const int64_t* a_dims, const float* a, const int64_t* b_dims, const float* b,
                 const int64_t* out_dims, float* out, float lo, float hi, F f) {
  broadcast_loop(rank, a_dims, a, b_dims, b, out_dims, out, [&](float x, float y) { return clampf(f(x, y), lo, hi); });
}

void binary_kernel(BinaryKind kind, int rank, const int64_t* a_dims, const float* a, const int64_t* b_dims,
                   const float* b, const int64_t* out_dims, float* out, float lo, float hi) {
  switch (kind) {
    case BinaryKind::kAdd:
      return binary_loop(rank, a_dims, a, b_dims, b, out_dims, out, lo, hi, [](float x, float y) { return x + y; });
    case BinaryKind::kSub:
      return binary_loop(rank, a_dims, a, b_dims, b, out_dims, out, lo, hi, [](float x, float y) { return x - y; });
    case BinaryKind::kMul:
      return binary_loop(rank, a_dims, a, b_dims, b, out_dims, out, lo, hi, [](float x, float y) { return x * y; });
    case BinaryKind::kDiv:
      return binary_loop(rank, a_dims, a, b_dims, b, out_dims, out, lo, hi, [](float x, float y) { return x / y; });
    case BinaryKind::kMin:
      return binary_loop(rank, a_dims, a, b_dims, b, out_dims, out, lo, hi,
                         [](float x, float y) { return x != x || y != y ? x + y : std::min(x, y); });
    case BinaryKind::kMax:
      return binary_loop(rank, a_dims, a, b_dims, b, out_dims, out, lo, hi,
                         [](float x, float y) { return x != x || y != y ? x + y : std::max(x, y); });
    case BinaryKind::kPrelu:
      return binary_loop(rank, a_dims, a, b_dims, b, out_dims, out, lo, hi,
                         [](float x, float s) { return x < 0 ? x * s : x; });
  }
}

void unary_kernel(UnaryKind kind, const float* x, float* y, int64_t n, float alpha, float lo, float hi) {
  using kernels::cpu::vexp;
  if (kind == UnaryKind::kGelu) {
    kernels::cpu::gelu(x, y, n, false);
    if (lo > -INFINITY || hi < INFINITY) {
      for (int64_t i = 0; i < n; ++i) y[i] = clampf(y[i], lo, hi);
    }
    return;
  }
  parallel_for(0, n, kFlatGrain, [&](int64_t i0, int64_t i1) {
    const float* xs = x + i0;
    float* ys = y + i0;
    const int64_t m = i1 - i0;
    switch (kind) {
      case UnaryKind::kClamp:
        for (int64_t i = 0; i < m; ++i) ys[i] = clampf(xs[i], lo, hi);
        return;
      case UnaryKind::kHardswish:
        for (int64_t i = 0; i < m; ++i) ys[i] = xs[i] * std::min(std::max(xs[i] + 3.f, 0.f), 6.f) * (1.f / 6.f);
        break;
      case UnaryKind::kSigmoid:
        for (int64_t i = 0; i < m; ++i) ys[i] = 1.f / (1.f + vexp(-xs[i]));
        break;
      case UnaryKind::kTanh:
        for (int64_t i = 0; i < m; ++i) ys[i] = std::tanh(xs[i]);
        break;
      case UnaryKind::kSqrt:
        for (int64_t i = 0; i < m; ++i) ys[i] = std::sqrt(xs[i]);
        break;
      case UnaryKind::kRsqrt:
        for (int64_t i = 0; i < m; ++i) ys[i] = 1.f / std::sqrt(xs[i]);
        break;
      case UnaryKind::kAbs:
        for (int64_t i = 0; i < m; ++i) ys[i] = std::fabs(xs[i]);
        break;
      case UnaryKind::kNeg:
        for (int64_t i = 0; i < m; ++i) ys[i] = -xs[i];
        break;
      case UnaryKind::kSquare:
        for (int64_t i = 0; i < m; ++i) ys[i] = xs[i] * xs[i];
        break;
      case UnaryKind::kFloor:
        for (int64_t i = 0; i < m; ++i) ys[i] = std::floor(xs[i]);
        break;
      case UnaryKind::kCeil:
        for (int64_t i = 0; i < m; ++i) ys[i] = std::ceil(xs[i]);
        break;
      case UnaryKind::kExp:
        for (int64_t i = 0; i < m; ++i) ys[i] = std::exp(xs[i]);
        break;
      case UnaryKind::kLog:
        for (int64_t i = 0; i < m; ++i) ys[i] = std::log(xs[i]);
        break;
      case UnaryKind::kSin:
        for (int64_t i = 0; i < m; ++i) ys[i] = std::sin(xs[i]);
        break;
      case UnaryKind::kCos:
        for (int64_t i = 0; i < m; ++i) ys[i] = std::cos(xs[i]);
        break;
      case UnaryKind::kElu:
        for (int64_t i = 0; i < m; ++i) ys[i] = xs[i] > 0 ? xs[i] : alpha * std::expm1(xs[i]);
        break;
      case UnaryKind::kLeakyRelu:
        for (int64_t i = 0; i < m; ++i) ys[i] = xs[i] > 0 ? xs[i] : alpha * xs[i];
        break;
      case UnaryKind::kGelu: break;
    }
    if (lo > -INFINITY || hi < INFINITY) {
      for (int64_t i = 0; i < m; ++i) ys[i] = clampf(ys[i], lo, hi);
    }
  });
}

// XNNPACK's QS8 add / subtract (fixed point) and multiply (float32 scale) with broadcasting.
void qs8_binary(BinaryKind kind, const Qs8BinaryParams& p, int rank, const int64_t* a_dims, const int8_t* a,
                const int64_t* b_dims, const int8_t* b, const int64_t* out_dims, int8_t* out, int32_t a_zp,
                int32_t b_zp, int32_t out_zp, int8_t qmin, int8_t qmax) {
  const int32_t lo = qmin - out_zp, hi = qmax - out_zp;
  if (kind == BinaryKind::kMul) {
    constexpr float kMagic = 12582912.f;  // round half to even, as quantize()
    const float flo = static_cast<float>(lo), fhi = static_cast<float>(hi), scale = p.scale;
    broadcast_loop(rank, a_dims, a, b_dims, b, out_dims, out, [=](int8_t x, int8_t y) {
      float v = static_cast<float>((int32_t(x) - a_zp) * (int32_t(y) - b_zp)) * scale;
      v = (std::min(std::max(v, flo), fhi) + kMagic) - kMagic;
      return static_cast<int8_t>(static_cast<int32_t>(v) + out_zp);
    });
    return;
  }
  broadcast_loop(rank, a_dims, a, b_dims, b, out_dims, out, [=](int8_t x, int8_t y) {
    const int32_t v = (int32_t(x) * p.a_mul + int32_t(y) * p.b_mul + p.bias) >> p.shift;
    return static_cast<int8_t>(std::min(std::max(v, lo), hi) + out_zp);
  });
}

kernels::cpu::Qs8AddQuant add_quant(const Op& op, const Plan& plan) {
  const Value& a = plan.values[op.in[0]];
  const Value& b = plan.values[op.in[1]];
  const Value& y = plan.values[op.out];
  kernels::cpu::Qs8AddQuant q;
  q.a_scale = a.scale, q.a_zero_point = a.zero_point;
  q.b_scale = b.scale, q.b_zero_point = b.zero_point;
  q.out_scale = y.scale, q.out_zero_point = y.zero_point;
  return q;
}

// ---- the node kinds -------------------------------------------------------------------------

Error infer_binary(const Op& op, Plan& plan) {
  const Value& a = plan.values[op.in[0]];
  const Value& b = plan.values[op.in[1]];
  const int rank = std::max(a.rank, b.rank);
  int64_t dims[kMaxDims];
  ET_TRY(broadcast_shape(op, a, b, rank, dims));
  return set_out(op, plan, rank, dims);
}

Error infer_same(const Op& op, Plan& plan) {
  const Value& a = plan.values[op.in[0]];
  ET_CHECK_OR_RETURN(op.kind != OpKind::kSoftmax || a.rank >= 1, InvalidProgram,
                     "XnnpackBackend: node %u (%s) on a scalar", op.node_index, op.name);
  return set_out(op, plan, a.rank, a.dims);
}

Error run_binary(const Op& op, Plan& plan, const float* const* in, float* o, float*) {
  const Value& out = plan.values[op.out];
  int64_t ad[kMaxDims], bd[kMaxDims];
  broadcast_dims(out.rank, plan.values[op.in[0]], plan.values[op.in[1]], ad, bd);
  binary_kernel(static_cast<BinaryKind>(op.sub), out.rank, ad, in[0], bd, in[1], out.dims, o, op.out_min, op.out_max);
  return Error::Ok;
}

Error run_binary_qs8(const Op& op, Plan& plan) {
  namespace cpu = kernels::cpu;
  const Value& a = plan.values[op.in[0]];
  const Value& b = plan.values[op.in[1]];
  Value& out = plan.values[op.out];
  const int8_t* x = static_cast<const int8_t*>(a.data);
  const int8_t* y = static_cast<const int8_t*>(b.data);
  int8_t* z = static_cast<int8_t*>(out.data);
  const BinaryKind kind = static_cast<BinaryKind>(op.sub);
  if (kind == BinaryKind::kAdd && b.rank == a.rank && std::equal(a.dims, a.dims + a.rank, b.dims) &&
      cpu::add_qs8(a.numel(), x, y, z, add_quant(op, plan), op.qmin, op.qmax, cpu::best_int8_isa())) {
    return Error::Ok;
  }
  int64_t ad[kMaxDims], bd[kMaxDims];
  broadcast_dims(out.rank, a, b, ad, bd);
  Qs8BinaryParams p;
  p.a_mul = static_cast<int32_t>(op.params[0]), p.b_mul = static_cast<int32_t>(op.params[1]);
  p.shift = static_cast<int32_t>(op.params[2]), p.bias = static_cast<int32_t>(op.params[3]);
  p.scale = op.alpha;
  qs8_binary(kind, p, out.rank, ad, x, bd, y, out.dims, z, a.zero_point, b.zero_point, out.zero_point, op.qmin,
             op.qmax);
  return Error::Ok;
}

Error run_unary(const Op& op, Plan& plan, const float* const* in, float* o, float*) {
  unary_kernel(static_cast<UnaryKind>(op.sub), in[0], o, plan.values[op.in[0]].numel(), op.alpha, op.out_min,
               op.out_max);
  return Error::Ok;
}

// A clamp in one quantization: the integers clamped.
Error run_clamp_qs8(const Op& op, Plan& plan) {
  const Value& a = plan.values[op.in[0]];
  const int8_t* x = static_cast<const int8_t*>(a.data);
  int8_t* y = static_cast<int8_t*>(plan.values[op.out].data);
  const int64_t n = a.numel();
  for (int64_t i = 0; i < n; ++i) y[i] = std::min(std::max(x[i], op.qmin), op.qmax);
  return Error::Ok;
}

Error run_softmax(const Op& op, Plan& plan, const float* const* in, float* o, float*) {
  const Value& a = plan.values[op.in[0]];
  const int64_t n = a.dims[a.rank - 1];
  kernels::cpu::softmax(in[0], o, n ? a.numel() / n : 0, n, 1, false);
  return Error::Ok;
}

const OpImpl kBinary = {false, infer_binary, nullptr, run_binary, nullptr, run_binary_qs8};
const OpImpl kUnary = {false, infer_same, nullptr, run_unary, nullptr, run_clamp_qs8};
const OpImpl kSoftmax = {false, infer_same, nullptr, run_softmax, nullptr, nullptr};
// The float view of the input, stored in the output's type (run_float null: the identity).
const OpImpl kConvert = {false, infer_same, nullptr, nullptr, nullptr, nullptr};

Error define_binary(NodeContext& ctx, Op& op, BinaryKind k, const fb::_XNNNode2x1* n) {
  op.kind = OpKind::kBinary, op.impl = &kBinary;
  op.sub = static_cast<uint8_t>(k);
  op.flags = n->flags();
  ET_TRY(two_inputs(ctx, op, n));
  // XNNPACK defines an elementwise binary node only over one datatype (inputs and output): an int8
  // operand beside a float one is refused at load by the published runtime, and here too.
  const DType a = ctx.value(op.in[0]).dtype, b = ctx.value(op.in[1]).dtype, y = ctx.value(op.out).dtype;
  ET_CHECK_OR_RETURN(k == BinaryKind::kPrelu || (a == b && a == y), InvalidProgram,
                     "XnnpackBackend: node %u (%s) mixes datatypes (inputs %s and %s, output %s); XNNPACK defines "
                     "a binary node over one datatype (a Convert changes it)",
                     op.node_index, op.name, dtype_name(a), dtype_name(b), dtype_name(y));
  return Error::Ok;
}

template <typename T>
Error define_unary(NodeContext& ctx, Op& op, UnaryKind k, const T* n, float alpha = 0.f) {
  op.kind = OpKind::kUnary, op.impl = &kUnary;
  op.sub = static_cast<uint8_t>(k);
  op.alpha = alpha;
  return one_input(ctx, op, n);
}

}  // namespace

bool define_elementwise(NodeContext& ctx, const fb::XNode* node, Op& op, Error* err) {
  using U = fb::XNodeUnion;
  using B = BinaryKind;
  using K = UnaryKind;
  switch (node->xnode_union_type()) {
    case U::XNNAdd: *err = define_binary(ctx, op, B::kAdd, node->xnode_union_as_XNNAdd()); break;
    case U::XNNSubtract: *err = define_binary(ctx, op, B::kSub, node->xnode_union_as_XNNSubtract()); break;
    case U::XNNMultiply: *err = define_binary(ctx, op, B::kMul, node->xnode_union_as_XNNMultiply()); break;
    case U::XNNDiv: *err = define_binary(ctx, op, B::kDiv, node->xnode_union_as_XNNDiv()); break;
    case U::XNNMinimum: *err = define_binary(ctx, op, B::kMin, node->xnode_union_as_XNNMinimum()); break;
    case U::XNNMaximum: *err = define_binary(ctx, op, B::kMax, node->xnode_union_as_XNNMaximum()); break;
    case U::XNNPReLU: *err = define_binary(ctx, op, B::kPrelu, node->xnode_union_as_XNNPReLU()); break;
    case U::XNNClamp: *err = define_unary(ctx, op, K::kClamp, node->xnode_union_as_XNNClamp()); break;
    case U::XNNHardswish: *err = define_unary(ctx, op, K::kHardswish, node->xnode_union_as_XNNHardswish()); break;
    case U::XNNSigmoid: *err = define_unary(ctx, op, K::kSigmoid, node->xnode_union_as_XNNSigmoid()); break;
    case U::XNNTanh: *err = define_unary(ctx, op, K::kTanh, node->xnode_union_as_XNNTanh()); break;
    case U::XNNGelu: *err = define_unary(ctx, op, K::kGelu, node->xnode_union_as_XNNGelu()); break;
    case U::XNNSquareRoot: *err = define_unary(ctx, op, K::kSqrt, node->xnode_union_as_XNNSquareRoot()); break;
    case U::XNNReciprocalSquareRoot:
      *err = define_unary(ctx, op, K::kRsqrt, node->xnode_union_as_XNNReciprocalSquareRoot());
      break;
    case U::XNNAbs: *err = define_unary(ctx, op, K::kAbs, node->xnode_union_as_XNNAbs()); break;
    case U::XNNNegate: *err = define_unary(ctx, op, K::kNeg, node->xnode_union_as_XNNNegate()); break;
    case U::XNNSquare: *err = define_unary(ctx, op, K::kSquare, node->xnode_union_as_XNNSquare()); break;
    case U::XNNFloor: *err = define_unary(ctx, op, K::kFloor, node->xnode_union_as_XNNFloor()); break;
    case U::XNNCeiling: *err = define_unary(ctx, op, K::kCeil, node->xnode_union_as_XNNCeiling()); break;
    case U::XNNExp: *err = define_unary(ctx, op, K::kExp, node->xnode_union_as_XNNExp()); break;
    case U::XNNLog: *err = define_unary(ctx, op, K::kLog, node->xnode_union_as_XNNLog()); break;
    case U::XNNSin: *err = define_unary(ctx, op, K::kSin, node->xnode_union_as_XNNSin()); break;
    case U::XNNCos: *err = define_unary(ctx, op, K::kCos, node->xnode_union_as_XNNCos()); break;
    case U::XNNELU: {
      const fb::XNNELU* n = node->xnode_union_as_XNNELU();
      *err = define_unary(ctx, op, K::kElu, n, n->alpha());
      break;
    }
    case U::XNNLeakyReLU: {
      const fb::XNNLeakyReLU* n = node->xnode_union_as_XNNLeakyReLU();
      *err = define_unary(ctx, op, K::kLeakyRelu, n, n->negative_slope());
      break;
    }
    case U::XNNSoftmax:
      op.kind = OpKind::kSoftmax, op.impl = &kSoftmax;
      *err = one_input(ctx, op, node->xnode_union_as_XNNSoftmax());
      break;
    case U::XNNConvert:
      op.kind = OpKind::kConvert, op.impl = &kConvert;
      *err = one_input(ctx, op, node->xnode_union_as_XNNConvert());
      break;
    default: return false;
  }
  return true;
}

Qs8BinaryParams qs8_binary_params(BinaryKind kind, const Value& a, const Value& b, const Value& y) {
  Qs8BinaryParams p;
  if (kind == BinaryKind::kMul) {
    p.scale = a.scale * b.scale / y.scale;
    p.ok = std::isfinite(p.scale) && p.scale > 0.f;
    return p;
  }
  const float ra = a.scale / y.scale, rb = (kind == BinaryKind::kSub ? -1.f : 1.f) * (b.scale / y.scale);
  const float top = std::max(std::fabs(ra), std::fabs(rb));
  int exponent = 0;
  std::frexp(top, &exponent);
  p.shift = 21 - exponent;
  if (!std::isfinite(top) || p.shift < 12 || p.shift > 30) return p;
  p.a_mul = static_cast<int32_t>(std::nearbyint(std::ldexp(double(ra), p.shift)));
  p.b_mul = static_cast<int32_t>(std::nearbyint(std::ldexp(double(rb), p.shift)));
  p.bias = (int32_t(1) << (p.shift - 1)) - p.a_mul * a.zero_point - p.b_mul * b.zero_point;
  p.ok = true;
  return p;
}

}  // namespace xnnpack
}  // namespace backends
}  // namespace executorch
