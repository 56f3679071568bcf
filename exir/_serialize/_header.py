"""The `.pte` extended header: 32 bytes placed right after the FlatBuffer file identifier.

Layout (little endian): magic b"eh00", u32 header length, u64 program size (FlatBuffer
bytes including this header), u64 offset of the first segment (0 when there are none),
u64 total size of the segment data.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import ClassVar, Optional

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


@dataclass
class _ExtendedHeader:
    """ExecuTorch's name for the extended header, as its tools use it: `from_bytes` reads the
    fields from the bytes that follow the file identifier without judging them (`is_valid` does),
    `to_bytes` writes the 32 header bytes (always with the right magic and length)."""

    program_size: int
    segment_base_offset: int
    segment_data_size: int
    magic: bytes = HEADER_MAGIC
    length: int = HEADER_LENGTH

    EXPECTED_MAGIC: ClassVar[bytes] = HEADER_MAGIC
    EXPECTED_LENGTH: ClassVar[int] = HEADER_LENGTH
    MINIMUM_LENGTH: ClassVar[int] = _MIN_HEADER_LENGTH
    # How many bytes from the start of a file a reader needs to find and read the header.
    NUM_HEAD_BYTES: ClassVar[int] = 64

    @staticmethod
    def from_bytes(data: bytes) -> "_ExtendedHeader":
        """The header fields in `data` (the bytes after the file identifier); ValueError if short."""
        if len(data) < HEADER_LENGTH:
            raise ValueError(f"extended header needs {HEADER_LENGTH} bytes, got {len(data)}")
        magic, length, program_size, segment_base = struct.unpack_from("<4sIQQ", data, 0)
        segment_size = struct.unpack_from("<Q", data, 24)[0] if length > _MIN_HEADER_LENGTH else 0
        return _ExtendedHeader(program_size, segment_base, segment_size, bytes(magic), length)

    def is_valid(self) -> bool:
        return self.magic == HEADER_MAGIC and self.length >= _MIN_HEADER_LENGTH

    def to_bytes(self) -> bytes:
        return ExtendedHeader(self.program_size, self.segment_base_offset, self.segment_data_size).encode(HEADER_LENGTH)


def _get_extended_header(program_data: bytes) -> Optional[_ExtendedHeader]:
    """The extended header of a `.pte` image when it has a well-formed one, else None."""
    try:
        header = _ExtendedHeader.from_bytes(program_data[HEADER_OFFSET:HEADER_OFFSET + HEADER_LENGTH])
    except ValueError:
        return None
    return header if header.is_valid() else None
