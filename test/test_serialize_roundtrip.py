"""Program -> .pte bytes -> Program is exact, and the bytes have the published layout."""

from __future__ import annotations

import array
import copy
import ctypes
import struct

import pytest

from _serialize_programs import every_instruction, every_value_kind, floats, plan, program, rich_program, tensor  # noqa: E402

from executorch.exir import schema as s
from executorch.exir._serialize import read_program, serialize_pte_binary, serialize_pte_chunks
from executorch.exir.error import SerializeError


def _round_trip(p: s.Program, **kw) -> s.Program:
    before = copy.deepcopy(p)
    data = serialize_pte_binary(p, **kw)
    assert p == before, "serializing must not modify the Program"
    return read_program(data)


def test_minimal_program_round_trips():
    p = program([plan()])
    assert _round_trip(p) == p


def test_program_without_constants_round_trips():
    p = program([plan()], constant_buffer=[])
    assert _round_trip(p) == p


@pytest.mark.parametrize("value", every_value_kind(), ids=lambda v: type(v.val).__name__)
def test_each_value_kind_round_trips(value):
    p = program([plan(values=[value, tensor([1], alloc=s.AllocationDetails(0, 0))])], constants=[floats(1, 2, 3)])
    assert _round_trip(p).execution_plan[0].values[0] == value


@pytest.mark.parametrize("instruction", every_instruction(), ids=lambda i: type(i.instr_args).__name__)
def test_each_instruction_round_trips(instruction):
    p = program([plan(instructions=[instruction])])
    assert _round_trip(p).execution_plan[0].chains[0].instructions == [instruction]


def test_rich_program_round_trips():
    p = rich_program()
    back = _round_trip(p)
    assert back == p
    assert back.execution_plan[0].values[11].val.allocation_info.memory_offset == 5 * 2**32 + 16


@pytest.mark.parametrize("kw", [dict(segment_alignment=4096), dict(constant_tensor_alignment=64),
                                dict(delegate_alignment=32), dict(segment_alignment=1, constant_tensor_alignment=1)])
def test_round_trip_with_other_alignments(kw):
    p = rich_program()
    assert _round_trip(p, **kw) == p


def test_reserialization_is_byte_identical():
    data = serialize_pte_binary(rich_program())
    assert serialize_pte_binary(read_program(data)) == data


def test_layout_matches_the_format():
    p = program([plan(values=[tensor([3], buffer_idx=1), tensor([1], buffer_idx=2)])],
                constants=[floats(1, 2, 3), floats(4)])
    data = serialize_pte_binary(p)
    assert data[4:8] == b"ET12" and data[8:12] == b"eh00"
    length, program_size, base, seg_size = struct.unpack_from("<IQQQ", data, 12)
    assert length == 32 and base % 128 == 0 and base >= program_size
    assert len(data) == base + seg_size
    # Constants: entry 0 is empty, then 12 bytes padded to 16, then the last 4 bytes unpadded.
    assert data[base:] == floats(1, 2, 3) + bytes(4) + floats(4)
    back = read_program(data)
    assert [bytes(b.storage) for b in back.constant_buffer] == [b"", floats(1, 2, 3), floats(4)]


def test_chunks_pass_constant_memory_through_without_copy():
    storage = bytearray(floats(1, 2, 3, 4))
    p = program([plan(values=[tensor([4], buffer_idx=1)])], constants=[memoryview(storage)])
    chunks = serialize_pte_chunks(p)
    assert any(isinstance(c, memoryview) and c.obj is storage for c in chunks)
    assert b"".join(chunks) == serialize_pte_binary(p)


@pytest.mark.parametrize("shape", [None, (2, 3)])
def test_typed_memoryview_is_written_as_its_bytes(shape):
    # A view over tensor memory has an element format (and maybe several dimensions): its
    # length in the file is its byte size, not its element count.
    view = memoryview(array.array("f", [0, 1, 2, 3, 4, 5]))
    if shape:
        view = view.cast("B").cast("f", shape)
    p = program([plan(values=[tensor([6], buffer_idx=1)])], constants=[view])
    back = read_program(serialize_pte_binary(p))
    assert bytes(back.constant_buffer[1].storage) == floats(0, 1, 2, 3, 4, 5)


def test_deserialized_constants_are_views_over_the_input():
    data = serialize_pte_binary(program([plan(values=[tensor([3], buffer_idx=1)])], constants=[floats(1, 2, 3)]))
    back = read_program(data)
    view = back.constant_buffer[1].storage
    assert isinstance(view, memoryview) and view.obj is data


def test_segment_slot_of_constants_must_be_empty():
    p = program([plan()], constants=[floats(1)], segment_data=[b"oops"])
    with pytest.raises(SerializeError, match="constant segment"):
        serialize_pte_binary(p)


def test_constant_segment_index_past_the_segments_is_rejected():
    p = program([plan()], constants=[floats(1)], constant_segment=s.SubsegmentOffsets(5, []), segment_data=[b"x"])
    with pytest.raises(SerializeError, match="segment_index is 5"):
        serialize_pte_binary(p)


def test_constant_segment_after_other_segments_round_trips():
    p = program([plan()], constants=[floats(1)], constant_segment=s.SubsegmentOffsets(1, []), segment_data=[b"blob"])
    assert _round_trip(p) == p


@pytest.mark.parametrize("bad", [0, 3, -16, "16"])
def test_bad_alignment_is_rejected(bad):
    with pytest.raises(SerializeError, match="power of two"):
        serialize_pte_binary(program([plan()]), segment_alignment=bad)


def test_wrong_value_type_is_a_serialize_error():
    p = program([plan(values=[s.EValue(3)])])
    with pytest.raises(SerializeError, match="EValue holds a int"):
        serialize_pte_binary(p)


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda p: p.execution_plan[0].values[0].val.sizes.append(2**31),
         r"execution_plan\[0\].values\[0\].val.sizes\[1\] = 2147483648 does not fit the schema's int32"),
        (lambda p: setattr(p.execution_plan[0], "name", 7), r"execution_plan\[0\].name is a int, not a string"),
        (lambda p: setattr(p, "version", -1), r"Program.version = -1 does not fit the schema's uint32"),
        (lambda p: setattr(p.execution_plan[0].values[0].val, "allocation_info", s.AllocationDetails(0, 2**32)),
         r"memory_offset_low = 4294967296"),
        (lambda p: setattr(p.execution_plan[0], "inputs", None),
         r"execution_plan\[0\].inputs is None; the schema needs a list of int32"),
    ],
)
def test_bad_field_is_named_in_the_error(mutate, match):
    p = program([plan()])
    mutate(p)
    with pytest.raises(SerializeError, match=match):
        serialize_pte_binary(p)


def test_ctypes_view_over_tensor_memory_is_written_without_copy():
    torch = pytest.importorskip("torch")
    weights = torch.arange(4, dtype=torch.float32)
    view = memoryview((ctypes.c_float * 4).from_address(weights.data_ptr()))
    p = program([plan(values=[tensor([4], buffer_idx=1)])], constants=[view])
    chunks = serialize_pte_chunks(p)
    assert any(isinstance(c, memoryview) and c.obj is view.obj for c in chunks)
    back = read_program(b"".join(chunks))
    assert bytes(back.constant_buffer[1].storage) == floats(0, 1, 2, 3)
