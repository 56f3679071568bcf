"""Upstream's `.pte` tooling names (`_ExtendedHeader`, Program <-> JSON, a union field tagged by `<field>_type`)."""

from __future__ import annotations

import dataclasses
import enum
import json
import typing
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar, Optional, Union

from executorch.exir import schema as s
from executorch.exir._serialize._header import (_LAYOUT, _MIN_HEADER_LENGTH, HEADER_LENGTH, HEADER_MAGIC, HEADER_OFFSET,
                                                ExtendedHeader)
from executorch.exir.error import SerializeError


def _encode(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        out: dict[str, Any] = {}
        unions = _union_fields(type(value))
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if f.name in unions and item is not None:
                out[f"{f.name}_type"] = type(item).__name__
            out[f.name] = _encode(item)
        return out
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return list(bytes(value))
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    return value


@lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, vars(s))


@lru_cache(maxsize=None)
def _union_fields(cls: type) -> frozenset:
    """Fields of `cls` typed as a union of schema tables (the FlatBuffer unions)."""
    names = set()
    for name, hint in _hints(cls).items():
        members = [a for a in typing.get_args(hint) if a is not type(None)]
        if typing.get_origin(hint) is Union and len(members) > 1 and all(dataclasses.is_dataclass(a) for a in members):
            names.add(name)
    return frozenset(names)


def _decode(value: Any, hint: Any, where: str) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(hint)
    if origin is Union:
        members = [a for a in typing.get_args(hint) if a is not type(None)]
        if bytes in members:
            return bytes(value)
        return _decode(value, members[0], where)
    if origin is list:
        (item,) = typing.get_args(hint)
        return [_decode(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
    if dataclasses.is_dataclass(hint):
        return _table(value, hint, where)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint(value)
    if hint is bytes:
        return bytes(value)
    return value


def _table(obj: Any, cls: type, where: str) -> Any:
    if not isinstance(obj, dict):
        raise SerializeError(f"{where}: expected a JSON object for {cls.__name__}, got {type(obj).__name__}; "
                             "pass JSON made by _program_to_json")
    hints, unions, args = _hints(cls), _union_fields(cls), {}
    for f in dataclasses.fields(cls):
        if f.name not in obj:
            continue
        hint = hints[f.name]
        if f.name in unions and obj[f.name] is not None:
            tag = obj.get(f"{f.name}_type")
            member = next((a for a in typing.get_args(hint) if getattr(a, "__name__", None) == tag), None)
            if member is None:
                raise SerializeError(f"{where}.{f.name}: union tag {tag!r} names no member of the field's type; "
                                     f"add '{f.name}_type' naming one of the schema tables")
            hint = member
        args[f.name] = _decode(obj[f.name], hint, f"{where}.{f.name}")
    try:
        return cls(**args)
    except TypeError as e:
        raise SerializeError(f"{where}: cannot build {cls.__name__} ({e}); the JSON lacks a required field") from None


def _program_to_json(program: s.Program) -> str:
    """The JSON text of `program` (segment data included)."""
    return json.dumps(_encode(program))


def _json_to_program(program_json: Union[str, bytes]) -> s.Program:
    """The `Program` that `_program_to_json` wrote as `program_json`."""
    return _table(json.loads(program_json), s.Program, "Program")


@dataclass
class _ExtendedHeader:
    """The extended header as ExecuTorch's tools use it: `from_bytes` reads without judging (`is_valid` does)."""

    program_size: int
    segment_base_offset: int
    segment_data_size: int
    magic: bytes = HEADER_MAGIC
    length: int = HEADER_LENGTH

    EXPECTED_MAGIC: ClassVar[bytes] = HEADER_MAGIC
    EXPECTED_LENGTH: ClassVar[int] = HEADER_LENGTH
    MINIMUM_LENGTH: ClassVar[int] = _MIN_HEADER_LENGTH
    # How many bytes from the start of a file a reader needs to find and read the header.
    NUM_HEAD_BYTES: ClassVar[int] = 64

    @staticmethod
    def from_bytes(data: bytes) -> "_ExtendedHeader":
        """The header fields in `data` (the bytes after the file identifier); ValueError if short."""
        if len(data) < HEADER_LENGTH:
            raise ValueError(f"extended header needs {HEADER_LENGTH} bytes, got {len(data)}")
        magic, length, program_size, segment_base, segment_size = _LAYOUT.unpack_from(data)
        return _ExtendedHeader(program_size, segment_base, segment_size if length > _MIN_HEADER_LENGTH else 0,
                               bytes(magic), length)

    def is_valid(self) -> bool:
        return self.magic == HEADER_MAGIC and self.length >= _MIN_HEADER_LENGTH

    def to_bytes(self) -> bytes:
        return ExtendedHeader(self.program_size, self.segment_base_offset, self.segment_data_size).encode(HEADER_LENGTH)


def _get_extended_header(program_data: bytes) -> Optional[_ExtendedHeader]:
    """The extended header of a `.pte` image when it has a well-formed one, else None."""
    try:
        header = _ExtendedHeader.from_bytes(program_data[HEADER_OFFSET:HEADER_OFFSET + HEADER_LENGTH])
    except ValueError:
        return None
    return header if header.is_valid() else None
