"""Writes a `Program` as FlatBuffer bytes (schema/program.fbs) with the flatbuffers Builder.

Tables, vectors and strings are created in the same order as flatc's generated object-API
`Pack` code (children in field order, then the table's fields in field order), so the bytes
match those of the published exporter. Tables and scalar/offset vectors are laid out here
exactly as the Builder's per-field calls would lay them out, with one `struct.pack_into` per
table or vector instead of several Python calls per element; strings and byte vectors go
through the Builder itself.
"""

from __future__ import annotations

import struct

from executorch.exir import schema as s
from executorch.exir._serialize._field_check import find_bad_field
from executorch.exir.error import SerializeError

FILE_IDENTIFIER = b"ET12"

_I8, _U8, _BOOL = struct.Struct("<b"), struct.Struct("<B"), struct.Struct("<?")
_I32, _U32, _I64, _U64, _F64 = (struct.Struct(f) for f in ("<i", "<I", "<q", "<Q", "<d"))
# Offsets to other objects: written relative to their own position.
_OFFSET = struct.Struct("<I")

_K = s.KernelTypesTag
_I = s.InstructionArgumentsTag


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
        import flatbuffers  # writing only: reading a .pte needs no flatbuffers package

        self.b = flatbuffers.Builder(1 << 16)
        self.vtables: dict[tuple[int, ...], int] = {}
        self.tensor_alignment = tensor_alignment
        self.delegate_alignment = delegate_alignment

    # Vectors ------------------------------------------------------------------------------

    def scalars(self, fmt: str, size: int, items) -> int:
        # As StartVector(size, n, size) + n Prepends + EndVector: align the data to its element
        # size and the length prefix to 4, then write both at once.
        b = self.b
        n = len(items)
        nbytes = size * n
        b.Prep(4, nbytes)
        if size > 4:
            b.Prep(size, nbytes)
        head = b.head - nbytes
        struct.pack_into(f"<{n}{fmt}", b.Bytes, head, *items)
        head -= 4
        _U32.pack_into(b.Bytes, head, n)
        b.head = head
        return len(b.Bytes) - head

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

    def table(self, nfields: int, fields) -> int:
        """Writes a table whose fields are (slot, Struct, value) in the order flatc adds them.

        Lays the table out as the Builder's StartObject / Prepend*Slot / EndObject would, without
        a method call per field: each non-default value (every default in the schema is zero)
        is aligned to its size and placed, offsets relative to where they land; then the
        table's vtable offset, and its vtable unless an identical one was already written."""
        b = self.b
        b.Prep(1, 16 * len(fields) + 2 * nfields + 16)  # room for everything below; aligns nothing
        buf = b.Bytes
        end = len(buf)
        head = b.head
        object_end = end - head
        slots = [0] * nfields
        for slot, st, value in fields:
            if not value:
                continue
            size = st.size
            pad = (head - end) & (size - 1)
            if pad:
                buf[head - pad : head] = bytes(pad)
                head -= pad
            head -= size
            if st is _OFFSET:
                value = end - head - value
            st.pack_into(buf, head, value)
            slots[slot] = end - head
            if size > b.minalign:
                b.minalign = size
        pad = (head - end) & 3
        if pad:
            buf[head - pad : head] = bytes(pad)
            head -= pad
        head -= 4  # the offset to this table's vtable, filled in below
        if b.minalign < 4:
            b.minalign = 4
        table = end - head
        while slots and not slots[-1]:
            slots.pop()
        vtable = [4 + 2 * len(slots), table - object_end] + [table - x if x else 0 for x in slots]
        key = tuple(vtable)
        known = self.vtables.get(key)
        if known is None:
            head -= 2 * len(vtable)
            struct.pack_into(f"<{len(vtable)}H", buf, head, *vtable)
            known = self.vtables[key] = end - head
        _I32.pack_into(buf, end - table, known - table)
        b.head = head
        return table

    # Tables, in schema order --------------------------------------------------------------

    def program(self, p: s.Program) -> int:
        plans = self.offsets([self.execution_plan(x) for x in p.execution_plan])
        const = self.offsets([self.buffer(x) for x in p.constant_buffer])
        inline = self.offsets([self.inline_data(x) for x in p.backend_delegate_data])
        segments = self.offsets([self.data_segment(x) for x in p.segments])
        const_seg = self.subsegment_offsets(p.constant_segment)
        mutable = named = 0
        if p.mutable_data_segments is not None:
            mutable = self.offsets([self.subsegment_offsets(x) for x in p.mutable_data_segments])
        if p.named_data is not None:
            named = self.offsets([self.named_data(x) for x in p.named_data])
        return self.table(8, (
            (0, _U32, p.version), (1, _OFFSET, plans), (2, _OFFSET, const), (3, _OFFSET, inline),
            (4, _OFFSET, segments), (5, _OFFSET, const_seg), (6, _OFFSET, mutable), (7, _OFFSET, named),
        ))

    def execution_plan(self, p: s.ExecutionPlan) -> int:
        name = self.b.CreateString(p.name)
        meta = self.container_metadata(p.container_meta_type)
        values = self.offsets([self.evalue(v) for v in p.values])
        inputs = self.scalars("i", 4, p.inputs)
        outputs = self.scalars("i", 4, p.outputs)
        chains = self.offsets([self.chain(c) for c in p.chains])
        operators = self.offsets([self.operator(o) for o in p.operators])
        delegates = self.offsets([self.backend_delegate(d) for d in p.delegates])
        sizes = self.scalars("q", 8, p.non_const_buffer_sizes)
        devices = 0
        if p.non_const_buffer_device is not None:
            devices = self.offsets([self.non_const_buffer_device(d) for d in p.non_const_buffer_device])
        return self.table(10, (
            (0, _OFFSET, name), (1, _OFFSET, meta), (2, _OFFSET, values), (3, _OFFSET, inputs),
            (4, _OFFSET, outputs), (5, _OFFSET, chains), (6, _OFFSET, operators), (7, _OFFSET, delegates),
            (8, _OFFSET, sizes), (9, _OFFSET, devices),
        ))

    def container_metadata(self, m: s.ContainerMetadata) -> int:
        inp = self.b.CreateString(m.encoded_inp_str)
        out = self.b.CreateString(m.encoded_out_str)
        return self.table(2, ((0, _OFFSET, inp), (1, _OFFSET, out)))

    def evalue(self, v: s.EValue) -> int:
        val = v.val
        tag = s.KERNEL_TYPE_TAG.get(type(val))
        if tag is None:
            raise SerializeError(
                f"EValue holds a {type(val).__name__}; an EValue must hold one of "
                f"{', '.join(c.__name__ for c in s.KERNEL_TYPES)} from exir.schema"
            )
        if tag == _K.TENSOR:
            off = self.tensor(val)
        elif tag == _K.INT:
            off = self.table(1, ((0, _I64, val.int_val),))
        elif tag == _K.NULL:
            off = self.table(0, ())
        elif tag == _K.BOOL:
            off = self.table(1, ((0, _BOOL, val.bool_val),))
        elif tag == _K.DOUBLE:
            off = self.table(1, ((0, _F64, val.double_val),))
        elif tag == _K.STRING:
            off = self.table(1, ((0, _OFFSET, self.b.CreateString(val.string_val)),))
        else:
            if tag == _K.INT_LIST:
                items = self.scalars("q", 8, val.items)
            elif tag == _K.DOUBLE_LIST:
                items = self.scalars("d", 8, val.items)
            elif tag == _K.BOOL_LIST:
                items = self.scalars("?", 1, val.items)
            else:
                items = self.scalars("i", 4, val.items)
            off = self.table(1, ((0, _OFFSET, items),))
        return self.table(2, ((0, _U8, tag), (1, _OFFSET, off)))

    def tensor(self, t: s.Tensor) -> int:
        sizes = self.scalars("i", 4, t.sizes)
        dim_order = self.scalars("B", 1, t.dim_order)
        alloc = t.allocation_info
        alloc_off = extra_off = 0
        if alloc is not None:
            alloc_off = self.table(3, (
                (0, _U32, alloc.memory_id), (1, _U32, alloc.memory_offset_low), (2, _U32, alloc.memory_offset_high),
            ))
        if t.extra_tensor_info is not None:
            extra_off = self.extra_tensor_info(t.extra_tensor_info)
        return self.table(10, (
            (0, _I8, t.scalar_type), (1, _I32, t.storage_offset), (2, _OFFSET, sizes), (3, _OFFSET, dim_order),
            (4, _BOOL, t.requires_grad), (5, _U32, t.data_buffer_idx), (6, _OFFSET, alloc_off),
            (7, _I8, t.layout), (8, _I8, t.shape_dynamism), (9, _OFFSET, extra_off),
        ))

    def extra_tensor_info(self, e: s.ExtraTensorInfo) -> int:
        fqn = 0 if e.fully_qualified_name is None else self.b.CreateString(e.fully_qualified_name)
        return self.table(5, (
            (0, _U64, e.mutable_data_segments_idx), (1, _OFFSET, fqn), (2, _I8, e.location),
            (3, _I8, e.device_type), (4, _I8, e.device_index),
        ))

    def operator(self, o: s.Operator) -> int:
        name = self.b.CreateString(o.name)
        overload = self.b.CreateString(o.overload)
        return self.table(2, ((0, _OFFSET, name), (1, _OFFSET, overload)))

    def instruction(self, i: s.Instruction) -> int:
        a = i.instr_args
        tag = s.INSTRUCTION_TAG.get(type(a))
        if tag is None:
            raise SerializeError(
                f"Instruction holds a {type(a).__name__}; an Instruction must hold one of "
                f"{', '.join(c.__name__ for c in s.INSTRUCTION_TYPES)} from exir.schema"
            )
        if tag == _I.KERNEL_CALL:
            off = self.table(2, ((0, _I32, a.op_index), (1, _OFFSET, self.scalars("i", 4, a.args))))
        elif tag == _I.DELEGATE_CALL:
            off = self.table(2, ((0, _I32, a.delegate_index), (1, _OFFSET, self.scalars("i", 4, a.args))))
        elif tag == _I.MOVE_CALL:
            off = self.table(2, ((0, _I32, a.move_from), (1, _I32, a.move_to)))
        elif tag == _I.JUMP_FALSE_CALL:
            off = self.table(2, ((0, _I32, a.cond_value_index), (1, _I32, a.destination_instruction)))
        else:
            off = self.table(1, ((0, _I32, a.value_index),))
        return self.table(2, ((0, _U8, tag), (1, _OFFSET, off)))

    def chain(self, c: s.Chain) -> int:
        inputs = self.scalars("i", 4, c.inputs)
        outputs = self.scalars("i", 4, c.outputs)
        instructions = self.offsets([self.instruction(i) for i in c.instructions])
        stack = 0
        if c.stacktrace is not None:
            stack = self.offsets([self.frame_list(f) for f in c.stacktrace])
        return self.table(4, ((0, _OFFSET, inputs), (1, _OFFSET, outputs), (2, _OFFSET, instructions),
                              (3, _OFFSET, stack)))

    def frame_list(self, f: s.FrameList) -> int:
        return self.table(1, ((0, _OFFSET, self.offsets([self.frame(x) for x in f.items])),))

    def frame(self, f: s.Frame) -> int:
        filename = self.b.CreateString(f.filename)
        name = self.b.CreateString(f.name)
        context = self.b.CreateString(f.context)
        return self.table(4, ((0, _OFFSET, filename), (1, _I32, f.lineno), (2, _OFFSET, name),
                              (3, _OFFSET, context)))

    def backend_delegate(self, d: s.BackendDelegate) -> int:
        ident = self.b.CreateString(d.id)
        processed = self.table(2, ((0, _I8, d.processed.location), (1, _U32, d.processed.index)))
        specs = self.offsets([self.compile_spec(c) for c in d.compile_specs])
        return self.table(3, ((0, _OFFSET, ident), (1, _OFFSET, processed), (2, _OFFSET, specs)))

    def compile_spec(self, c: s.CompileSpec) -> int:
        key = self.b.CreateString(c.key)
        value = self.byte_vector(c.value, 1, f"CompileSpec {c.key!r} value")
        return self.table(2, ((0, _OFFSET, key), (1, _OFFSET, value)))

    def non_const_buffer_device(self, d: s.NonConstBufferDevice) -> int:
        return self.table(3, ((0, _I32, d.buffer_idx), (1, _I8, d.device_type), (2, _I8, d.device_index)))

    def buffer(self, buf: s.Buffer) -> int:
        storage = self.byte_vector(buf.storage, self.tensor_alignment, "Buffer.storage")
        return self.table(1, ((0, _OFFSET, storage),))

    def inline_data(self, d: s.BackendDelegateInlineData) -> int:
        data = self.byte_vector(d.data, self.delegate_alignment, "BackendDelegateInlineData.data")
        return self.table(1, ((0, _OFFSET, data),))

    def data_segment(self, d: s.DataSegment) -> int:
        return self.table(2, ((0, _U64, d.offset), (1, _U64, d.size)))

    def subsegment_offsets(self, o: s.SubsegmentOffsets) -> int:
        offsets = self.scalars("Q", 8, o.offsets)
        return self.table(2, ((0, _U32, o.segment_index), (1, _OFFSET, offsets)))

    def named_data(self, n: s.NamedData) -> int:
        key = self.b.CreateString(n.key)
        return self.table(2, ((0, _OFFSET, key), (1, _U32, n.segment_index)))


def write_flatbuffer(program: s.Program, *, tensor_alignment: int, delegate_alignment: int) -> memoryview:
    """The FlatBuffer image of `program` (identifier "ET12"), as a view over the Builder's buffer."""
    from flatbuffers.builder import BuilderSizeError

    writer = _Writer(tensor_alignment, delegate_alignment)
    try:
        root = writer.program(program)
        writer.b.Finish(root, file_identifier=FILE_IDENTIFIER)
    except SerializeError:
        raise
    except BuilderSizeError:
        raise SerializeError(
            "cannot write the Program: its FlatBuffer would exceed the format's 2 GB limit; keep large "
            "data out of the FlatBuffer (constants in constant_buffer, delegate blobs in segment_data)"
        ) from None
    except (struct.error, TypeError, ValueError, AttributeError, OverflowError) as e:
        bad = find_bad_field(program)
        if bad:
            raise SerializeError(f"cannot write the Program: {bad}; fix that value (it must fit the schema)") from None
        raise SerializeError(
            f"cannot write the Program: a field has the wrong type ({type(e).__name__}: {e}); "
            "build it from the exir.schema dataclasses"
        ) from None
    b = writer.b
    return memoryview(b.Bytes)[b.Head() :]
