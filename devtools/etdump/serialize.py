"""ETDump bytes <-> `ETDumpFlatCC`: a size-prefixed FlatBuffer with identifier `ED00`, written with the
flatbuffers Builder and read by a bounds-checked reader (no flatc either way)."""

from __future__ import annotations

import struct
from typing import Optional, Union

import flatbuffers

from executorch.devtools.etdump import schema_flatcc as E
from executorch.exir._serialize._flatbuffer_reader import _Corrupt, _Reader
from executorch.exir.schema import ScalarType

__all__ = ["ETDumpError", "deserialize_from_etdump_flatcc", "serialize_to_etdump_flatcc"]

_U64 = (1 << 64) - 1
_SCALAR_TYPES = {m.value: m for m in ScalarType}
_VALUE_NAMES = {code: name for name, code in E.VALUE_TYPE_CODES.items()}


class ETDumpError(ValueError):
    """An ETDump file that cannot be read."""


# ---- writer ----------------------------------------------------------------------------------


class _Writer:
    def __init__(self) -> None:
        self.b = flatbuffers.Builder(1 << 14)

    def string(self, s: Optional[str]) -> int:
        return self.b.CreateString(s) if s is not None else 0

    def longs(self, items) -> int:
        b = self.b
        b.StartVector(8, len(items), 8)
        for v in reversed(items):
            b.PrependInt64(int(v))
        return b.EndVector()

    def offsets(self, offs: list) -> int:
        b = self.b
        b.StartVector(4, len(offs), 4)
        for o in reversed(offs):
            b.PrependUOffsetTRelative(o)
        return b.EndVector()

    def etdump(self, d: E.ETDumpFlatCC) -> int:
        runs = self.offsets([self.run_data(r) for r in d.run_data])
        b = self.b
        b.StartObject(2)
        b.PrependUint32Slot(0, d.version, 0)
        b.PrependUOffsetTRelativeSlot(1, runs, 0)
        return b.EndObject()

    def run_data(self, r: E.RunData) -> int:
        name = self.string(r.name)
        allocators = 0
        if r.allocators is not None:
            names = [self.string(a.name) for a in r.allocators]
            tables = []
            for n in names:
                self.b.StartObject(1)
                self.b.PrependUOffsetTRelativeSlot(0, n, 0)
                tables.append(self.b.EndObject())
            allocators = self.offsets(tables)
        events = self.offsets([self.event(e) for e in r.events or ()])
        b = self.b
        b.StartObject(4)
        b.PrependUOffsetTRelativeSlot(0, name, 0)
        b.PrependInt32Slot(1, -1 if r.bundled_input_index is None else r.bundled_input_index, -1)
        if allocators:
            b.PrependUOffsetTRelativeSlot(2, allocators, 0)
        b.PrependUOffsetTRelativeSlot(3, events, 0)
        return b.EndObject()

    def event(self, e: E.Event) -> int:
        prof = self.profile_event(e.profile_event) if e.profile_event is not None else 0
        alloc = self.allocation_event(e.allocation_event) if e.allocation_event is not None else 0
        debug = self.debug_event(e.debug_event) if e.debug_event is not None else 0
        b = self.b
        b.StartObject(3)
        for slot, ref in enumerate((prof, alloc, debug)):
            if ref:
                b.PrependUOffsetTRelativeSlot(slot, ref, 0)
        return b.EndObject()

    def profile_event(self, p: E.ProfileEvent) -> int:
        name = self.string(p.name)
        dstr = self.string(p.delegate_debug_id_str)
        meta = self.b.CreateByteVector(bytes(p.delegate_debug_metadata)) if p.delegate_debug_metadata else 0
        b = self.b
        b.StartObject(8)
        if name:
            b.PrependUOffsetTRelativeSlot(0, name, 0)
        b.PrependInt32Slot(1, p.chain_index, 0)
        b.PrependInt32Slot(2, p.instruction_id, -1)
        b.PrependInt32Slot(3, -1 if p.delegate_debug_id_int is None else p.delegate_debug_id_int, -1)
        if dstr:
            b.PrependUOffsetTRelativeSlot(4, dstr, 0)
        if meta:
            b.PrependUOffsetTRelativeSlot(5, meta, 0)
        b.PrependUint64Slot(6, p.start_time & _U64, 0)
        b.PrependUint64Slot(7, p.end_time & _U64, 0)
        return b.EndObject()

    def allocation_event(self, a: E.AllocationEvent) -> int:
        b = self.b
        b.StartObject(2)
        b.PrependInt32Slot(0, a.allocator_id, 0)
        b.PrependUint64Slot(1, a.allocation_size, 0)
        return b.EndObject()

    def debug_event(self, d: E.DebugEvent) -> int:
        entry = self.value(d.debug_entry)
        dstr = self.string(d.delegate_debug_id_str)
        name = self.string(d.name)
        b = self.b
        b.StartObject(6)
        b.PrependUint64Slot(0, d.chain_index & _U64, 0)
        b.PrependInt32Slot(1, d.instruction_id, -1)
        b.PrependUOffsetTRelativeSlot(2, entry, 0)
        b.PrependInt32Slot(3, -1 if d.delegate_debug_id_int is None else d.delegate_debug_id_int, -1)
        if dstr:
            b.PrependUOffsetTRelativeSlot(4, dstr, 0)
        if name:
            b.PrependUOffsetTRelativeSlot(5, name, 0)
        return b.EndObject()

    def tensor(self, t: E.Tensor) -> int:
        sizes, strides = self.longs(t.sizes), self.longs(t.strides)
        b = self.b
        b.StartObject(4)
        b.PrependInt8Slot(0, int(t.scalar_type), 0)
        b.PrependUOffsetTRelativeSlot(1, sizes, 0)
        b.PrependUOffsetTRelativeSlot(2, strides, 0)
        b.PrependInt64Slot(3, t.offset or 0, 0)
        return b.EndObject()

    def scalar_table(self, prepend, value, default) -> int:
        b = self.b
        b.StartObject(1)
        prepend(0, value, default)
        return b.EndObject()

    def value(self, v: E.Value) -> int:
        b = self.b
        refs = [0] * 8
        if v.tensor is not None:
            refs[1] = self.tensor(v.tensor)
        if v.tensor_list is not None:
            items = self.offsets([self.tensor(t) for t in v.tensor_list.tensors])
            b.StartObject(1)
            b.PrependUOffsetTRelativeSlot(0, items, 0)
            refs[2] = b.EndObject()
        if v.int_value is not None:
            refs[3] = self.scalar_table(b.PrependInt64Slot, v.int_value.int_val, 0)
        if v.float_value is not None:
            refs[4] = self.scalar_table(b.PrependFloat32Slot, v.float_value.float_val, 0.0)
        if v.double_value is not None:
            refs[5] = self.scalar_table(b.PrependFloat64Slot, v.double_value.double_val, 0.0)
        if v.bool_value is not None:
            refs[6] = self.scalar_table(b.PrependBoolSlot, v.bool_value.bool_val, False)
        if v.output is not None:
            refs[7] = self.scalar_table(b.PrependBoolSlot, v.output.bool_val, False)
        b.StartObject(8)
        b.PrependInt8Slot(0, E.VALUE_TYPE_CODES[v.val], 0)
        for slot in range(1, 8):
            if refs[slot]:
                b.PrependUOffsetTRelativeSlot(slot, refs[slot], 0)
        return b.EndObject()


