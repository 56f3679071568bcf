// The compiled form of an XNNPACK graph: values (shapes, storage) and ops on our kernels, made once
// by compile() at init and run by execute() with no allocation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace executorch {
namespace backends {
namespace xnnpack {

constexpr int kMaxDims = 6;
constexpr uint32_t kNoValue = 0xFFFFFFFFu;

// Element types the plan computes with. Quantized values keep their parameters on the Value.
enum class DType : uint8_t {
  kF32,
  kQS8,  // int8, per-tensor scale and zero point (static quantization)
  kQU8,  // uint8, per-tensor
  kQD8,  // int8 quantized at run time, one scale/zero point per row
  kI32,  // int32 (also qint32/qcint32 biases, which compile() folds into float)
};

size_t dtype_size(DType t);

struct Value;
// Rows of a kQD8 value at its upper-bound shape (one scale and zero point each).
int64_t qd8_rows_max(const Value& v);

struct Value {
  DType dtype = DType::kF32;
  int rank = 0;
  int64_t max_dims[kMaxDims] = {};  // the payload's dims: upper bounds for dynamic shapes
  int64_t dims[kMaxDims] = {};  // the dims of the current call
  float scale = 1.0f;  // kQS8/kQU8
  int32_t zero_point = 0;
  int32_t nonbatch_dims = 1;  // kQD8: trailing dims sharing one scale (a row)
  uint32_t external = kNoValue;  // index into the DelegateCall's arguments
  bool is_input = false, is_output = false;
  const void* constant = nullptr;  // constant values: compile()'s own copy (raw file layout)
  int64_t arena_offset = -1;  // internal values: where their bytes live in the arena
  size_t max_bytes = 0;
  // Current storage: the arena, a call argument, or the constant.
  void* data = nullptr;
  // kQD8 row parameters (arena), max_rows entries each.
  float* row_scale = nullptr;
  int32_t* row_zero_point = nullptr;
  int64_t row_params_offset = -1;

  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= dims[i];
    return n;
  }
  int64_t max_numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= max_dims[i];
    return n;
  }
};

enum class OpKind : uint8_t {
  kConv,  // NHWC convolution, groups >= 1, as im2col + GEMM
  kDepthwiseConv,  // NHWC depthwise convolution (channel multiplier >= 1)
  kConvTranspose,  // NHWC transposed convolution, OHWI filters
  kFullyConnected,
  kBinary,
  kUnary,
  kSoftmax,
  kTranspose,
  kCopy,  // reshape and copy: same bytes, new dims
  kSlice,
  kPad,
  kConcat,
  kMaxPool,
  kAvgPool,
  kGlobalAvgPool,
  kBatchMatMul,
  kConvert,
};

// How an op computes. kFloat: on the float kernels, quantized operands dequantized around them.
// kQs8 / kQd8: on the int8 kernels of kernels/cpu/quantized.h and pool_nhwc.h (static
// int8 activations; dynamically quantized float rows into a fully connected layer).
enum class Compute : uint8_t { kFloat, kQs8, kQd8 };

enum class BinaryKind : uint8_t { kAdd, kSub, kMul, kDiv, kMin, kMax, kPrelu };
enum class UnaryKind : uint8_t {
  kClamp,
  kHardswish,
  kSigmoid,
  kTanh,
  kGelu,
  kSqrt,
  kRsqrt,
  kAbs,
  kNeg,
  kSquare,
  kFloor,
  kCeil,
  kExp,
  kLog,
  kSin,
  kCos,
  kElu,
  kLeakyRelu,
};

struct ConvParams {
  int64_t pad_top, pad_left, pad_bottom, pad_right;
  int64_t kernel_h, kernel_w, stride_h, stride_w, dilation_h, dilation_w;
  int64_t groups, group_in, group_out;
  int64_t adj_h = 0, adj_w = 0;  // transposed convolution: extra rows/columns at the bottom/right
};

struct OpImpl;  // how ops of a kind run: ops/ops.h

struct Op {
  OpKind kind;
  const OpImpl* impl = nullptr;  // set by the kind's define step (ops/<family>.cpp)
  uint8_t sub = 0;  // BinaryKind / UnaryKind
  const char* name = "";  // the node kind, for messages
  uint32_t node_index = 0;
  uint32_t kind_ordinal = 0;  // this is the payload's n-th node of its kind: its event is "<kind> #<n>"
  uint32_t in[5] = {kNoValue, kNoValue, kNoValue, kNoValue, kNoValue};
  int n_in = 0;
  uint32_t out = kNoValue;
  float out_min = -__builtin_inff(), out_max = __builtin_inff();
  float alpha = 0.0f;  // elu alpha, leaky relu slope, pad value
  uint32_t flags = 0;
  ConvParams conv{};
  int64_t axis = 0;
  int n_params = 0;
  int64_t params[kMaxDims] = {};  // transpose perm, reshape shape, slice offsets, pad before
  int64_t params2[kMaxDims] = {};  // slice sizes, pad after
  // Weights of conv / depthwise / fully connected, in float, laid out for the kernel.
  const float* weights = nullptr;
  const float* bias = nullptr;
  // The same weights and bias packed once for the NHWC micro-kernels (kernels/cpu/conv_nhwc.h);
  // null where the op runs on the generic path instead.
  const void* packed = nullptr;
  Compute compute = Compute::kFloat;
  int8_t qmin = -128, qmax = 127;  // kQs8: out_min / out_max in the output's integers
  uint32_t filter = kNoValue, bias_value = kNoValue;  // the weight values (used at init)
  int64_t scratch_offset = 0;  // this op's scratch (inside the plan's scratch region)
  // A depthwise convolution whose output only the next op (a pointwise convolution, both float or
  // both QS8) reads: execute() runs the two as one kernel call (conv2d_nhwc_{f32,qs8}_dw_pw), and the output
  // value has no storage.
  bool fuse_next = false;
};

// Frees a block compile() allocated for packed weights or the arena: its own mapping (`mapped`
// bytes, munmap) or heap bytes (mapped == 0, delete[]).
struct BlockFree {
  size_t mapped = 0;
  void operator()(uint8_t* p) const;
};
using Block = std::unique_ptr<uint8_t, BlockFree>;

struct Plan {
  std::vector<Value> values;
  std::vector<Op> ops;
  std::vector<uint32_t> inputs, outputs;  // value indices of the external values, by external id
  uint32_t num_externs = 0;
  // Owned storage: constants and packed weights (made at init), arena for internal values and
  // scratch for ops (sized at init for the payload's upper-bound shapes).
  std::vector<std::unique_ptr<float[]>> owned_floats;
  std::vector<std::unique_ptr<uint8_t[]>> owned_bytes;
  Block packed_storage;  // every op's packed weights
  Block arena_storage;
  uint8_t* arena = nullptr;
  size_t arena_bytes = 0;
  uint8_t* scratch = nullptr;
  size_t scratch_bytes = 0;
};

}  // namespace xnnpack
}  // namespace backends
}  // namespace executorch
