"""XNNPACK payload bytes: the `XH00` header, the XNNGraph FlatBuffer and the constant region.

Written with the flatbuffers Builder and read back with the bounds-checked reader the `.pte`
reader uses; both walk the dataclasses of `xnnpack_graph_schema` generically, by their field
types, so the schema's facts live in that one module. A payload is

    [XH00 header, padded to 16][XNNGraph flatbuffer ("XN01"), padded to 16][constant data]

or, in older files, a bare XNNGraph flatbuffer ("XN00" or "XN01") with no header.
"""

from __future__ import annotations

import dataclasses
import struct
import typing
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar, Optional, Union

import flatbuffers

from executorch.backends.xnnpack.serialization import xnnpack_graph_schema as xs
from executorch.exir._serialize._flatbuffer_reader import _Corrupt, _Reader
from executorch.exir.error import SerializeError

CONSTANT_TENSOR_ALIGNMENT = 16
FILE_IDENTIFIER = b"XN01"
# Identifiers a reader accepts: XN00 (constants possibly inline) and XN01.
FILE_IDENTIFIERS = (b"XN00", b"XN01")

_HEADER = struct.Struct("<4s4sHIIIQ")


@dataclass
class XNNHeader:
    """The 30-byte header: its magic sits where a FlatBuffer's identifier would, so a reader
    tells a headed payload from a bare flatbuffer by bytes 4..8."""

    MAGIC: ClassVar[bytes] = b"XH00"
    EXPECTED_MAGIC: ClassVar[bytes] = b"XH00"
    EXPECTED_LENGTH: ClassVar[int] = _HEADER.size  # 30

    flatbuffer_offset: int
    flatbuffer_size: int
    constant_data_offset: int
    constant_data_size: int

    def is_valid(self) -> bool:
        return (self.flatbuffer_size > 0 and self.constant_data_size >= 0
                and self.constant_data_offset >= self.flatbuffer_offset + self.flatbuffer_size)

    def to_bytes(self) -> bytes:
        if not self.is_valid():
            raise SerializeError(f"XNNPACK header {self} is inconsistent: the constant data must follow the "
                                 "flatbuffer; this is a bug in the writer, please report it")
        return _HEADER.pack(b"\0\0\0\0", self.MAGIC, self.EXPECTED_LENGTH, self.flatbuffer_offset,
                            self.flatbuffer_size, self.constant_data_offset, self.constant_data_size)

    @staticmethod
    def from_bytes(data: bytes) -> "XNNHeader":
        """Parses the header at the start of `data` (which may be the whole payload)."""
        if len(data) < XNNHeader.EXPECTED_LENGTH:
            raise SerializeError(f"XNNPACK header: {len(data)} bytes, need {XNNHeader.EXPECTED_LENGTH}")
        _, magic, length, fb_off, fb_size, cd_off, cd_size = _HEADER.unpack_from(data, 0)
        if magic != XNNHeader.MAGIC:
            raise SerializeError(f"XNNPACK header: magic {bytes(magic)!r}, expected {XNNHeader.MAGIC!r}")
        if length < XNNHeader.EXPECTED_LENGTH:
            raise SerializeError(f"XNNPACK header: declared length {length} is shorter than the "
                                 f"{XNNHeader.EXPECTED_LENGTH} bytes of its fields")
        return XNNHeader(fb_off, fb_size, cd_off, cd_size)


