"""Malformed `.pte` bytes always raise SerializeError with a one-line reason, never another
exception: truncations, bad identifiers and headers, out-of-range offsets, bad union tags,
bit flips and random bytes."""

from __future__ import annotations

import random
import struct

import pytest

from _serialize_programs import plan, program, rich_program, tensor  # noqa: E402

from executorch.exir import schema as s
from executorch.exir._serialize import read_program, serialize_pte_binary
from executorch.exir.error import SerializeError

GOOD = serialize_pte_binary(rich_program())
ROOT = struct.unpack_from("<I", GOOD, 0)[0]
_, PROGRAM_SIZE, BASE, SEGMENT_SIZE = struct.unpack_from("<IQQQ", GOOD, 12)


def _rejects(data: bytes, match: str | None = None) -> str:
    with pytest.raises(SerializeError, match=match) as info:
        read_program(data)
    message = str(info.value)
    assert "\n" not in message and len(message) < 400
    return message


def _root_of(data) -> int:
    return struct.unpack_from("<I", data, 0)[0]


def _patched(offset: int, fmt: str, value) -> bytes:
    data = bytearray(GOOD)
    struct.pack_into(fmt, data, offset, value)
    return bytes(data)


def test_the_unmodified_file_reads():
    assert read_program(GOOD) == rich_program()


@pytest.mark.parametrize("size", [0, 1, 4, 7, 8, 11, 12, 16, 23, 31, 39, 40, 41, ROOT, PROGRAM_SIZE - 1, PROGRAM_SIZE,
                                  BASE, BASE + 1, BASE + SEGMENT_SIZE - 1])
def test_truncation_at_each_boundary(size):
    _rejects(GOOD[:size])


def test_every_truncation_is_rejected():
    for size in range(len(GOOD)):
        _rejects(GOOD[:size])


def test_wrong_identifier():
    _rejects(GOOD[:4] + b"ET11" + GOOD[8:], match=r"another format version \(file identifier b'ET11' at offset 4")


def test_not_a_pte_at_all():
    _rejects(b"PK\x03\x04" + bytes(100), match=r"^not a .pte file \(no ET12 identifier at offset 4")
    _rejects(b"# README text, not a program\n",
             match=r"^not a .pte file \(no ET12 identifier at offset 4, found b'ADME'\)")


@pytest.mark.parametrize(
    "offset, fmt, value, match",
    [
        (12, "<I", 8, "header length"),
        (16, "<Q", len(GOOD) + 1, "program size"),
        (16, "<Q", 20, "program size"),
        (24, "<Q", 1, "segment base offset"),
        (24, "<Q", len(GOOD) + 128, "segment base offset"),
        (32, "<Q", 2**63, "segment data"),
        (0, "<I", PROGRAM_SIZE + 100, "root table"),
        (0, "<I", 0xFFFFFFFF, "root table"),
    ],
)
def test_bad_header_fields(offset, fmt, value, match):
    _rejects(_patched(offset, fmt, value), match=match)


def _first_field_position(data: bytes, table: int, field: int) -> int:
    vtable = table - struct.unpack_from("<i", data, table)[0]
    return table + struct.unpack_from("<H", data, vtable + 4 + 2 * field)[0]


def _first_evalue(data: bytes) -> int:
    plans = _first_field_position(data, ROOT, 1)
    plans += struct.unpack_from("<I", data, plans)[0]
    plan = plans + 4 + struct.unpack_from("<I", data, plans + 4)[0]
    values = _first_field_position(data, plan, 2)
    values += struct.unpack_from("<I", data, values)[0]
    return values + 4 + struct.unpack_from("<I", data, values + 4)[0]


@pytest.mark.parametrize("tag", [0, 12, 255])
def test_bad_union_tag(tag):
    tag_at = _first_field_position(GOOD, _first_evalue(GOOD), 0)
    assert GOOD[tag_at] == 1  # the first value is a Null
    _rejects(_patched(tag_at, "<B", tag), match=f"union tag {tag}")


def test_vector_length_past_the_end():
    plans = _first_field_position(GOOD, ROOT, 1)
    vector = plans + struct.unpack_from("<I", GOOD, plans)[0]
    _rejects(_patched(vector, "<I", 2**30), match="past the end")


def test_segment_past_the_end_of_the_file():
    # Drop the last segment's final bytes but keep the header consistent with the shorter file.
    data = bytearray(GOOD[:-2])
    struct.pack_into("<Q", data, 32, SEGMENT_SIZE - 2)
    _rejects(bytes(data), match="segment 3")


def test_aliased_tables_are_refused_not_read_quadratically():
    # Offsets may legally point anywhere forward, so many vector entries can alias one large
    # table: a small file that would decode into a huge Program. Point every plan at plan 0.
    big = plan(values=[tensor([i]) for i in range(300)])
    data = bytearray(serialize_pte_binary(program([big] + [plan(values=[]) for _ in range(299)])))
    plans = _first_field_position(bytes(data), _root_of(data), 1)
    vector = plans + struct.unpack_from("<I", data, plans)[0]
    first = vector + 4 + struct.unpack_from("<I", data, vector + 4)[0]
    for i in range(1, 300):
        at = vector + 4 + 4 * i
        struct.pack_into("<I", data, at, first - at)
    _rejects(bytes(data), match="alias each other")


def _deref(data, pos: int) -> int:
    return pos + struct.unpack_from("<I", data, pos)[0]


def test_aliased_vectors_are_refused():
    # Every tensor's `sizes` pointing at one long vector: few bytes, a huge decoded Program.
    values = [s.EValue(s.IntList(list(range(10_000))))] + [tensor([1]) for _ in range(1000)]
    data = bytearray(serialize_pte_binary(program([plan(values=values)])))
    root = _root_of(data)
    plan_at = _deref(data, _deref(data, _first_field_position(bytes(data), root, 1)) + 4)
    values_at = _deref(data, _first_field_position(bytes(data), plan_at, 2))
    evalues = [_deref(data, values_at + 4 + 4 * i) for i in range(len(values))]
    int_list = _deref(data, _first_field_position(bytes(data), evalues[0], 1))
    items = _deref(data, _first_field_position(bytes(data), int_list, 0))
    for evalue in evalues[1:]:
        tensor_at = _deref(data, _first_field_position(bytes(data), evalue, 1))
        sizes_field = _first_field_position(bytes(data), tensor_at, 2)
        struct.pack_into("<I", data, sizes_field, items - sizes_field)
    _rejects(bytes(data), match="alias each other")


@pytest.mark.parametrize("seed", range(4))
def test_bit_flips_never_escape(seed):
    rng = random.Random(seed)
    for _ in range(100):
        data = bytearray(GOOD)
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(PROGRAM_SIZE)
            data[i] ^= 1 << rng.randrange(8)
        try:
            read_program(bytes(data))
        except SerializeError as e:
            assert "\n" not in str(e)


@pytest.mark.parametrize("seed", range(3))
def test_random_bytes_are_rejected(seed):
    rng = random.Random(seed)
    for _ in range(100):
        data = rng.randbytes(rng.randrange(64, 512))
        _rejects(data[:4] + b"ET12" + data[8:])
