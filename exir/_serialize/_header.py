"""The `.pte` extended header: 32 bytes placed right after the FlatBuffer file identifier.

Layout (little endian): magic b"eh00", u32 header length, u64 program size (FlatBuffer
bytes including this header), u64 offset of the first segment (0 when there are none),
u64 total size of the segment data.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Optional

from executorch.exir.error import SerializeError

HEADER_MAGIC = b"eh00"
HEADER_OFFSET = 8  # after the root table offset and the file identifier
HEADER_LENGTH = 32
# Older writers stopped after the segment base offset; a reader accepts those.
_MIN_HEADER_LENGTH = 24
_LAYOUT = struct.Struct("<4sIQQQ")


@dataclass(frozen=True)
class ExtendedHeader:
    program_size: int
    segment_base_offset: int
    segment_data_size: int

    def encode(self, padded_length: int) -> bytes:
        """The header bytes, zero-padded to `padded_length`."""
        data = _LAYOUT.pack(
            HEADER_MAGIC, HEADER_LENGTH, self.program_size, self.segment_base_offset, self.segment_data_size
        )
        return data + bytes(padded_length - HEADER_LENGTH)


def decode_header(data: memoryview) -> Optional[ExtendedHeader]:
    """The extended header of a `.pte` image, or None when the file has none; validates it."""
    if bytes(data[HEADER_OFFSET : HEADER_OFFSET + 4]) != HEADER_MAGIC:
        return None
    if len(data) < HEADER_OFFSET + _MIN_HEADER_LENGTH:
        raise SerializeError(
            f"extended header is cut short: the file has {len(data)} bytes but the header needs "
            f"{HEADER_OFFSET + _MIN_HEADER_LENGTH}; the file is truncated, re-export or re-copy it"
        )
    (length,) = struct.unpack_from("<I", data, HEADER_OFFSET + 4)
    program_size, segment_base = struct.unpack_from("<QQ", data, HEADER_OFFSET + 8)
    if length < _MIN_HEADER_LENGTH:
        raise SerializeError(
            f"extended header length {length} is below the minimum {_MIN_HEADER_LENGTH}; "
            "the file is corrupt, re-export it"
        )
    segment_size = 0
    if length >= HEADER_LENGTH:
        if len(data) < HEADER_OFFSET + HEADER_LENGTH:
            raise SerializeError(
                f"extended header is cut short: the file has {len(data)} bytes but the header needs "
                f"{HEADER_OFFSET + HEADER_LENGTH}; the file is truncated, re-export or re-copy it"
            )
        (segment_size,) = struct.unpack_from("<Q", data, HEADER_OFFSET + 24)
    size = len(data)
    if not HEADER_OFFSET + length <= program_size <= size:
        raise SerializeError(
            f"extended header gives program size {program_size}, outside [{HEADER_OFFSET + length}, "
            f"{size}] for this {size}-byte file; the file is truncated or corrupt, re-export it"
        )
    if segment_base and not program_size <= segment_base <= size:
        raise SerializeError(
            f"extended header gives segment base offset {segment_base}, outside [{program_size}, {size}] "
            f"for this {size}-byte file; the file is truncated or corrupt, re-export it"
        )
    if segment_base + segment_size > size:
        raise SerializeError(
            f"extended header says {segment_size} bytes of segment data start at {segment_base}, past the "
            f"end of this {size}-byte file; the file is truncated, re-export or re-copy it"
        )
    return ExtendedHeader(program_size, segment_base, segment_size)