def _aligned(n: int, alignment: int = CONSTANT_TENSOR_ALIGNMENT) -> int:
    return -(-n // alignment) * alignment


# The shape of a dataclass as a FlatBuffer table -------------------------------------------------

# Scalar wire types: struct format, size, Builder slot method.
_SCALARS = {
    "uint32": ("I", 4, "PrependUint32Slot"),
    "int32": ("i", 4, "PrependInt32Slot"),
    "uint64": ("Q", 8, "PrependUint64Slot"),
    "float32": ("f", 4, "PrependFloat32Slot"),
    "int16": ("h", 2, "PrependInt16Slot"),
    "uint16": ("H", 2, "PrependUint16Slot"),
}


@dataclass(frozen=True)
class _Field:
    name: str
    slot: int  # a union takes two slots: its type tag here, its value at slot + 1
    kind: str  # scalar | enum | string | bytes | table | union | scalars | tables
    wire: str = ""  # scalar wire type (scalar, enum, scalars)
    cls: Any = None  # table class (table, tables), member tuple (union), enum class (enum)


def _scalar_wire(hint) -> str:
    if typing.get_origin(hint) is typing.Annotated:
        return {"int32": "int32", "uint64": "uint64"}[hint.__metadata__[0]]
    return {int: "uint32", float: "float32"}[hint]


def _union_members(hint) -> Optional[tuple]:
    for members in (xs.XNODE_UNION_TYPES, xs.XVALUE_UNION_TYPES, xs.XNN_QUANT_PARAMS_TYPES):
        if hint == Union[members]:
            return members
    return None


@lru_cache(maxsize=None)
def _layout(cls: type) -> tuple[_Field, ...]:
    hints = typing.get_type_hints(cls, vars(xs), include_extras=True)
    out, slot = [], 0
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        members = _union_members(hint)
        origin = typing.get_origin(hint)
        if members is not None:
            out.append(_Field(f.name, slot, "union", cls=members))
            slot += 2
            continue
        if origin is Union:  # Optional[Table]
            out.append(_Field(f.name, slot, "table", cls=typing.get_args(hint)[0]))
        elif hint is str:
            out.append(_Field(f.name, slot, "string"))
        elif hint is bytes:
            out.append(_Field(f.name, slot, "bytes"))
        elif isinstance(hint, type) and issubclass(hint, xs.XNNDatatype):
            out.append(_Field(f.name, slot, "enum", "int16", hint))
        elif dataclasses.is_dataclass(hint):
            out.append(_Field(f.name, slot, "table", cls=hint))
        elif origin in (list, typing.List):
            (elem,) = typing.get_args(hint)
            if dataclasses.is_dataclass(elem):
                out.append(_Field(f.name, slot, "tables", cls=elem))
            else:
                # A deprecated bf16 slot is a [ushort] on the wire.
                wire = "uint16" if f.name == "scale_bf16" else _scalar_wire(elem)
                out.append(_Field(f.name, slot, "scalars", wire))
        else:
            out.append(_Field(f.name, slot, "scalar", _scalar_wire(hint)))
        slot += 1
    return tuple(out)


def _num_slots(cls: type) -> int:
    last = _layout(cls)[-1]
    return last.slot + (2 if last.kind == "union" else 1)


# Writing ------------------------------------------------------------------------------------------


def _write(b: flatbuffers.Builder, obj: Any) -> int:
    cls = type(obj)
    refs: dict[str, int] = {}
    for f in _layout(cls):
        v = getattr(obj, f.name)
        if f.kind in ("table", "union"):
            if v is not None:
                refs[f.name] = _write(b, v)
        elif f.kind == "string":
            if v:
                refs[f.name] = b.CreateString(v)
        elif f.kind == "bytes":
            if v:
                b.StartVector(1, len(v), CONSTANT_TENSOR_ALIGNMENT)
                b.head -= len(v)
                b.Bytes[b.head:b.head + len(v)] = bytes(v)
                refs[f.name] = b.EndVector()
        elif f.kind == "tables":
            if v:
                offs = [_write(b, x) for x in v]
                b.StartVector(4, len(offs), 4)
                for o in reversed(offs):
                    b.PrependUOffsetTRelative(o)
                refs[f.name] = b.EndVector()
        elif f.kind == "scalars":
            if v:
                fmt, size, _ = _SCALARS[f.wire]
                b.StartVector(size, len(v), size)
                b.head -= size * len(v)
                struct.pack_into(f"<{len(v)}{fmt}", b.Bytes, b.head, *v)
                refs[f.name] = b.EndVector()
    b.StartObject(_num_slots(cls))
    for f in _layout(cls):
        v = getattr(obj, f.name)
        if f.kind in ("scalar", "enum"):
            getattr(b, _SCALARS[f.wire][2])(f.slot, v, 0)
        elif f.kind == "union":
            if v is not None:
                b.PrependUint8Slot(f.slot, f.cls.index(type(v)) + 1, 0)
                b.PrependUOffsetTRelativeSlot(f.slot + 1, refs[f.name], 0)
        elif f.name in refs:
            b.PrependUOffsetTRelativeSlot(f.slot, refs[f.name], 0)
    return b.EndObject()


def _check(obj: Any, where: str) -> None:
    """Refuses values the wire cannot hold (a SymInt, a float for an int, a negative uint)."""
    for f in _layout(type(obj)):
        v = getattr(obj, f.name)
        here = f"{where}.{f.name}"
        if f.kind in ("table", "union"):
            if v is None:
                continue
            if f.kind == "union" and type(v) not in f.cls:
                raise SerializeError(f"{here} is a {type(v).__name__}, which the schema's union does not hold")
            _check(v, here)
        elif f.kind == "tables":
            for i, x in enumerate(v):
                _check(x, f"{here}[{i}]")
        elif f.kind in ("scalar", "enum", "scalars"):
            for x in (v if f.kind == "scalars" else (v,)):
                ok = isinstance(x, (int, float) if f.wire == "float32" else int) and not isinstance(x, bool)
                if not ok:
                    raise SerializeError(f"{here} is {x!r} ({type(x).__name__}); the schema wants a {f.wire}. "
                                         "A symbolic size must be resolved to its upper bound before serializing")
                if f.wire.startswith("uint") and not 0 <= x < (1 << int(f.wire[4:])):
                    raise SerializeError(f"{here} is {x}, outside the range of a {f.wire}")


def convert_to_flatbuffer(graph: xs.XNNGraph) -> bytes:
    """The XNNGraph as FlatBuffer bytes with the "XN01" identifier."""
    _check(graph, "XNNGraph")
    b = flatbuffers.Builder(1024)
    b.Finish(_write(b, graph), file_identifier=FILE_IDENTIFIER)
    return bytes(b.Output())


def serialize_xnnpack_binary(graph: xs.XNNGraph, constant_data_bytes: Union[bytes, bytearray] = b"") -> bytes:
    """The payload: header, flatbuffer and constant region, each start 16-byte aligned."""
    fb = convert_to_flatbuffer(graph)
    fb_offset = _aligned(XNNHeader.EXPECTED_LENGTH)
    cd_offset = fb_offset + _aligned(len(fb))
    header = XNNHeader(fb_offset, len(fb), cd_offset, len(constant_data_bytes)).to_bytes()
    out = bytearray(cd_offset + len(constant_data_bytes))
    out[:len(header)] = header
    out[fb_offset:fb_offset + len(fb)] = fb
    out[cd_offset:] = constant_data_bytes
    return bytes(out)


# Reading ------------------------------------------------------------------------------------------


class _GraphReader(_Reader):
    def read(self, pos: int, cls: type, what: str) -> Any:
        layout = _layout(cls)
        at = self.fields(pos, _num_slots(cls), what)
        kwargs = {}
        for f in layout:
            p = at[f.slot]
            here = f"{what}.{f.name}"
            if f.kind == "scalar":
                kwargs[f.name] = self.scalar("<" + _SCALARS[f.wire][0], p, 0.0 if f.wire == "float32" else 0)
            elif f.kind == "enum":
                raw = self.scalar("<h", p)
                try:
                    kwargs[f.name] = f.cls(raw)
                except ValueError:
                    raise _Corrupt(f"{here} has unknown value {raw}") from None
            elif f.kind == "string":
                kwargs[f.name] = self.string(p, here)
            elif f.kind == "bytes":
                kwargs[f.name] = self.raw(p, here)
            elif f.kind == "table":
                kwargs[f.name] = self.read(self.ref(p, here), f.cls, here) if p else None
            elif f.kind == "tables":
                kwargs[f.name] = self.tables(p, lambda q, c=f.cls, h=here: self.read(q, c, h), here)
            elif f.kind == "scalars":
                fmt, size, _ = _SCALARS[f.wire]
                kwargs[f.name] = self.scalars(fmt, size, p, here)
            else:  # union
                tag = self.scalar("<B", p)
                if not 1 <= tag <= len(f.cls):
                    raise _Corrupt(f"{here} has union tag {tag}; this reader knows tags 1..{len(f.cls)} "
                                   "(a newer exporter's node kind?)")
                if not at[f.slot + 1]:
                    raise _Corrupt(f"{here} (tag {tag}) has no value table")
                member = f.cls[tag - 1]
                kwargs[f.name] = self.read(self.ref(at[f.slot + 1], here), member, f"{here}<{member.__name__}>")
        return cls(**kwargs)


@dataclass
class XNNPayload:
    """A decoded payload: the graph and the constant region its ConstantDataOffsets point into."""

    graph: xs.XNNGraph
    constant_data: memoryview
    identifier: bytes

    def constant(self, idx: int, named_data: Optional[dict] = None) -> memoryview:
        """The bytes of constant_data[idx]: from named data, the constant region, or (XN00) inline."""
        g = self.graph
        if g.constant_data:
            if not 0 < idx < len(g.constant_data):
                raise SerializeError(f"XNNPACK payload: constant index {idx} is outside 1..{len(g.constant_data) - 1}")
            entry = g.constant_data[idx]
            if entry.named_key:
                if named_data is None or entry.named_key not in named_data:
                    raise SerializeError(f"XNNPACK payload: constant {idx} names data {entry.named_key!r}, which "
                                         "the program does not hold; load the program with its .ptd file")
                data = memoryview(named_data[entry.named_key]).cast("B")
                if len(data) < entry.size:
                    raise SerializeError(f"XNNPACK payload: named data {entry.named_key!r} has {len(data)} bytes, "
                                         f"the graph needs {entry.size}")
                return data[:entry.size]
            if entry.offset + entry.size > len(self.constant_data):
                raise SerializeError(f"XNNPACK payload: constant {idx} ({entry.size} bytes at {entry.offset}) runs "
                                     f"past the {len(self.constant_data)}-byte constant region")
            return self.constant_data[entry.offset:entry.offset + entry.size]
        if not 0 < idx < len(g.constant_buffer):
            raise SerializeError(f"XNNPACK payload: constant index {idx} is outside the inline constant buffers")
        return memoryview(g.constant_buffer[idx].storage)


def deserialize_xnnpack_binary(data) -> XNNPayload:
    """Decodes a payload (headed or a bare flatbuffer); malformed input raises SerializeError."""
    buf = memoryview(data).cast("B") if not isinstance(data, memoryview) or data.format != "B" else data
    try:
        if len(buf) >= 8 and bytes(buf[4:8]) == XNNHeader.MAGIC:
            h = XNNHeader.from_bytes(buf)
            if h.flatbuffer_offset + h.flatbuffer_size > len(buf) or h.flatbuffer_size < 8:
                raise _Corrupt(f"its flatbuffer ({h.flatbuffer_size} bytes at {h.flatbuffer_offset}) does not fit "
                               f"in the {len(buf)}-byte payload")
            if h.constant_data_offset + h.constant_data_size > len(buf):
                raise _Corrupt(f"its constant data ({h.constant_data_size} bytes at {h.constant_data_offset}) runs "
                               f"past the {len(buf)}-byte payload")
            fb = buf[h.flatbuffer_offset:h.flatbuffer_offset + h.flatbuffer_size]
            constants = buf[h.constant_data_offset:h.constant_data_offset + h.constant_data_size]
        else:
            fb, constants = buf, buf[0:0]
        if len(fb) < 8:
            raise _Corrupt(f"it has {len(fb)} bytes, too few for a flatbuffer")
        ident = bytes(fb[4:8])
        if ident not in FILE_IDENTIFIERS:
            raise _Corrupt(f"its identifier is {ident!r}, not one of {FILE_IDENTIFIERS} (is this an XNNPACK payload?)")
        reader = _GraphReader(fb)
        graph = reader.read(reader.ref(0, "root"), xs.XNNGraph, "XNNGraph")
    except _Corrupt as e:
        raise SerializeError(f"malformed XNNPACK payload: {e}; re-export the model") from None
    except struct.error as e:
        raise SerializeError(f"malformed XNNPACK payload: a field runs past the end ({e}); "
                             f"re-export the model") from None
    return XNNPayload(graph, constants, ident)
