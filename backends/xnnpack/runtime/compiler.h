// compile(): an XNNPACK graph (verified payload) into a Plan on our kernels, checking every id,
// shape, offset and size the file gives.
#pragma once

#include "backends/xnnpack/runtime/payload.h"
#include "backends/xnnpack/runtime/plan.h"
#include "runtime/core/error.h"
#include "runtime/core/named_data_map.h"

namespace executorch {
namespace backends {
namespace xnnpack {

// Builds `plan` from `payload`; constants come from the payload's constant region, the program's
// named data (`named_data`, may be null when the payload names no keys) or the legacy inline
// buffers. Unsupported node kinds or datatypes fail with NotImplemented, naming them.
runtime::Error compile(const Payload& payload, const runtime::NamedDataMap* named_data, Plan* plan);

}  // namespace xnnpack
}  // namespace backends
}  // namespace executorch
