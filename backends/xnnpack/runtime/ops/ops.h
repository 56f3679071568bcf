// The XNNPACK operators, one file per family (conv, gemm, elementwise, pool, shape), each holding
// for its node kinds all the runtime knows of them: how a node is read from the payload into an Op
// (define), its output shape for a call (infer), the scratch its float kernel needs, and how it runs
// (on floats, on its operands' own bytes, or on the int8 kernels). The compiler and the executor
// are generic: they call a family's define step for each node and the OpImpl it sets after that.
// Adding an operator to a family touches that family's file; a new family adds its define step to
// kFamilies in compiler.cpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "backends/xnnpack/runtime/plan.h"
#include "kernels/cpu/conv_nhwc.h"
#include "kernels/cpu/gemm.h"
#include "runtime/core/error.h"
#include "xnnpack/schema_generated.h"

namespace executorch {
namespace backends {
namespace xnnpack {

namespace fb = fb_xnnpack;
using runtime::Error;

// Node flags of the format.
constexpr uint32_t kFlagTransposeWeights = 1;  // fully connected: filter is [in, out]; bmm: B is [.., n, k]
constexpr uint32_t kFlagSamePadding = 4;  // convolution/pooling: TensorFlow SAME padding
constexpr uint32_t kFlagKeepDims = 0x40;
// Largest element count of any one value: far above any real model, low enough that byte counts
// computed from it cannot overflow.
constexpr int64_t kMaxNumel = int64_t(1) << 40;
// Largest kernel size, stride, dilation, padding or channel count of a window op.
constexpr int64_t kMaxWindow = int64_t(1) << 20;
// Elements per parallel task of a loop over rows, and of a flat elementwise loop (small enough that
// a 7x7 or 14x14 feature map splits into several tasks).
constexpr int64_t kGrain = int64_t(1) << 14;
constexpr int64_t kFlatGrain = int64_t(1) << 12;

// What the compiler offers a family's define step: the payload's value ids turned into plan values,
// checked (defined before read, written once), and constant weights.
class NodeContext {
 public:
  // Appends value `id` to op.in (`role` names it in messages).
  virtual Error input(Op& op, uint32_t id, const char* role) = 0;
  // Makes value `id` op.out.
  virtual Error output(Op& op, uint32_t id) = 0;
  // The plan value of payload id `id`, without wiring it.
  virtual Error lookup(uint32_t id, const Op& op, const char* role, uint32_t* index) = 0;
  // Records the constant filter (out_channels x per_channel elements) and optional bias of a
  // convolution or fully connected layer; the compiler decodes or packs them once kernels are chosen.
  virtual Error weights(Op& op, uint32_t filter_id, uint32_t bias_id, int64_t out_channels, int64_t per_channel) = 0;
  virtual Value& value(uint32_t index) = 0;

