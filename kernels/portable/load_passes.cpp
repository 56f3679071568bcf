// Registers the portable kernels' load passes as one, so their order is fixed.
#include "kernels/portable/load_passes.h"

namespace executorch {
namespace kernels {
namespace {

void portable_load_passes(runtime::MethodRewriter& m) {
  const size_t int8_chains = run_int8_chains(m);
  const size_t dequantized = dequantize_constants_once(m);
  read_weight_transposes_in_place(m);
  size_t folded = 0;
  const size_t packed = pack_convolutions(m, &folded);
  const size_t relabelled = channels_last_conv_chains(m);
  if (int8_chains + dequantized + packed > 0)
    ET_LOG(Info,
           "load passes: %zu dequantizes run at load, %zu convolutions packed (%zu ops folded), "
           "%zu tensors channels-last, %zu int8 chains",
           dequantized, packed, folded, relabelled, int8_chains);
}

ET_REGISTER_LOAD_PASS(portable_load_passes);

}  // namespace
}  // namespace kernels
}  // namespace executorch
