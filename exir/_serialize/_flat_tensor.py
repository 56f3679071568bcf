"""`.ptd` bytes <-> named tensor data: the flat-tensor FlatBuffer, its header and aligned segments.

File layout, as the published writer lays it out:

    [root offset][b"FT01"][header b"FH01", padded to 16][rest of the FlatBuffer]
    [zero padding to segment_alignment][segment 0][padding][segment 1]...

The header (little endian) holds its length (40), the FlatBuffer's offset (the padded header
length) and size (without the header), the segment base offset and the size of the segment data.
Segment data is passed through as views (tensor storage, bytes), never joined in memory.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import ClassVar, Optional

from executorch.exir import schema as s
from executorch.exir._dtypes import element_size
from executorch.exir._serialize._alignment import DEFAULT_SEGMENT_ALIGNMENT, aligned, check_alignment
from executorch.exir._serialize._flatbuffer_reader import _Corrupt, _Reader
from executorch.exir._serialize._flatbuffer_writer import _I8, _OFFSET, _U32, _U64, _Writer, as_byte_view
from executorch.exir._serialize._join import join_bytes
from executorch.exir._serialize.data_serializer import DataEntry, DataPayload, DataSerializer
from executorch.exir.error import SerializeError
from executorch.exir.tensor_layout import TensorLayout

FILE_IDENTIFIER = b"FT01"
_HEADER_OFFSET = 8
# The FlatBuffer's largest alignment; the header is padded to it so inserting it keeps alignment.
_FLATBUFFER_ALIGNMENT = 16
_VERSION = 0
_SCALAR_TYPES = {m.value: m for m in s.ScalarType}


@dataclass
class FlatTensorConfig:
    segment_alignment: int = DEFAULT_SEGMENT_ALIGNMENT


@dataclass
class FlatTensorHeader:
    """The header after the file identifier; offsets are from the start of the file."""

    EXPECTED_MAGIC: ClassVar[bytes] = b"FH01"
    EXPECTED_LENGTH: ClassVar[int] = 40
    _LAYOUT: ClassVar[struct.Struct] = struct.Struct("<4sIQQQQ")

    flatbuffer_offset: int
    flatbuffer_size: int
    segment_base_offset: int
    segment_data_size: int
    magic: bytes = EXPECTED_MAGIC
    length: int = EXPECTED_LENGTH

    @staticmethod
    def from_bytes(data) -> "FlatTensorHeader":
        """The header fields at the start of `data` (not validated: see `is_valid`)."""
        if len(data) < FlatTensorHeader.EXPECTED_LENGTH:
            raise ValueError(f"a flat-tensor header needs {FlatTensorHeader.EXPECTED_LENGTH} bytes, got {len(data)}")
        magic, length, fb_offset, fb_size, base, size = FlatTensorHeader._LAYOUT.unpack_from(data, 0)
        return FlatTensorHeader(fb_offset, fb_size, base, size, magic, length)

    def is_valid(self) -> bool:
        return self.magic == self.EXPECTED_MAGIC and self.length >= self.EXPECTED_LENGTH

    def to_bytes(self) -> bytes:
        return self._LAYOUT.pack(self.EXPECTED_MAGIC, self.EXPECTED_LENGTH, self.flatbuffer_offset,
                                 self.flatbuffer_size, self.segment_base_offset, self.segment_data_size)


@dataclass
class NamedTensorData:
    """One entry of a `.ptd`: its bytes (a view over the file) and, for tensors, their layout."""

    data: memoryview
    tensor_layout: Optional[TensorLayout]
    segment_index: int = 0


def serialize_ptd_chunks(payload: DataPayload, segment_alignment: int = DEFAULT_SEGMENT_ALIGNMENT) -> list:
    """The `.ptd` image of `payload` as pieces to write in order; buffers pass through as views."""
    check_alignment("segment_alignment", segment_alignment)
    segment_of: dict[int, int] = {}
    placed: list[tuple[memoryview, int]] = []  # (data, alignment) per segment
    named: list[tuple[str, int, Optional[TensorLayout]]] = []
    for key, entry in payload.named_data.items():
        check_alignment(f"alignment of {key!r}", entry.alignment)
        index = segment_of.get(entry.buffer_index)
        if index is None:
            if not 0 <= entry.buffer_index < len(payload.buffers):
                raise SerializeError(
                    f"named data {key!r} names buffer {entry.buffer_index} but the payload has "
                    f"{len(payload.buffers)}; build DataPayload from a NamedDataStore's output")
            index = segment_of[entry.buffer_index] = len(placed)
            placed.append((as_byte_view(payload.buffers[entry.buffer_index], f"the data of {key!r}"), entry.alignment))
        else:
            data, align = placed[index]
            placed[index] = (data, max(align, entry.alignment))
        named.append((key, index, entry.tensor_layout))

    segments: list[tuple[int, int]] = []
    pieces: list = []
    end = 0
    for data, align in placed:
        offset = aligned(end, math.lcm(segment_alignment, align))
        if offset > end:
            pieces.append(bytes(offset - end))
        if len(data):
            pieces.append(data)
        segments.append((offset, len(data)))
        end = offset + len(data)

    flat = _write_flatbuffer(segments, named)
    header_length = aligned(FlatTensorHeader.EXPECTED_LENGTH, _FLATBUFFER_ALIGNMENT)
    base = aligned(len(flat) + header_length, segment_alignment)
    header = FlatTensorHeader(header_length, len(flat), base, end).to_bytes()
    (root,) = struct.unpack_from("<I", flat, 0)
    head = (struct.pack("<I", root + header_length) + bytes(flat[4:_HEADER_OFFSET]) + header
            + bytes(header_length - len(header)))
    tail_pad = base - len(flat) - header_length
    return [head, flat[_HEADER_OFFSET:], bytes(tail_pad), *pieces]


def _write_flatbuffer(segments: list[tuple[int, int]], named: list) -> memoryview:
    w = _Writer(1, 1)
    b = w.b
    # Children before parents, in field order, as flatc's generated Pack code does.
    segs = w.offsets([w.table(2, ((0, _U64, off), (1, _U64, size))) for off, size in segments])
    entries = []
    for key, index, layout in named:
        key_off = b.CreateString(key)
        layout_off = 0
        if layout is not None:
            sizes = w.scalars("i", 4, [int(x) for x in layout.sizes])
            order = w.scalars("B", 1, [int(x) for x in layout.dim_order])
            layout_off = w.table(3, ((0, _I8, int(layout.scalar_type)), (1, _OFFSET, sizes), (2, _OFFSET, order)))
        entries.append(w.table(3, ((0, _OFFSET, key_off), (1, _U32, index), (2, _OFFSET, layout_off))))
    named_off = w.offsets(entries)
    try:
        root = w.table(3, ((0, _U32, _VERSION), (1, _OFFSET, segs), (2, _OFFSET, named_off)))
        b.Finish(root, file_identifier=FILE_IDENTIFIER)
    except (struct.error, OverflowError) as e:
        raise SerializeError(f"cannot write the .ptd index: a size or index does not fit its field ({e})") from None
    return memoryview(b.Bytes)[b.Head():]


def read_ptd(data) -> dict[str, NamedTensorData]:
    """Every entry of a `.ptd` image by key; data are views over `data`. Raises SerializeError,
    naming what is wrong, when `data` is not a well-formed `.ptd`."""
    view = as_byte_view(data, "the .ptd data")
    size = len(view)
    min_size = _HEADER_OFFSET + FlatTensorHeader.EXPECTED_LENGTH
    if size < min_size:
        raise SerializeError(
            f"the .ptd data is {size} bytes, too short for its header (at least {min_size}); "
            "the file is truncated or empty, write it again")
    ident = bytes(view[4:_HEADER_OFFSET])
    header = FlatTensorHeader.from_bytes(view[_HEADER_OFFSET:])
    if ident != FILE_IDENTIFIER or not header.is_valid():
        raise SerializeError(
            f"not a .ptd file (found identifier {ident!r} and header magic {header.magic!r}, expected "
            f"{FILE_IDENTIFIER!r} and {FlatTensorHeader.EXPECTED_MAGIC!r}); check the path names a file "
            "written by write_tensor_data_to_file()")
    fb_end = header.flatbuffer_offset + header.flatbuffer_size
    data_end = header.segment_base_offset + header.segment_data_size
    if not (_HEADER_OFFSET + header.length <= header.flatbuffer_offset and fb_end <= size):
        raise SerializeError(
            f"the .ptd header places its index at bytes {header.flatbuffer_offset}..{fb_end}, outside this "
            f"{size}-byte file; the file is truncated or corrupt, write it again")
    if header.segment_data_size and not (fb_end <= header.segment_base_offset and data_end <= size):
        raise SerializeError(
            f"the .ptd header says {header.segment_data_size} bytes of tensor data start at "
            f"{header.segment_base_offset}, past the end of this {size}-byte file; the file is truncated, "
            "write it again")
    reader = _Reader(view[:fb_end])
    try:
        segments, named = _read_index(reader)
    except _Corrupt as e:
        reason = str(e)
    except (struct.error, RecursionError, OverflowError, MemoryError) as e:
        reason = f"{type(e).__name__}: {e}"
    else:
        return _entries(view, header, segments, named)
    raise SerializeError(f"the .ptd index is malformed: {reason}; the file is corrupt, write it again")


def _read_index(r: _Reader) -> tuple[list[tuple[int, int]], list]:
    f = r.fields(r.ref(0, "the root table offset"), 3, "FlatTensor")
    if not f[1] or not f[2]:
        raise _Corrupt("FlatTensor has no segments or no named_data vector")

    def segment(pos: int) -> tuple[int, int]:
        g = r.fields(pos, 2, "DataSegment")
        return r.scalar("<Q", g[0]), r.scalar("<Q", g[1])

    def named_data(pos: int):
        g = r.fields(pos, 3, "NamedData")
        key = r.string(g[0], "NamedData.key")
        layout = None
        if g[2]:
            t = r.fields(r.ref(g[2], "NamedData.tensor_layout"), 3, "TensorLayout")
            layout = TensorLayout(r.enum(_SCALAR_TYPES, t[0], f"tensor_layout of {key!r}: scalar_type"),
                                  r.scalars("i", 4, t[1], "TensorLayout.sizes"),
                                  r.scalars("B", 1, t[2], "TensorLayout.dim_order"))
        return key, r.scalar("<I", g[1]), layout

    return r.tables(f[1], segment, "FlatTensor.segments"), r.tables(f[2], named_data, "FlatTensor.named_data")


def _entries(view: memoryview, header: FlatTensorHeader, segments: list, named: list) -> dict[str, NamedTensorData]:
    out: dict[str, NamedTensorData] = {}
    for key, index, layout in named:
        if index >= len(segments):
            raise SerializeError(
                f".ptd entry {key!r} names segment {index} but the file has {len(segments)}; the file is "
                "corrupt, write it again")
        offset, size = segments[index]
        if offset + size > header.segment_data_size:
            raise SerializeError(
                f".ptd entry {key!r} ({size} bytes at segment offset {offset}) runs past the file's "
                f"{header.segment_data_size} bytes of tensor data; the file is truncated or corrupt, write it again")
        if layout is not None:
            _check_layout(key, layout, size)
        if key in out:
            raise SerializeError(f".ptd key {key!r} appears twice; the file is corrupt, write it again")
        start = header.segment_base_offset + offset
        out[key] = NamedTensorData(view[start:start + size], layout, index)
    return out


def _check_layout(key: str, layout: TensorLayout, size: int) -> None:
    sizes, order = layout.sizes, layout.dim_order
    if any(d < 0 for d in sizes) or sorted(order) != list(range(len(sizes))):
        raise SerializeError(
            f".ptd entry {key!r} has sizes {list(sizes)} and dim_order {list(order)}, not a valid layout; "
            "the file is corrupt, write it again")
    nbytes = math.prod(sizes) * (element_size(int(layout.scalar_type)) or 1)
    if nbytes > size:
        raise SerializeError(
            f".ptd entry {key!r} is a {list(sizes)} tensor of {nbytes} bytes but its segment holds {size}; "
            "the file is truncated or corrupt, write it again")


class FlatTensorSerializer(DataSerializer):
    """`DataPayload` <-> `.ptd` bytes."""

    def __init__(self, config: Optional[FlatTensorConfig] = None) -> None:
        self.config = config or FlatTensorConfig()

    def serialize_chunks(self, data: DataPayload) -> list:
        return serialize_ptd_chunks(data, self.config.segment_alignment)

    def serialize(self, data: DataPayload) -> bytes:
        return join_bytes(self.serialize_chunks(data))

    def deserialize(self, blob) -> DataPayload:
        """The payload of a `.ptd` image; buffers are views over `blob`. Alignment requests are
        not recorded in the file, so every entry comes back with alignment 1."""
        payload = DataPayload()
        buffer_of: dict[int, int] = {}  # segment index -> buffer index: shared segments stay shared
        for key, entry in read_ptd(blob).items():
            index = buffer_of.get(entry.segment_index)
            if index is None:
                index = buffer_of[entry.segment_index] = len(payload.buffers)
                payload.buffers.append(entry.data)
            payload.named_data[key] = DataEntry(index, 1, entry.tensor_layout)
        return payload
