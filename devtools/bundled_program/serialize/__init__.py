"""`BundledProgram` <-> `.bpte` bytes, written with the flatbuffers Builder and read directly.

The writer creates objects in the order the published writer's packers do, so both produce the
same bytes; the reader is the bounds-checked reader of the `.pte` path, so tensor data and the
program come back as views over the input (no copies, nothing parsed twice).
"""

from __future__ import annotations

import math
import mmap
import struct

import flatbuffers

import executorch.devtools.bundled_program.schema as bp
from executorch.exir import _dtypes, schema as S
from executorch.exir._serialize._atomic import write_chunks
from executorch.exir._serialize._flatbuffer_reader import _Corrupt, _Reader
from executorch.exir._serialize._flatbuffer_writer import (
    _BOOL,
    _F64,
    _I8,
    _I64,
    _OFFSET,
    _U8,
    _U32,
    _Writer,
    as_byte_view,
)
from executorch.exir.error import SerializeError

FILE_IDENTIFIER = b"BP08"
_PROGRAM_ALIGNMENT = 32
_TENSOR_ALIGNMENT = 16
_TAG = {cls: i + 1 for i, cls in enumerate(bp.VALUE_TYPES)}
_SCALAR_TYPES = {m.value: m for m in S.ScalarType}


def _schema_of(bundled_program) -> bp.BundledProgram:
    if isinstance(bundled_program, bp.BundledProgram):
        return bundled_program
    to_schema = getattr(bundled_program, "serialize_to_schema", None)
    if to_schema is None:
        raise SerializeError(
            f"cannot write a {type(bundled_program).__name__} as a .bpte; pass an "
            "executorch.devtools.BundledProgram (or its serialize_to_schema())")
    return to_schema()


class _BundleWriter(_Writer):
    leave_hole = False
    hole = None

    def bundle(self, p: bp.BundledProgram) -> int:
        suites = self.offsets([self.suite(s) for s in p.method_test_suites])
        program = self.pieces(p.program, _PROGRAM_ALIGNMENT)
        return self.table(3, ((0, _U32, p.version), (1, _OFFSET, suites), (2, _OFFSET, program)))

    def pieces(self, program, alignment: int) -> int:
        """The program as one byte vector, copied piece by piece when given as a list of pieces
        (a program manager's chunks), so the `.pte` is never joined in memory first. With
        `leave_hole`, the vector's bytes are left unwritten and `hole` records where they go (as
        offsets from the buffer's end, which stay valid if the Builder grows)."""
        if not isinstance(program, (list, tuple)) and not self.leave_hole:
            return self.byte_vector(program, alignment, "BundledProgram.program")
        pieces = program if isinstance(program, (list, tuple)) else [program]
        views = [as_byte_view(c, "BundledProgram.program piece") for c in pieces]
        b = self.b
        size = sum(len(v) for v in views)
        b.StartVector(1, size, alignment)
        if self.leave_hole:
            b.head -= size
            self.hole = (b.Offset(), views)
        else:
            for v in reversed(views):
                b.head -= len(v)
                b.Bytes[b.head:b.head + len(v)] = v
        return b.EndVector()

    def suite(self, s: bp.BundledMethodTestSuite) -> int:
        name = self.b.CreateString(s.method_name)
        cases = self.offsets([self.case(c) for c in s.test_cases])
        return self.table(2, ((0, _OFFSET, name), (1, _OFFSET, cases)))

    def case(self, c: bp.BundledMethodTestCase) -> int:
        inputs = self.offsets([self.value(v) for v in c.inputs])
        outputs = self.offsets([self.value(v) for v in c.expected_outputs])
        return self.table(2, ((0, _OFFSET, inputs), (1, _OFFSET, outputs)))

    def value(self, v: bp.Value) -> int:
        val = v.val
        tag = _TAG.get(type(val))
        if tag is None:
            raise SerializeError(
                f"a bundled Value holds a {type(val).__name__}; it must hold a Tensor, Int, Bool or Double "
                "from executorch.devtools.bundled_program.schema")
        if tag == 1:
            sizes = self.scalars("i", 4, val.sizes)
            data = self.byte_vector(val.data, _TENSOR_ALIGNMENT, "bundled Tensor.data")
            order = self.byte_vector(bytes(val.dim_order), 1, "bundled Tensor.dim_order")
            off = self.table(4, ((0, _I8, int(val.scalar_type)), (1, _OFFSET, sizes), (2, _OFFSET, data),
                                 (3, _OFFSET, order)))
        elif tag == 2:
            off = self.table(1, ((0, _I64, val.int_val),))
        elif tag == 3:
            off = self.table(1, ((0, _BOOL, val.bool_val),))
        else:
            off = self.table(1, ((0, _F64, val.double_val),))
        return self.table(2, ((0, _U8, tag), (1, _OFFSET, off)))


