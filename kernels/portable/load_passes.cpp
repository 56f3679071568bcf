// Registers the portable kernels' load passes as one, so their order is fixed.
#include "kernels/portable/load_passes.h"

namespace executorch {
namespace kernels {
namespace {

void portable_load_passes(runtime::MethodRewriter& m) {
  const size_t dequantized = dequantize_constants_once(m);
  read_weight_transposes_in_place(m);
  if (dequantized > 0) ET_LOG(Info, "load passes: %zu dequantizes run at load", dequantized);
}

ET_REGISTER_LOAD_PASS(portable_load_passes);

}  // namespace
}  // namespace kernels
}  // namespace executorch
