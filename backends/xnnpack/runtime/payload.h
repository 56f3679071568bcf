// The XNNPACK delegate payload's framing: the optional XH00 header and the flatbuffer it points at.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/core/result.h"

namespace executorch {
namespace backends {
namespace xnnpack {

// The parts of one payload, each a view into it (bounds already checked).
struct Payload {
  const uint8_t* flatbuffer;
  size_t flatbuffer_size;
  // The constant region of an XH00 payload; null for a bare flatbuffer (older files keep their
  // constants inside the flatbuffer).
  const uint8_t* constant_data;
  uint64_t constant_data_size;
};

// Splits `data` into its flatbuffer and constant region: an XH00 header (magic at byte 4, where a
// flatbuffer keeps its identifier) or a bare XN00/XN01 flatbuffer. The flatbuffer is verified and
// must carry the identifier XN00 or XN01.
runtime::Result<Payload> parse_payload(const void* data, size_t size);

}  // namespace xnnpack
}  // namespace backends
}  // namespace executorch