def _estimated_size(p: bp.BundledProgram) -> int:
    """Bytes the Builder will need, so it allocates once instead of doubling (and copying)."""
    pieces = p.program if isinstance(p.program, (list, tuple)) else [p.program]
    size = sum(len(as_byte_view(c, "BundledProgram.program")) for c in pieces) + 4096
    for s in p.method_test_suites:
        size += 64 + len(s.method_name)
        for c in s.test_cases:
            for v in (*c.inputs, *c.expected_outputs):
                size += 96
                if isinstance(v.val, bp.Tensor):
                    size += len(as_byte_view(v.val.data, "bundled Tensor.data")) + 8 * len(v.val.sizes)
    return size


def _build(bundled_program, leave_hole: bool) -> _BundleWriter:
    p = _schema_of(bundled_program)
    w = _BundleWriter(1, 1)
    w.leave_hole = leave_hole
    w.b = flatbuffers.Builder(0)
    # An anonymous map instead of bytearray(size): its pages stay unmapped (no zeroing, no resident
    # memory) until the Builder writes them, and a hole left for the program is never touched.
    size = _estimated_size(p)
    w.b.Bytes, w.b.head = mmap.mmap(-1, size), size
    try:
        w.b.Finish(w.bundle(p), file_identifier=FILE_IDENTIFIER)
    except flatbuffers.builder.BuilderSizeError:
        raise SerializeError(
            "cannot write the bundled program: the .bpte would exceed the FlatBuffers 2 GB limit; bundle fewer or "
            "smaller test cases") from None
    except (struct.error, TypeError, ValueError, AttributeError, OverflowError) as e:
        raise SerializeError(
            f"cannot write the bundled program: a field has the wrong type or range ({type(e).__name__}: {e}); "
            "build it with BundledProgram and MethodTestCase") from None
    return w


def serialize_to_view(bundled_program) -> memoryview:
    """The `.bpte` image as a view over the Builder's buffer (no copy of the finished bytes)."""
    b = _build(bundled_program, leave_hole=False).b
    return memoryview(b.Bytes)[b.Head():]


def serialize_from_bundled_program_to_flatbuffer(bundled_program) -> bytes:
    """The `.bpte` bytes of a `BundledProgram` (or of its schema dataclasses)."""
    return bytes(serialize_to_view(bundled_program))


def write_bundled_program(bundled_program, path) -> None:
    """Write the `.bpte` to `path` (atomically) or to an open binary file. The program's bytes go
    from its own pieces straight to the file; the Builder holds only the tables and test data."""
    w = _build(bundled_program, leave_hole=True)
    image = memoryview(w.b.Bytes)
    end, views = w.hole
    start = len(image) - end
    size = sum(len(v) for v in views)
    write_chunks(path, [image[w.b.Head():start], *views, image[start + size:]])