def serialize_to_etdump_flatcc(etdump: E.ETDumpFlatCC) -> bytes:
    """The `.etdp` bytes of `etdump`: size prefix, root offset, `ED00`, tables."""
    w = _Writer()
    root = w.etdump(etdump)
    w.b.FinishSizePrefixed(root, file_identifier=E.FILE_IDENTIFIER)
    return bytes(w.b.Output())


# ---- reader ----------------------------------------------------------------------------------


class _ETDumpReader(_Reader):
    def etdump(self, pos: int) -> E.ETDumpFlatCC:
        f = self.fields(pos, 2, "ETDump")
        return E.ETDumpFlatCC(self.scalar("<I", f[0]), self.tables(f[1], self.run_data, "ETDump.run_data"))

    def run_data(self, pos: int) -> E.RunData:
        f = self.fields(pos, 4, "RunData")
        allocators = None
        if f[2]:
            allocators = self.tables(f[2], lambda p: E.Allocator(self.string(self.fields(p, 1, "Allocator")[0],
                                                                             "Allocator.name")), "RunData.allocators")
        return E.RunData(self.string(f[0], "RunData.name"), self.scalar("<i", f[1], -1), allocators,
                         self.tables(f[3], self.event, "RunData.events"))

    def event(self, pos: int) -> E.Event:
        f = self.fields(pos, 3, "Event")
        return E.Event(
            self.profile_event(self.ref(f[0], "Event.profile_event")) if f[0] else None,
            self.allocation_event(self.ref(f[1], "Event.allocation_event")) if f[1] else None,
            self.debug_event(self.ref(f[2], "Event.debug_event")) if f[2] else None,
        )

    def profile_event(self, pos: int) -> E.ProfileEvent:
        f = self.fields(pos, 8, "ProfileEvent")
        return E.ProfileEvent(
            name=self.string(f[0], "ProfileEvent.name", None),
            chain_index=self.scalar("<i", f[1]),
            instruction_id=self.scalar("<i", f[2], -1),
            delegate_debug_id_int=self.scalar("<i", f[3], -1),
            delegate_debug_id_str=self.string(f[4], "ProfileEvent.delegate_debug_id_str", None),
            delegate_debug_metadata=bytes(self.raw(f[5], "ProfileEvent.delegate_debug_metadata")) if f[5] else None,
            start_time=self.scalar("<Q", f[6]),
            end_time=self.scalar("<Q", f[7]),
        )

    def allocation_event(self, pos: int) -> E.AllocationEvent:
        f = self.fields(pos, 2, "AllocationEvent")
        return E.AllocationEvent(self.scalar("<i", f[0]), self.scalar("<Q", f[1]))

    def debug_event(self, pos: int) -> E.DebugEvent:
        f = self.fields(pos, 6, "DebugEvent")
        if not f[2]:
            raise _Corrupt("a DebugEvent has no debug_entry")
        return E.DebugEvent(
            name=self.string(f[5], "DebugEvent.name", None),
            chain_index=self.scalar("<Q", f[0]),
            instruction_id=self.scalar("<i", f[1], -1),
            delegate_debug_id_int=self.scalar("<i", f[3], -1),
            delegate_debug_id_str=self.string(f[4], "DebugEvent.delegate_debug_id_str", None),
            debug_entry=self.value(self.ref(f[2], "DebugEvent.debug_entry")),
        )

    def tensor(self, pos: int) -> E.Tensor:
        f = self.fields(pos, 4, "Tensor")
        code = self.scalar("<b", f[0])
        if code not in _SCALAR_TYPES:
            raise _Corrupt(f"an ETDump tensor has unknown scalar type {code}")
        return E.Tensor(_SCALAR_TYPES[code], self.scalars("q", 8, f[1], "Tensor.sizes"),
                        self.scalars("q", 8, f[2], "Tensor.strides"), self.scalar("<q", f[3]))

    def _sub(self, pos: int, fmt: str, default):
        return self.scalar(fmt, self.fields(self.ref(pos, "Value field"), 1, "Value field")[0], default)

    def value(self, pos: int) -> E.Value:
        f = self.fields(pos, 8, "Value")
        code = self.scalar("<b", f[0])
        if code not in _VALUE_NAMES:
            raise _Corrupt(f"an ETDump value has unknown type {code}")
        v = E.Value(_VALUE_NAMES[code])
        if f[1]:
            v.tensor = self.tensor(self.ref(f[1], "Value.tensor"))
        if f[2]:
            items = self.fields(self.ref(f[2], "Value.tensor_list"), 1, "TensorList")[0]
            v.tensor_list = E.TensorList(self.tables(items, self.tensor, "TensorList.tensors"))
        if f[3]:
            v.int_value = E.Int(self._sub(f[3], "<q", 0))
        if f[4]:
            v.float_value = E.Float(self._sub(f[4], "<f", 0.0))
        if f[5]:
            v.double_value = E.Double(self._sub(f[5], "<d", 0.0))
        if f[6]:
            v.bool_value = E.Bool(bool(self._sub(f[6], "<B", 0)))
        if f[7]:
            v.output = E.Bool(bool(self._sub(f[7], "<B", 0)))
        return v


