"""Reads FlatBuffer bytes (schema/program.fbs) back into `Program` dataclasses.

A small bounds-checked reader instead of generated code: every offset, length and union tag
read from the file is checked before use, so malformed input raises `SerializeError`.
Inline byte payloads come back as memoryviews over the input (no copy).
"""

from __future__ import annotations

import struct
from typing import Callable, Optional

from executorch.exir import schema as s
from executorch.exir.error import SerializeError

_I32 = struct.Struct("<i").unpack_from
_U32 = struct.Struct("<I").unpack_from
_HH = struct.Struct("<HH").unpack_from

_SCALAR_TYPES = {m.value: m for m in s.ScalarType}
_K = s.KernelTypesTag
_I = s.InstructionArgumentsTag
_DYNAMISM = {m.value: m for m in s.TensorShapeDynamism}
_TENSOR_LOCATIONS = {m.value: m for m in s.TensorDataLocation}
_DEVICE_TYPES = {m.value: m for m in s.DeviceType}
_DATA_LOCATIONS = {m.value: m for m in s.DataLocation}


class _Corrupt(Exception):
    """Internal: the reason a buffer is malformed; turned into one SerializeError at the top."""


class _Reader:
    __slots__ = ("buf", "size", "budget")

    def __init__(self, buf: memoryview):
        self.buf = buf
        self.size = len(buf)
        # Offsets may point anywhere forward, so a small file can alias one large table or vector
        # from many places and decode into a huge Program. Tables and vectors written once each
        # cannot add up to more than the buffer; allow generous slack for writers that share
        # strings, and refuse beyond that.
        self.budget = 4 * self.size + 1024

    # Low level ----------------------------------------------------------------------------

    def fields(self, pos: int, count: int, what: str) -> list[int]:
        """Absolute positions of the table's first `count` fields (0 where a field is absent)."""
        size = self.size
        if pos < 0 or pos + 4 > size:
            raise _Corrupt(f"{what} table at {pos} is outside the {size}-byte buffer")
        vt = pos - _I32(self.buf, pos)[0]
        if vt < 0 or vt + 4 > size:
            raise _Corrupt(f"{what} table at {pos} points to a vtable at {vt}, outside the buffer")
        vt_size, table_size = _HH(self.buf, vt)
        if vt_size < 4 or vt_size & 1 or vt + vt_size > size or table_size < 4 or pos + table_size > size:
            raise _Corrupt(f"{what} table at {pos} has a malformed vtable (size {vt_size}, table {table_size})")
        self.charge(table_size)
        n = min((vt_size - 4) >> 1, count)
        out = [0] * count
        for i, off in enumerate(struct.unpack_from(f"<{n}H", self.buf, vt + 4)):
            if off:
                if off < 4 or off >= table_size:
                    raise _Corrupt(f"{what} field {i} at offset {off} lies outside its {table_size}-byte table")
                out[i] = pos + off
        return out

    def ref(self, pos: int, what: str) -> int:
        target = pos + _U32(self.buf, pos)[0]
        if target + 4 > self.size:
            raise _Corrupt(f"{what} points to {target}, past the end of the {self.size}-byte buffer")
        return target

    def span(self, pos: int, elem_size: int, what: str) -> tuple[int, int]:
        """(start, count) of the vector referenced by the offset at `pos`."""
        target = self.ref(pos, what)
        count = _U32(self.buf, target)[0]
        if target + 4 + count * elem_size > self.size:
            raise _Corrupt(f"{what} has {count} elements, running past the end of the buffer")
        self.charge(4 + count * elem_size)
        return target + 4, count

    def charge(self, nbytes: int) -> None:
        self.budget -= nbytes
        if self.budget < 0:
            raise _Corrupt("its offsets alias each other, so it would decode into far more data than it holds")

    def scalar(self, fmt: str, pos: int, default=0):
        return struct.unpack_from(fmt, self.buf, pos)[0] if pos else default

    def enum(self, table: dict, pos: int, what: str):
        raw = struct.unpack_from("<b", self.buf, pos)[0] if pos else 0
        value = table.get(raw)
        if value is None:
            raise _Corrupt(f"{what} has unknown value {raw}")
        return value

    def scalars(self, fmt: str, size: int, pos: int, what: str) -> list:
        if not pos:
            return []
        start, count = self.span(pos, size, what)
        return list(struct.unpack_from(f"<{count}{fmt}", self.buf, start))

    def string(self, pos: int, what: str, default: Optional[str] = "") -> Optional[str]:
        if not pos:
            return default
        start, count = self.span(pos, 1, what)
        try:
            return str(self.buf[start : start + count], "utf-8")
        except UnicodeDecodeError as e:
            raise _Corrupt(f"{what} is not valid UTF-8 ({e.reason})") from None

    def raw(self, pos: int, what: str) -> memoryview:
        if not pos:
            return self.buf[0:0]
        start, count = self.span(pos, 1, what)
        return self.buf[start : start + count]

    def tables(self, pos: int, read: Callable[[int], object], what: str) -> list:
        if not pos:
            return []
        start, count = self.span(pos, 4, what)
        offs = struct.unpack_from(f"<{count}I", self.buf, start)
        return [read(start + 4 * i + o) for i, o in enumerate(offs)]

    # Tables -------------------------------------------------------------------------------

    def program(self, pos: int) -> s.Program:
        f = self.fields(pos, 8, "Program")
        mutable = None
        if f[6]:
            mutable = self.tables(f[6], self.subsegment_offsets, "Program.mutable_data_segments")
        named = None
        if f[7]:
            named = self.tables(f[7], self.named_data, "Program.named_data")
        const_seg = (
            self.subsegment_offsets(self.ref(f[5], "Program.constant_segment"))
            if f[5]
            else s.SubsegmentOffsets(0, [])
        )
        return s.Program(
            version=self.scalar("<I", f[0]),
            execution_plan=self.tables(f[1], self.execution_plan, "Program.execution_plan"),
            constant_buffer=self.tables(f[2], self.buffer, "Program.constant_buffer"),
            backend_delegate_data=self.tables(f[3], self.inline_data, "Program.backend_delegate_data"),
            segments=self.tables(f[4], self.data_segment, "Program.segments"),
            constant_segment=const_seg,
            mutable_data_segments=mutable,
            named_data=named,
        )

    def execution_plan(self, pos: int) -> s.ExecutionPlan:
        f = self.fields(pos, 10, "ExecutionPlan")
        meta = (
            self.container_metadata(self.ref(f[1], "ExecutionPlan.container_meta_type"))
            if f[1]
            else s.ContainerMetadata("", "")
        )
        devices = None
        if f[9]:
            devices = self.tables(f[9], self.non_const_buffer_device, "ExecutionPlan.non_const_buffer_device")
        return s.ExecutionPlan(
            name=self.string(f[0], "ExecutionPlan.name"),
            container_meta_type=meta,
            values=self.tables(f[2], self.evalue, "ExecutionPlan.values"),
            inputs=self.scalars("i", 4, f[3], "ExecutionPlan.inputs"),
            outputs=self.scalars("i", 4, f[4], "ExecutionPlan.outputs"),
            chains=self.tables(f[5], self.chain, "ExecutionPlan.chains"),
            operators=self.tables(f[6], self.operator, "ExecutionPlan.operators"),
            delegates=self.tables(f[7], self.backend_delegate, "ExecutionPlan.delegates"),
            non_const_buffer_sizes=self.scalars("q", 8, f[8], "ExecutionPlan.non_const_buffer_sizes"),
            non_const_buffer_device=devices,
        )

    def container_metadata(self, pos: int) -> s.ContainerMetadata:
        f = self.fields(pos, 2, "ContainerMetadata")
        return s.ContainerMetadata(
            self.string(f[0], "ContainerMetadata.encoded_inp_str"),
            self.string(f[1], "ContainerMetadata.encoded_out_str"),
        )

    def evalue(self, pos: int) -> s.EValue:
        f = self.fields(pos, 2, "EValue")
        tag = self.scalar("<B", f[0])
        if not 1 <= tag <= len(s.KERNEL_TYPES):
            raise _Corrupt(f"EValue has union tag {tag}; valid tags are 1..{len(s.KERNEL_TYPES)}")
        if not f[1]:
            raise _Corrupt(f"EValue with tag {tag} has no value table")
        at = self.ref(f[1], "EValue.val")
        if tag == _K.TENSOR:
            return s.EValue(self.tensor(at))
        v = self.fields(at, 1, s.KERNEL_TYPES[tag - 1].__name__)[0]
        if tag == _K.INT:
            val = s.Int(self.scalar("<q", v))
        elif tag == _K.NULL:
            val = s.Null()
        elif tag == _K.BOOL:
            val = s.Bool(bool(self.scalar("<B", v)))
        elif tag == _K.DOUBLE:
            val = s.Double(self.scalar("<d", v, 0.0))
        elif tag == _K.STRING:
            val = s.String(self.string(v, "String.string_val"))
        elif tag == _K.INT_LIST:
            val = s.IntList(self.scalars("q", 8, v, "IntList.items"))
        elif tag == _K.DOUBLE_LIST:
            val = s.DoubleList(self.scalars("d", 8, v, "DoubleList.items"))
        elif tag == _K.BOOL_LIST:
            val = s.BoolList([x != 0 for x in self.scalars("B", 1, v, "BoolList.items")])
        elif tag == _K.TENSOR_LIST:
            val = s.TensorList(self.scalars("i", 4, v, "TensorList.items"))
        else:
            val = s.OptionalTensorList(self.scalars("i", 4, v, "OptionalTensorList.items"))
        return s.EValue(val)

    def tensor(self, pos: int) -> s.Tensor:
        f = self.fields(pos, 10, "Tensor")
        alloc = None
        if f[6]:
            a = self.fields(self.ref(f[6], "Tensor.allocation_info"), 3, "AllocationDetails")
            alloc = s.AllocationDetails(self.scalar("<I", a[0]), self.scalar("<I", a[1]), self.scalar("<I", a[2]))
        extra = self.extra_tensor_info(self.ref(f[9], "Tensor.extra_tensor_info")) if f[9] else None
        return s.Tensor(
            self.enum(_SCALAR_TYPES, f[0], "Tensor.scalar_type"),
            self.scalar("<i", f[1]),
            self.scalars("i", 4, f[2], "Tensor.sizes"),
            self.scalars("B", 1, f[3], "Tensor.dim_order"),
            self.scalar("<B", f[4]) != 0,
            self.scalar("<I", f[5]),
            alloc,
            self.scalar("<b", f[7]),
            self.enum(_DYNAMISM, f[8], "Tensor.shape_dynamism"),
            extra,
        )

    def extra_tensor_info(self, pos: int) -> s.ExtraTensorInfo:
        f = self.fields(pos, 5, "ExtraTensorInfo")
        return s.ExtraTensorInfo(
            self.scalar("<Q", f[0]),
            self.string(f[1], "ExtraTensorInfo.fully_qualified_name", None),
            self.enum(_TENSOR_LOCATIONS, f[2], "ExtraTensorInfo.location"),
            self.enum(_DEVICE_TYPES, f[3], "ExtraTensorInfo.device_type"),
            self.scalar("<b", f[4]),
        )

    def operator(self, pos: int) -> s.Operator:
        f = self.fields(pos, 2, "Operator")
        return s.Operator(self.string(f[0], "Operator.name"), self.string(f[1], "Operator.overload"))

    def instruction(self, pos: int) -> s.Instruction:
        f = self.fields(pos, 2, "Instruction")
        tag = self.scalar("<B", f[0])
        if not 1 <= tag <= len(s.INSTRUCTION_TYPES):
            raise _Corrupt(f"Instruction has union tag {tag}; valid tags are 1..{len(s.INSTRUCTION_TYPES)}")
        if not f[1]:
            raise _Corrupt(f"Instruction with tag {tag} has no arguments table")
        a = self.fields(self.ref(f[1], "Instruction.instr_args"), 2, s.INSTRUCTION_TYPES[tag - 1].__name__)
        if tag == _I.KERNEL_CALL:
            args = s.KernelCall(self.scalar("<i", a[0]), self.scalars("i", 4, a[1], "KernelCall.args"))
        elif tag == _I.DELEGATE_CALL:
            args = s.DelegateCall(self.scalar("<i", a[0]), self.scalars("i", 4, a[1], "DelegateCall.args"))
        elif tag == _I.MOVE_CALL:
            args = s.MoveCall(self.scalar("<i", a[0]), self.scalar("<i", a[1]))
        elif tag == _I.JUMP_FALSE_CALL:
            args = s.JumpFalseCall(self.scalar("<i", a[0]), self.scalar("<i", a[1]))
        else:
            args = s.FreeCall(self.scalar("<i", a[0]))
        return s.Instruction(args)

    def chain(self, pos: int) -> s.Chain:
        f = self.fields(pos, 4, "Chain")
        stack = self.tables(f[3], self.frame_list, "Chain.stacktrace") if f[3] else None
        return s.Chain(
            self.scalars("i", 4, f[0], "Chain.inputs"),
            self.scalars("i", 4, f[1], "Chain.outputs"),
            self.tables(f[2], self.instruction, "Chain.instructions"),
            stack,
        )

    def frame_list(self, pos: int) -> s.FrameList:
        f = self.fields(pos, 1, "FrameList")
        return s.FrameList(self.tables(f[0], self.frame, "FrameList.items"))

    def frame(self, pos: int) -> s.Frame:
        f = self.fields(pos, 4, "Frame")
        return s.Frame(
            self.string(f[0], "Frame.filename"),
            self.scalar("<i", f[1]),
            self.string(f[2], "Frame.name"),
            self.string(f[3], "Frame.context"),
        )

    def backend_delegate(self, pos: int) -> s.BackendDelegate:
        f = self.fields(pos, 3, "BackendDelegate")
        if not f[1]:
            raise _Corrupt("BackendDelegate has no processed-data reference")
        p = self.fields(self.ref(f[1], "BackendDelegate.processed"), 2, "BackendDelegateDataReference")
        processed = s.BackendDelegateDataReference(
            self.enum(_DATA_LOCATIONS, p[0], "BackendDelegateDataReference.location"), self.scalar("<I", p[1])
        )
        return s.BackendDelegate(
            self.string(f[0], "BackendDelegate.id"),
            processed,
            self.tables(f[2], self.compile_spec, "BackendDelegate.compile_specs"),
        )

    def compile_spec(self, pos: int) -> s.CompileSpec:
        f = self.fields(pos, 2, "CompileSpec")
        return s.CompileSpec(self.string(f[0], "CompileSpec.key"), bytes(self.raw(f[1], "CompileSpec.value")))

    def non_const_buffer_device(self, pos: int) -> s.NonConstBufferDevice:
        f = self.fields(pos, 3, "NonConstBufferDevice")
        return s.NonConstBufferDevice(
            self.scalar("<i", f[0]),
            self.enum(_DEVICE_TYPES, f[1], "NonConstBufferDevice.device_type"),
            self.scalar("<b", f[2]),
        )

    def buffer(self, pos: int) -> s.Buffer:
        return s.Buffer(self.raw(self.fields(pos, 1, "Buffer")[0], "Buffer.storage"))

    def inline_data(self, pos: int) -> s.BackendDelegateInlineData:
        f = self.fields(pos, 1, "BackendDelegateInlineData")
        return s.BackendDelegateInlineData(self.raw(f[0], "BackendDelegateInlineData.data"))

    def data_segment(self, pos: int) -> s.DataSegment:
        f = self.fields(pos, 2, "DataSegment")
        return s.DataSegment(self.scalar("<Q", f[0]), self.scalar("<Q", f[1]))

    def subsegment_offsets(self, pos: int) -> s.SubsegmentOffsets:
        f = self.fields(pos, 2, "SubsegmentOffsets")
        return s.SubsegmentOffsets(self.scalar("<I", f[0]), self.scalars("Q", 8, f[1], "SubsegmentOffsets.offsets"))

    def named_data(self, pos: int) -> s.NamedData:
        f = self.fields(pos, 2, "NamedData")
        return s.NamedData(self.string(f[0], "NamedData.key"), self.scalar("<I", f[1]))


def read_flatbuffer(data: memoryview) -> s.Program:
    """The Program in a FlatBuffer image (root offset, identifier, tables); validates as it reads."""
    reader = _Reader(data)
    try:
        return reader.program(reader.ref(0, "the root table offset"))
    except _Corrupt as e:
        reason = str(e)
    except (struct.error, RecursionError, OverflowError, MemoryError) as e:
        reason = f"{type(e).__name__}: {e}"
    raise SerializeError(
        f"the program FlatBuffer is malformed: {reason}; the file is corrupt or not a .pte, re-export it"
    )
