"""Writes a `Program` as FlatBuffer bytes (schema/program.fbs) with the flatbuffers Builder.

Tables, vectors and strings are created in the same order as flatc's generated object-API
`Pack` code (children in field order, then the table's fields in field order), so the bytes
match those of the published exporter. Scalar and offset vectors are filled with one
`struct.pack_into` each instead of one Builder call per element.
"""

from __future__ import annotations

import struct

import flatbuffers

from executorch.exir import schema as s
from executorch.exir.error import SerializeError

FILE_IDENTIFIER = b"ET12"

_KERNEL_TAG = {cls: i + 1 for i, cls in enumerate(s.KERNEL_TYPES)}
_INSTRUCTION_TAG = {cls: i + 1 for i, cls in enumerate(s.INSTRUCTION_TYPES)}


def as_byte_view(data: s.BytesLike, what: str) -> memoryview:
    """A flat unsigned-byte view of `data` (no copy); raises SerializeError if it has none."""
    try:
        view = memoryview(data)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
    except (TypeError, ValueError) as e:
        raise SerializeError(
            f"{what} is a {type(data).__name__}, not a contiguous bytes-like object ({e}); "
            "pass bytes, bytearray or a memoryview over contiguous memory"
        ) from None
    return view


class _Writer:
    def __init__(self, tensor_alignment: int, delegate_alignment: int):
        self.b = flatbuffers.Builder(1 << 16)
        self.tensor_alignment = tensor_alignment
        self.delegate_alignment = delegate_alignment

    # Vectors ------------------------------------------------------------------------------

    def scalars(self, fmt: str, size: int, items) -> int:
        b = self.b
        n = len(items)
        b.StartVector(size, n, size)
        b.head -= size * n
        struct.pack_into(f"<{n}{fmt}", b.Bytes, b.head, *items)
        return b.EndVector()

    def offsets(self, offs: list[int]) -> int:
        # Each element is relative to its own position: element i ends up at builder offset
        # base + 4 * (n - i), where base is the builder offset once the vector is started.
        b = self.b
        n = len(offs)
        base = b.StartVector(4, n, 4)
        b.head -= 4 * n
        struct.pack_into(f"<{n}I", b.Bytes, b.head, *[base + 4 * (n - i) - o for i, o in enumerate(offs)])
        return b.EndVector()

    def byte_vector(self, data: s.BytesLike, alignment: int, what: str) -> int:
        b = self.b
        view = as_byte_view(data, what)
        n = view.nbytes
        b.StartVector(1, n, alignment)
        b.head -= n
        b.Bytes[b.head : b.head + n] = view
        return b.EndVector()

    # Tables, in schema order --------------------------------------------------------------

    def program(self, p: s.Program) -> int:
        b = self.b
        plans = self.offsets([self.execution_plan(x) for x in p.execution_plan])
        const = self.offsets([self.buffer(x) for x in p.constant_buffer])
        inline = self.offsets([self.inline_data(x) for x in p.backend_delegate_data])
        segments = self.offsets([self.data_segment(x) for x in p.segments])
        const_seg = self.subsegment_offsets(p.constant_segment)
        mutable = None
        if p.mutable_data_segments is not None:
            mutable = self.offsets([self.subsegment_offsets(x) for x in p.mutable_data_segments])
        named = None
        if p.named_data is not None:
            named = self.offsets([self.named_data(x) for x in p.named_data])
        b.StartObject(8)
        b.PrependUint32Slot(0, p.version, 0)
        b.PrependUOffsetTRelativeSlot(1, plans, 0)
        b.PrependUOffsetTRelativeSlot(2, const, 0)
        b.PrependUOffsetTRelativeSlot(3, inline, 0)
        b.PrependUOffsetTRelativeSlot(4, segments, 0)
        b.PrependUOffsetTRelativeSlot(5, const_seg, 0)
        if mutable is not None:
            b.PrependUOffsetTRelativeSlot(6, mutable, 0)
        if named is not None:
            b.PrependUOffsetTRelativeSlot(7, named, 0)
        return b.EndObject()

    def execution_plan(self, p: s.ExecutionPlan) -> int:
        b = self.b
        name = b.CreateString(p.name)
        meta = self.container_metadata(p.container_meta_type)
        values = self.offsets([self.evalue(v) for v in p.values])
        inputs = self.scalars("i", 4, p.inputs)
        outputs = self.scalars("i", 4, p.outputs)
        chains = self.offsets([self.chain(c) for c in p.chains])
        operators = self.offsets([self.operator(o) for o in p.operators])
        delegates = self.offsets([self.backend_delegate(d) for d in p.delegates])
        sizes = self.scalars("q", 8, p.non_const_buffer_sizes)
        devices = None
        if p.non_const_buffer_device is not None:
            devices = self.offsets([self.non_const_buffer_device(d) for d in p.non_const_buffer_device])
        b.StartObject(10)
        b.PrependUOffsetTRelativeSlot(0, name, 0)
        b.PrependUOffsetTRelativeSlot(1, meta, 0)
        b.PrependUOffsetTRelativeSlot(2, values, 0)
        b.PrependUOffsetTRelativeSlot(3, inputs, 0)
        b.PrependUOffsetTRelativeSlot(4, outputs, 0)
        b.PrependUOffsetTRelativeSlot(5, chains, 0)
        b.PrependUOffsetTRelativeSlot(6, operators, 0)
        b.PrependUOffsetTRelativeSlot(7, delegates, 0)
        b.PrependUOffsetTRelativeSlot(8, sizes, 0)
        if devices is not None:
            b.PrependUOffsetTRelativeSlot(9, devices, 0)
        return b.EndObject()

    def container_metadata(self, m: s.ContainerMetadata) -> int:
        b = self.b
        inp = b.CreateString(m.encoded_inp_str)
        out = b.CreateString(m.encoded_out_str)
        b.StartObject(2)
        b.PrependUOffsetTRelativeSlot(0, inp, 0)
        b.PrependUOffsetTRelativeSlot(1, out, 0)
        return b.EndObject()

    def evalue(self, v: s.EValue) -> int:
        val = v.val
        tag = _KERNEL_TAG.get(type(val))
        if tag is None:
            raise SerializeError(
                f"EValue holds a {type(val).__name__}; an EValue must hold one of "
                f"{', '.join(c.__name__ for c in s.KERNEL_TYPES)} from exir.schema"
            )
        b = self.b
        if tag == 5:
            off = self.tensor(val)
        elif tag == 2:
            b.StartObject(1)
            b.PrependInt64Slot(0, val.int_val, 0)
            off = b.EndObject()
        elif tag == 1:
            b.StartObject(0)
            off = b.EndObject()
        elif tag == 3:
            b.StartObject(1)
            b.PrependBoolSlot(0, val.bool_val, False)
            off = b.EndObject()
        elif tag == 4:
            b.StartObject(1)
            b.PrependFloat64Slot(0, val.double_val, 0.0)
            off = b.EndObject()
        elif tag == 6:
            string = b.CreateString(val.string_val)
            b.StartObject(1)
            b.PrependUOffsetTRelativeSlot(0, string, 0)
            off = b.EndObject()
        else:
            if tag == 7:
                items = self.scalars("q", 8, val.items)
            elif tag == 8:
                items = self.scalars("d", 8, val.items)
            elif tag == 9:
                items = self.scalars("?", 1, val.items)
            else:
                items = self.scalars("i", 4, val.items)
            b.StartObject(1)
            b.PrependUOffsetTRelativeSlot(0, items, 0)
            off = b.EndObject()
        b.StartObject(2)
        b.PrependUint8Slot(0, tag, 0)
        b.PrependUOffsetTRelativeSlot(1, off, 0)
        return b.EndObject()

    def tensor(self, t: s.Tensor) -> int:
        b = self.b
        sizes = self.scalars("i", 4, t.sizes)
        dim_order = self.scalars("B", 1, t.dim_order)
        alloc = t.allocation_info
        if alloc is not None:
            b.StartObject(3)
            b.PrependUint32Slot(0, alloc.memory_id, 0)
            b.PrependUint32Slot(1, alloc.memory_offset_low, 0)
            b.PrependUint32Slot(2, alloc.memory_offset_high, 0)
            alloc_off = b.EndObject()
        extra = t.extra_tensor_info
        if extra is not None:
            extra_off = self.extra_tensor_info(extra)
        b.StartObject(10)
        b.PrependInt8Slot(0, t.scalar_type, 0)
        b.PrependInt32Slot(1, t.storage_offset, 0)
        b.PrependUOffsetTRelativeSlot(2, sizes, 0)
        b.PrependUOffsetTRelativeSlot(3, dim_order, 0)
        b.PrependBoolSlot(4, t.requires_grad, False)
        b.PrependUint32Slot(5, t.data_buffer_idx, 0)
        if alloc is not None:
            b.PrependUOffsetTRelativeSlot(6, alloc_off, 0)
        b.PrependInt8Slot(7, t.layout, 0)
        b.PrependInt8Slot(8, t.shape_dynamism, 0)
        if extra is not None:
            b.PrependUOffsetTRelativeSlot(9, extra_off, 0)
        return b.EndObject()

    def extra_tensor_info(self, e: s.ExtraTensorInfo) -> int:
        b = self.b
        fqn = None if e.fully_qualified_name is None else b.CreateString(e.fully_qualified_name)
        b.StartObject(5)
        b.PrependUint64Slot(0, e.mutable_data_segments_idx, 0)
        if fqn is not None:
            b.PrependUOffsetTRelativeSlot(1, fqn, 0)
        b.PrependInt8Slot(2, e.location, 0)
        b.PrependInt8Slot(3, e.device_type, 0)
        b.PrependInt8Slot(4, e.device_index, 0)
        return b.EndObject()

    def operator(self, o: s.Operator) -> int:
        b = self.b
        name = b.CreateString(o.name)
        overload = b.CreateString(o.overload)
        b.StartObject(2)
        b.PrependUOffsetTRelativeSlot(0, name, 0)
        b.PrependUOffsetTRelativeSlot(1, overload, 0)
        return b.EndObject()

    def instruction(self, i: s.Instruction) -> int:
        b = self.b
        a = i.instr_args
        tag = _INSTRUCTION_TAG.get(type(a))
        if tag is None:
            raise SerializeError(
                f"Instruction holds a {type(a).__name__}; an Instruction must hold one of "
                f"{', '.join(c.__name__ for c in s.INSTRUCTION_TYPES)} from exir.schema"
            )
        if tag <= 2:
            args = self.scalars("i", 4, a.args)
            b.StartObject(2)
            b.PrependInt32Slot(0, a.op_index if tag == 1 else a.delegate_index, 0)
            b.PrependUOffsetTRelativeSlot(1, args, 0)
        elif tag == 3:
            b.StartObject(2)
            b.PrependInt32Slot(0, a.move_from, 0)
            b.PrependInt32Slot(1, a.move_to, 0)
        elif tag == 4:
            b.StartObject(2)
            b.PrependInt32Slot(0, a.cond_value_index, 0)
            b.PrependInt32Slot(1, a.destination_instruction, 0)
        else:
            b.StartObject(1)
            b.PrependInt32Slot(0, a.value_index, 0)
        off = b.EndObject()
        b.StartObject(2)
        b.PrependUint8Slot(0, tag, 0)
        b.PrependUOffsetTRelativeSlot(1, off, 0)
        return b.EndObject()

    def chain(self, c: s.Chain) -> int:
        b = self.b
        inputs = self.scalars("i", 4, c.inputs)
        outputs = self.scalars("i", 4, c.outputs)
        instructions = self.offsets([self.instruction(i) for i in c.instructions])
        stack = None
        if c.stacktrace is not None:
            stack = self.offsets([self.frame_list(f) for f in c.stacktrace])
        b.StartObject(4)
        b.PrependUOffsetTRelativeSlot(0, inputs, 0)
        b.PrependUOffsetTRelativeSlot(1, outputs, 0)
        b.PrependUOffsetTRelativeSlot(2, instructions, 0)
        if stack is not None:
            b.PrependUOffsetTRelativeSlot(3, stack, 0)
        return b.EndObject()

    def frame_list(self, f: s.FrameList) -> int:
        b = self.b
        items = self.offsets([self.frame(x) for x in f.items])
        b.StartObject(1)
        b.PrependUOffsetTRelativeSlot(0, items, 0)
        return b.EndObject()

    def frame(self, f: s.Frame) -> int:
        b = self.b
        filename = b.CreateString(f.filename)
        name = b.CreateString(f.name)
        context = b.CreateString(f.context)
        b.StartObject(4)
        b.PrependUOffsetTRelativeSlot(0, filename, 0)
        b.PrependInt32Slot(1, f.lineno, 0)
        b.PrependUOffsetTRelativeSlot(2, name, 0)
        b.PrependUOffsetTRelativeSlot(3, context, 0)
        return b.EndObject()

    def backend_delegate(self, d: s.BackendDelegate) -> int:
        b = self.b
        ident = b.CreateString(d.id)
        b.StartObject(2)
        b.PrependInt8Slot(0, d.processed.location, 0)
        b.PrependUint32Slot(1, d.processed.index, 0)
        processed = b.EndObject()
        specs = self.offsets([self.compile_spec(c) for c in d.compile_specs])
        b.StartObject(3)
        b.PrependUOffsetTRelativeSlot(0, ident, 0)
        b.PrependUOffsetTRelativeSlot(1, processed, 0)
        b.PrependUOffsetTRelativeSlot(2, specs, 0)
        return b.EndObject()

    def compile_spec(self, c: s.CompileSpec) -> int:
        b = self.b
        key = b.CreateString(c.key)
        value = self.byte_vector(c.value, 1, f"CompileSpec {c.key!r} value")
        b.StartObject(2)
        b.PrependUOffsetTRelativeSlot(0, key, 0)
        b.PrependUOffsetTRelativeSlot(1, value, 0)
        return b.EndObject()

    def non_const_buffer_device(self, d: s.NonConstBufferDevice) -> int:
        b = self.b
        b.StartObject(3)
        b.PrependInt32Slot(0, d.buffer_idx, 0)
        b.PrependInt8Slot(1, d.device_type, 0)
        b.PrependInt8Slot(2, d.device_index, 0)
        return b.EndObject()

    def buffer(self, buf: s.Buffer) -> int:
        b = self.b
        storage = self.byte_vector(buf.storage, self.tensor_alignment, "Buffer.storage")
        b.StartObject(1)
        b.PrependUOffsetTRelativeSlot(0, storage, 0)
        return b.EndObject()

    def inline_data(self, d: s.BackendDelegateInlineData) -> int:
        b = self.b
        data = self.byte_vector(d.data, self.delegate_alignment, "BackendDelegateInlineData.data")
        b.StartObject(1)
        b.PrependUOffsetTRelativeSlot(0, data, 0)
        return b.EndObject()

    def data_segment(self, d: s.DataSegment) -> int:
        b = self.b
        b.StartObject(2)
        b.PrependUint64Slot(0, d.offset, 0)
        b.PrependUint64Slot(1, d.size, 0)
        return b.EndObject()

    def subsegment_offsets(self, o: s.SubsegmentOffsets) -> int:
        b = self.b
        offsets = self.scalars("Q", 8, o.offsets)
        b.StartObject(2)
        b.PrependUint32Slot(0, o.segment_index, 0)
        b.PrependUOffsetTRelativeSlot(1, offsets, 0)
        return b.EndObject()

    def named_data(self, n: s.NamedData) -> int:
        b = self.b
        key = b.CreateString(n.key)
        b.StartObject(2)
        b.PrependUOffsetTRelativeSlot(0, key, 0)
        b.PrependUint32Slot(1, n.segment_index, 0)
        return b.EndObject()


def write_flatbuffer(program: s.Program, *, tensor_alignment: int, delegate_alignment: int) -> memoryview:
    """The FlatBuffer image of `program` (identifier "ET12"), as a view over the Builder's buffer."""
    writer = _Writer(tensor_alignment, delegate_alignment)
    try:
        root = writer.program(program)
        writer.b.Finish(root, file_identifier=FILE_IDENTIFIER)
    except SerializeError:
        raise
    except (struct.error, TypeError, ValueError, AttributeError, OverflowError) as e:
        raise SerializeError(
            f"cannot write the Program: a field has the wrong type or is out of range ({e}); "
            "build it from the exir.schema dataclasses with values the schema allows"
        ) from None
    b = writer.b
    return memoryview(b.Bytes)[b.Head() :]