def deserialize_from_etdump_flatcc(data: Union[bytes, bytearray, memoryview], size_prefixed: bool = True
                                   ) -> E.ETDumpFlatCC:
    """The ETDump in `data`; a malformed or foreign file raises ETDumpError naming the cause."""
    buf = memoryview(data).cast("B")
    try:
        if size_prefixed:
            if len(buf) < 12:
                raise _Corrupt(f"it is {len(buf)} bytes, too short for an ETDump header")
            (size,) = struct.unpack_from("<I", buf, 0)
            if size > len(buf) - 4:
                raise _Corrupt(f"its size prefix says {size} bytes but only {len(buf) - 4} follow")
            buf = buf[4:4 + size]
        if len(buf) < 8 or bytes(buf[4:8]) != E.FILE_IDENTIFIER:
            raise _Corrupt(f"its identifier is {bytes(buf[4:8])!r}, not {E.FILE_IDENTIFIER!r}")
        reader = _ETDumpReader(buf)
        return reader.etdump(reader.ref(0, "the root table offset"))
    except _Corrupt as e:
        reason = str(e)
    except (struct.error, RecursionError, OverflowError, MemoryError) as e:
        reason = f"{type(e).__name__}: {e}"
    raise ETDumpError(f"the ETDump is malformed: {reason}; pass the .etdp file the runtime wrote")
