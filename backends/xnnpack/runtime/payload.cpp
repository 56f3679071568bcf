// Reads the XH00 header (layout: 4 bytes unused, "XH00", u16 header length, u32 flatbuffer offset,
// u32 flatbuffer size, u32 constant offset, u64 constant size; little-endian) and verifies the graph.
#include "backends/xnnpack/runtime/payload.h"

#include <cinttypes>
#include <cstring>

#include "xnnpack/schema_generated.h"

namespace executorch {
namespace backends {
namespace xnnpack {

using runtime::Error;
using runtime::Result;

namespace {

constexpr size_t kHeaderSize = 30;

uint64_t read_le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

Result<Payload> parse_payload(const void* data, size_t size) {
  const uint8_t* bytes = static_cast<const uint8_t*>(data);
  ET_CHECK_OR_RETURN(bytes != nullptr && size >= 8, InvalidProgram,
                     "XnnpackBackend: the payload is %zu bytes, too short for an XNNPACK graph; re-export the model",
                     size);
  Payload p{bytes, size, nullptr, 0};
  if (std::memcmp(bytes + 4, "XH00", 4) == 0) {
    ET_CHECK_OR_RETURN(size >= kHeaderSize, InvalidProgram,
                       "XnnpackBackend: the payload's XH00 header is cut off (%zu of %zu bytes); re-export the model",
                       size, kHeaderSize);
    const uint64_t header_len = read_le(bytes + 8, 2);
    const uint64_t fb_off = read_le(bytes + 10, 4), fb_size = read_le(bytes + 14, 4);
    const uint64_t cd_off = read_le(bytes + 18, 4), cd_size = read_le(bytes + 22, 8);
    ET_CHECK_OR_RETURN(header_len >= kHeaderSize && header_len <= fb_off, InvalidProgram,
                       "XnnpackBackend: XH00 header length %" PRIu64 " is invalid (flatbuffer at %" PRIu64
                       "); the payload is corrupt",
                       header_len, fb_off);
    ET_CHECK_OR_RETURN(fb_off <= size && fb_size <= size - fb_off, InvalidProgram,
                       "XnnpackBackend: XH00 flatbuffer [%" PRIu64 ", +%" PRIu64 ") lies outside the %zu-byte payload",
                       fb_off, fb_size, size);
    ET_CHECK_OR_RETURN(cd_off <= size && cd_size <= size - cd_off, InvalidProgram,
                       "XnnpackBackend: XH00 constant data [%" PRIu64 ", +%" PRIu64
                       ") lies outside the %zu-byte payload",
                       cd_off, cd_size, size);
    ET_CHECK_OR_RETURN(cd_off >= fb_off + fb_size, InvalidProgram,
                       "XnnpackBackend: XH00 constant data at %" PRIu64 " overlaps the flatbuffer [%" PRIu64
                       ", +%" PRIu64 ")",
                       cd_off, fb_off, fb_size);
    p.flatbuffer = bytes + fb_off;
    p.flatbuffer_size = static_cast<size_t>(fb_size);
    p.constant_data = bytes + cd_off;
    p.constant_data_size = cd_size;
  }
  ET_CHECK_OR_RETURN(p.flatbuffer_size >= 8, InvalidProgram,
                     "XnnpackBackend: the XNNPACK flatbuffer is %zu bytes, too short", p.flatbuffer_size);
  const char* ident = flatbuffers::GetBufferIdentifier(p.flatbuffer);
  ET_CHECK_OR_RETURN(std::memcmp(ident, "XN00", 4) == 0 || std::memcmp(ident, "XN01", 4) == 0,
                     DelegateInvalidCompatibility,
                     "XnnpackBackend: the graph's identifier is '%.4s', not XN00 or XN01: a format this runtime "
                     "does not read; export with a matching ExecuTorch",
                     ident);
  flatbuffers::Verifier verifier(p.flatbuffer, p.flatbuffer_size);
  ET_CHECK_OR_RETURN(verifier.VerifyBuffer<fb_xnnpack::XNNGraph>(nullptr), InvalidProgram,
                     "XnnpackBackend: the XNNPACK graph fails flatbuffer verification (truncated or corrupt)");
  return p;
}

}  // namespace xnnpack
}  // namespace backends
}  // namespace executorch
