"""Finds the field that keeps a Program from being written, to name it in the error.

Only runs after a write has failed, so the fast path never pays for it.
"""

from __future__ import annotations

import struct
from dataclasses import fields, is_dataclass
from typing import Optional

from executorch.exir import schema as s

_TYPE_NAMES = {"b": "int8", "B": "uint8", "i": "int32", "I": "uint32", "q": "int64", "Q": "uint64",
               "?": "bool", "d": "double", "s": "string"}

# Scalar and string fields per table, as the schema types them; a trailing "*" is a vector,
# a trailing "?" an optional field.
_SCHEMA: dict[type, dict[str, str]] = {
    s.Program: {"version": "I"},
    s.ExecutionPlan: {"name": "s", "inputs": "i*", "outputs": "i*", "non_const_buffer_sizes": "q*"},
    s.ContainerMetadata: {"encoded_inp_str": "s", "encoded_out_str": "s"},
    s.Tensor: {"scalar_type": "b", "storage_offset": "i", "sizes": "i*", "dim_order": "B*", "requires_grad": "?",
               "data_buffer_idx": "I", "layout": "b", "shape_dynamism": "b"},
    s.AllocationDetails: {"memory_id": "I", "memory_offset_low": "I", "memory_offset_high": "I"},
    s.ExtraTensorInfo: {"mutable_data_segments_idx": "Q", "fully_qualified_name": "s?", "location": "b",
                        "device_type": "b", "device_index": "b"},
    s.Int: {"int_val": "q"},
    s.Bool: {"bool_val": "?"},
    s.Double: {"double_val": "d"},
    s.String: {"string_val": "s"},
    s.IntList: {"items": "q*"},
    s.DoubleList: {"items": "d*"},
    s.BoolList: {"items": "?*"},
    s.TensorList: {"items": "i*"},
    s.OptionalTensorList: {"items": "i*"},
    s.Operator: {"name": "s", "overload": "s"},
    s.KernelCall: {"op_index": "i", "args": "i*"},
    s.DelegateCall: {"delegate_index": "i", "args": "i*"},
    s.MoveCall: {"move_from": "i", "move_to": "i"},
    s.JumpFalseCall: {"cond_value_index": "i", "destination_instruction": "i"},
    s.FreeCall: {"value_index": "i"},
    s.Frame: {"filename": "s", "lineno": "i", "name": "s", "context": "s"},
    s.BackendDelegate: {"id": "s"},
    s.BackendDelegateDataReference: {"location": "b", "index": "I"},
    s.CompileSpec: {"key": "s"},
    s.NonConstBufferDevice: {"buffer_idx": "i", "device_type": "b", "device_index": "b"},
    s.DataSegment: {"offset": "Q", "size": "Q"},
    s.SubsegmentOffsets: {"segment_index": "I", "offsets": "Q*"},
    s.NamedData: {"key": "s", "segment_index": "I"},
}


def _scalar_problem(value, code: str) -> Optional[str]:
    if code == "s":
        return None if isinstance(value, str) else f"is a {type(value).__name__}, not a string"
    if code == "?":
        return None if isinstance(value, (bool, int)) else f"is a {type(value).__name__}, not a bool"
    try:
        struct.pack("<" + code, value)
    except (struct.error, TypeError):
        return f"= {value!r} does not fit the schema's {_TYPE_NAMES[code]}"
    return None


def _check(obj, path: str) -> Optional[str]:
    spec = _SCHEMA.get(type(obj), {})
    for f in fields(obj):
        value = getattr(obj, f.name)
        where = f"{path}.{f.name}"
        code = spec.get(f.name)
        if code is None:
            found = _walk(value, where)
        elif value is None:
            kind = f"a list of {_TYPE_NAMES[code[0]]}" if code.endswith("*") else f"a {_TYPE_NAMES[code[0]]} value"
            found = None if code.endswith("?") else f"{where} is None; the schema needs {kind}"
        elif code.endswith("*"):
            if not isinstance(value, (list, tuple)):
                return f"{where} is a {type(value).__name__}, not a list"
            found = next(
                (f"{where}[{i}] {p}" for i, v in enumerate(value) if (p := _scalar_problem(v, code[0]))), None
            )
        else:
            problem = _scalar_problem(value, code[0])
            found = f"{where} {problem}" if problem else None
        if found:
            return found
    return None


def _walk(value, path: str) -> Optional[str]:
    if is_dataclass(value):
        return _check(value, path)
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found = _walk(item, f"{path}[{i}]")
            if found:
                return found
    return None


def find_bad_field(program: s.Program) -> Optional[str]:
    """A description of the first field whose value the schema cannot hold, or None."""
    return _walk(program, "Program")
