// The portable kernels' load passes (runtime/core/load_pass.h), run in the order load_passes.cpp
// lists them: each may rely on what the earlier ones did.
#pragma once

#include "runtime/core/load_pass.h"

namespace executorch {
namespace kernels {

// Each returns how many instructions (tensors) it changed.

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