 protected:
  ~NodeContext() = default;
};

// How ops of one kind run; the executor calls infer(), then one of the run steps:
// - Op::compute != kFloat: run_int8 (compile() chose the int8 kernels).
// - moves_bytes: run_bytes on the operands' own element type (`elem` bytes each); an input in
//   another type or quantization is converted to the output's into scratch first.
// - otherwise run_float on float views of the operands (quantized ones dequantized into scratch),
//   `out` being the output or, for a quantized output, scratch the executor requantizes from. A
//   null run_float is the identity (a Convert: the float input, stored in the output's type).
struct OpImpl {
  bool moves_bytes;
  Error (*infer)(const Op& op, Plan& plan);
  // Floats of workspace the float kernel needs for the current shapes (null: none).
  size_t (*workspace_floats)(const Op& op, const Plan& plan);
  Error (*run_float)(const Op& op, Plan& plan, const float* const* in, float* out, float* ws);
  Error (*run_bytes)(const Op& op, Plan& plan, const void* const* in, size_t elem);
  Error (*run_int8)(const Op& op, Plan& plan);
};

// A family's define step: for a node of one of its kinds, fills `op` (kind, impl, parameters,
// operands; node_index, name and output bounds are set) and returns true with *err set; returns
// false, touching nothing, for other kinds.
using DefineStep = bool (*)(NodeContext& ctx, const fb::XNode* node, Op& op, Error* err);
bool define_conv(NodeContext& ctx, const fb::XNode* node, Op& op, Error* err);
bool define_gemm(NodeContext& ctx, const fb::XNode* node, Op& op, Error* err);
bool define_elementwise(NodeContext& ctx, const fb::XNode* node, Op& op, Error* err);
bool define_pool(NodeContext& ctx, const fb::XNode* node, Op& op, Error* err);
bool define_shape(NodeContext& ctx, const fb::XNode* node, Op& op, Error* err);

// A depthwise convolution and the pointwise one reading its output (Op::fuse_next), in one call.
Error run_dw_pw(const Op& dw, const Op& pw, Plan& plan);

// XNNPACK's QS8 elementwise arithmetic. Add / subtract: fixed point, multipliers of 20 bits for the
// input/output scale ratios (b's negated to subtract), a shift and a bias holding the zero points
// and the rounding. Multiply: the centred integers' exact product times a_scale * b_scale /
// out_scale in float32, rounded half to even. `ok` is false for scale ratios XNNPACK refuses.
struct Qs8BinaryParams {
  bool ok = false;
  int32_t a_mul = 0, b_mul = 0, shift = 0, bias = 0;
  float scale = 0.f;
};
Qs8BinaryParams qs8_binary_params(BinaryKind kind, const Value& a, const Value& b, const Value& y);

// ---- shared by the families (common.cpp) ------------------------------------------------------

inline float clampf(float v, float lo, float hi) { return std::min(std::max(v, lo), hi); }
const char* dtype_name(DType t);
bool is_quantized(DType t);
// An output bound (float) in `v`'s integers, as XNNPACK quantizes fused activation bounds.
int8_t qbound(float x, const Value& v, bool upper);
// Rows of a kQD8 value at `dims` (one scale and zero point each).
int64_t qd8_rows(const Value& v, const int64_t* dims);

// Sets op.out's dims for this call, checked against its rank and upper-bound storage.
Error set_out(const Op& op, Plan& plan, int rank, const int64_t* dims);
Error check_nhwc(const Op& op, const Value& in);
// The NHWC output [N, OH, OW, out_c] of a window op (convolution, pooling) over op.in[0].
Error window_shape(const Op& op, Plan& plan, int64_t out_c);
// Kernel, stride and dilation in 1..2^20, pads in 0..2^20.
Error check_window(const Op& op, const ConvParams& p);
// A list of dims from the payload (at most kMaxDims entries of at most kMaxNumel) into dst; sets op.n_params.
Error dims_param(Op& op, const flatbuffers::Vector<uint32_t>* v, int64_t* dst, const char* what);
// Inputs and output of a node with one or two inputs.
template <typename T>
Error one_input(NodeContext& ctx, Op& op, const T* n) {
  ET_TRY(ctx.input(op, n->input_id(), "input"));
  return ctx.output(op, n->output_id());
}
template <typename T>
Error two_inputs(NodeContext& ctx, Op& op, const T* n) {
  ET_TRY(ctx.input(op, n->input1_id(), "first input"));
  ET_TRY(ctx.input(op, n->input2_id(), "second input"));
  return ctx.output(op, n->output_id());
}

// The micro-kernels' description of a convolution or pooling window.
kernels::cpu::ConvNhwc to_conv_nhwc(const ConvParams& p);
// Output length of a window sweep (convolution or pooling); < 1 when the input is too small.
int64_t window_out(int64_t in, int64_t pad_before, int64_t pad_after, int64_t kernel, int64_t dilation, int64_t stride);
// dims[0, count) = the broadcast of a's and b's dims right-aligned to max(a.rank, b.rank) (1 where
// missing), checked; count < that rank leaves out the trailing dims (a batched matmul's matrices).
Error broadcast_shape(const Op& op, const Value& a, const Value& b, int count, int64_t* dims);
// Dims of a and b right-aligned to `rank` (1 where missing), for broadcasting.
void broadcast_dims(int rank, const Value& a, const Value& b, int64_t* ad, int64_t* bd);

// c[m, n] = a[m, k] (row stride lda) x b, on the GEMV or GEMM kernel; gemm_scratch floats of scratch.
void gemm_rows(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, kernels::cpu::ConstMatrix b, float* c,
               int64_t ldc, float* scratch);
size_t gemm_scratch(int64_t m, int64_t n, int64_t k);
// out[r, c] = clamp(out[r, c] + bias[c]) over a row-major [rows, cols] block with row stride ld.
void bias_clamp(float* out, int64_t rows, int64_t cols, int64_t ld, const float* bias, float lo, float hi);

// Quantization: round half to even, saturating to [qmin, qmax].
void quantize(const float* x, int64_t n, float scale, int32_t zero_point, int32_t qmin, int32_t qmax, void* out,
              bool is_signed);
void dequantize(const void* q, int64_t n, float scale, int32_t zero_point, bool is_signed, float* out);
// Per-row asymmetric int8 with the row's range widened to include 0.
void quantize_rows(const float* x, int64_t rows, int64_t cols, int8_t* out, float* scale, int32_t* zero_point);
void dequantize_rows(const int8_t* q, int64_t rows, int64_t cols, const float* scale, const int32_t* zero_point,
                     float* out);

}  // namespace xnnpack
}  // namespace backends
}  // namespace executorch
