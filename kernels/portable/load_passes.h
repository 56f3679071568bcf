// The portable kernels' load passes (runtime/core/load_pass.h), run in the order load_passes.cpp
// lists them: each may rely on what the earlier ones did.
#pragma once

#include <cstdint>

#include "runtime/core/load_pass.h"

namespace executorch {
namespace kernels {

// Each returns how many instructions (tensors) it changed.

// int8_chains.cpp: an int8 program's dequantize -> op -> quantize chains (2-D
// convolution with per-channel int8 weights, ReLU/hardtanh/clamp, add) run as int8 kernels on
// the int8 tensors; counts the chains. Runs before the dequantize pass, whose work it saves.
size_t run_int8_chains(runtime::MethodRewriter& m);
// The kernels run_int8_chains() installs: a convolution over NHWC int8 tensors (NCHW ones go
// through temp memory, as for packed float convolutions), and elementwise ones that take any
// layout their tensors share.
bool is_int8_conv_kernel(runtime::OpFunction op);
bool is_int8_elementwise_kernel(runtime::OpFunction op);

// op_quantize.cpp: per-tensor 8-bit quantize of one value, exactly as quantize_per_tensor
// computes each element.
int32_t quantize_8bit_value(float x, double scale, int64_t zero_point, int64_t quant_min, int64_t quant_max);

// op_quantize.cpp: dequantize ops of constants run once at load.
size_t dequantize_constants_once(runtime::MethodRewriter& m);
// op_linear.cpp: a constant linear weight's permute_copy read as a transposed view.
size_t read_weight_transposes_in_place(runtime::MethodRewriter& m);
// op_convolution.cpp: 2-D float32 convolutions run the channels-last kernels on weights packed at
// load, with a following batch norm and ReLU/hardtanh/clamp folded in (counted in `folded`).
size_t pack_convolutions(runtime::MethodRewriter& m, size_t* folded);
// op_convolution.cpp: the tensors between packed convolutions (through adds and activations)
// become channels-last.
size_t channels_last_conv_chains(runtime::MethodRewriter& m);

}  // namespace kernels
}  // namespace executorch
