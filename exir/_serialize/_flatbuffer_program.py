"""Upstream's names for a Program's FlatBuffer image alone (no extended header, no segments), both ways."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from executorch.exir import schema
from executorch.exir._serialize._alignment import DEFAULT_TENSOR_ALIGNMENT, check_alignment
from executorch.exir._serialize._flatbuffer_reader import read_flatbuffer
from executorch.exir._serialize._flatbuffer_writer import write_flatbuffer


@dataclass(frozen=True)
class _FlatbufferResult:
    """The FlatBuffer bytes, and the largest alignment any of its byte vectors asked for."""

    data: bytes
    max_alignment: int


def _program_to_flatbuffer(program: schema.Program, *, constant_tensor_alignment: Optional[int] = None,
                           delegate_alignment: Optional[int] = None) -> _FlatbufferResult:
    """`program` as a FlatBuffer; constant and inline delegate bytes aligned as asked (default 16). An
    alignment that is not a power of two is a ValueError."""
    tensor = check_alignment("constant_tensor_alignment", constant_tensor_alignment or DEFAULT_TENSOR_ALIGNMENT)
    delegate = check_alignment("delegate_alignment", delegate_alignment or DEFAULT_TENSOR_ALIGNMENT)
    data = write_flatbuffer(program, tensor_alignment=tensor, delegate_alignment=delegate)
    return _FlatbufferResult(bytes(data), max(tensor, delegate))


def _flatbuffer_to_program(program_data: bytes) -> schema.Program:
    """The Program a FlatBuffer (or a whole .pte, read from its start) holds, as written: segments are not
    read, and the program's tables still point into them."""
    return read_flatbuffer(memoryview(program_data))