def deserialize_from_flatbuffer_to_bundled_program(flatbuffer) -> bp.BundledProgram:
    """The schema dataclasses of a `.bpte` image; tensor data and `program` are views over it.
    Raises SerializeError, naming what is wrong, for anything but a well-formed `.bpte`."""
    view = as_byte_view(flatbuffer, "the .bpte data")
    if len(view) < 8:
        raise SerializeError(
            f"the .bpte data is {len(view)} bytes, too short for a FlatBuffer; the file is truncated or empty")
    ident = bytes(view[4:8])
    if ident != FILE_IDENTIFIER:
        raise SerializeError(
            f"not a .bpte file (identifier {ident!r} at offset 4, expected {FILE_IDENTIFIER!r}); check the path "
            "names a file written from a BundledProgram")
    r = _Reader(view)
    try:
        bundle = _read_bundle(r)
        _check_tensors(bundle)
        return bundle
    except _Corrupt as e:
        reason = str(e)
    except (struct.error, RecursionError, OverflowError, MemoryError) as e:
        reason = f"{type(e).__name__}: {e}"
    raise SerializeError(f"the .bpte is malformed: {reason}; the file is corrupt or truncated, write it again")


def _check_tensors(bundle: bp.BundledProgram) -> None:
    """Each tensor's data holds exactly what its sizes and dtype say, in an order of its dimensions:
    the runner views the bytes with these sizes, so a mismatch found there would be torch's error."""
    for suite in bundle.method_test_suites:
        for i, case in enumerate(suite.test_cases):
            for role, values in (("input", case.inputs), ("expected output", case.expected_outputs)):
                for j, value in enumerate(values):
                    t = value.val
                    if not isinstance(t, bp.Tensor):
                        continue
                    where = f"method {suite.method_name!r} test case {i} {role} {j}"
                    sizes, order = list(t.sizes), list(t.dim_order)
                    if any(n < 0 for n in sizes):
                        raise _Corrupt(f"{where} has negative sizes {sizes}")
                    if order and sorted(order) != list(range(len(sizes))):
                        raise _Corrupt(f"{where}: dim_order {order} is not an order of its {len(sizes)} dimensions")
                    want = math.prod(sizes) * _dtypes.element_size(t.scalar_type)
                    if len(t.data) != want:
                        raise _Corrupt(f"{where}: sizes {sizes} of {_dtypes.dtype_name(t.scalar_type)} make {want} "
                                       f"bytes; its data holds {len(t.data)}")


def _read_bundle(r: _Reader) -> bp.BundledProgram:
    f = r.fields(r.ref(0, "the root table offset"), 3, "BundledProgram")

    def value(pos: int) -> bp.Value:
        g = r.fields(pos, 2, "Value")
        tag = r.scalar("<B", g[0])
        if not 1 <= tag <= len(bp.VALUE_TYPES) or not g[1]:
            raise _Corrupt(f"a Value has union tag {tag} (valid: 1..{len(bp.VALUE_TYPES)}) or no content")
        at = r.ref(g[1], "Value.val")
        if tag == 1:
            t = r.fields(at, 4, "Tensor")
            return bp.Value(bp.Tensor(r.enum(_SCALAR_TYPES, t[0], "Tensor.scalar_type"),
                                      r.scalars("i", 4, t[1], "Tensor.sizes"), r.raw(t[2], "Tensor.data"),
                                      r.scalars("B", 1, t[3], "Tensor.dim_order")))
        v = r.fields(at, 1, bp.VALUE_TYPES[tag - 1].__name__)[0]
        if tag == 2:
            return bp.Value(bp.Int(r.scalar("<q", v)))
        if tag == 3:
            return bp.Value(bp.Bool(r.scalar("<B", v) != 0))
        return bp.Value(bp.Double(r.scalar("<d", v, 0.0)))

    def case(pos: int) -> bp.BundledMethodTestCase:
        g = r.fields(pos, 2, "BundledMethodTestCase")
        return bp.BundledMethodTestCase(r.tables(g[0], value, "BundledMethodTestCase.inputs"),
                                        r.tables(g[1], value, "BundledMethodTestCase.expected_outputs"))

    def suite(pos: int) -> bp.BundledMethodTestSuite:
        g = r.fields(pos, 2, "BundledMethodTestSuite")
        return bp.BundledMethodTestSuite(r.string(g[0], "BundledMethodTestSuite.method_name"),
                                         r.tables(g[1], case, "BundledMethodTestSuite.test_cases"))

    return bp.BundledProgram(r.scalar("<I", f[0]), r.tables(f[1], suite, "BundledProgram.method_test_suites"),
                             r.raw(f[2], "BundledProgram.program"))
