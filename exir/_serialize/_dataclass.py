"""Schema dataclasses <-> the JSON flatc reads and writes (`_DataclassEncoder`, `_json_to_dataclass`), as vendor
serializers (Vulkan's) call them to build their payloads with `_flatbuffer._flatc_compile`."""

from __future__ import annotations

import enum
import json
import typing
from dataclasses import fields, is_dataclass
from typing import Any, Union


def _string_union(cls: type, name: str, annotation: Any) -> bool:
    # Only a union named in a string annotation carries a `<field>_type` tag, as flatc's JSON unions do;
    # the encoder and the decoder must agree on it, or the tag and the value part ways.
    return isinstance(annotation, str) and typing.get_origin(typing.get_type_hints(cls)[name]) is Union


class _DataclassEncoder(json.JSONEncoder):
    """`json.dumps(obj, cls=_DataclassEncoder)`: a dataclass as an object of its fields in declaration order (a
    union field followed by `<field>_type`, its member's class name), bytes as a list of ints. IntEnums are ints."""

    def default(self, o: Any) -> Any:
        if is_dataclass(o) and not isinstance(o, type):
            out = {}
            for f in fields(o):
                out[f.name] = getattr(o, f.name)
                if _string_union(type(o), f.name, f.type):
                    out[f"{f.name}_type"] = type(out[f.name]).__name__
            return out
        if isinstance(o, bytes):
            return list(o)
        return super().default(o)


def _json_to_dataclass(json_dict: Any, cls: Any = None) -> Any:
    """An instance of dataclass `cls` from the JSON object `json_dict` (as flatc writes it: enums by name, a union
    by its `<field>_type` tag); a missing field that is not Optional is a TypeError. Non-dataclass `cls`: as is."""
    if not is_dataclass(cls) or is_dataclass(json_dict):
        return json_dict
    hints, data = typing.get_type_hints(cls), {}
    for f in fields(cls):
        hint = hints[f.name]
        members = typing.get_args(hint)
        optional = typing.get_origin(hint) is Union and type(None) in members
        if not optional and _string_union(cls, f.name, f.type):
            tag = json_dict[f"{f.name}_type"]
            data[f.name] = _json_to_dataclass(json_dict[f.name], next(m for m in members if m.__name__ == tag))
            continue
        if f.name not in json_dict and not optional:
            raise TypeError(f"{cls.__name__}: the JSON has no value for {f.name!r}, which is not Optional")
        data[f.name] = _value(json_dict.get(f.name), members[0] if optional else hint)
    return cls(**data)


def _value(value: Any, hint: Any) -> Any:
    if value is None:
        return None
    if is_dataclass(hint):
        return _json_to_dataclass(value, hint)
    if typing.get_origin(hint) is list:
        return [_value(v, typing.get_args(hint)[0]) for v in value]
    if typing.get_origin(hint) is Union:
        return next(m for m in typing.get_args(hint) if m is type(value))(value)
    if isinstance(hint, enum.EnumMeta):
        return hint[value] if isinstance(value, str) else hint(value)
    return hint(value)
