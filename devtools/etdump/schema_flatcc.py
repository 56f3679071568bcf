"""The ETDump tables (devtools/etdump/etdump_schema_flatcc.fbs) as dataclasses, upstream's names."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import List, Optional

from executorch.exir.schema import ScalarType

# The version field the published runtime writes.
ETDUMP_VERSION = 0
FILE_IDENTIFIER = b"ED00"


@dataclass
class Tensor:
    scalar_type: ScalarType
    sizes: List[int]
    strides: List[int]
    offset: Optional[int]  # where its bytes start in the debug buffer


@dataclass
class TensorList:
    tensors: List[Tensor]


@dataclass
class Null:
    pass


@dataclass
class Int:
    int_val: int


@dataclass
class Bool:
    bool_val: bool


@dataclass
class Double:
    double_val: float


@dataclass
class Float:
    float_val: float


@dataclass
class String:
    string_val: str


class ValueType(Enum):
    NULL = "Null"
    INT = "Int"
    BOOL = "Bool"
    FLOAT = "Float"
    DOUBLE = "Double"
    TENSOR = "Tensor"
    TENSOR_LIST = "TensorList"
    STRING = "String"


# The wire value of each ValueType (the schema's `enum ValueType : byte`).
VALUE_TYPE_CODES = {"Null": 0, "Int": 1, "Bool": 2, "Float": 3, "Double": 4, "Tensor": 5, "TensorList": 6,
                    "String": 7}


@dataclass
class Value:
    val: str  # a ValueType value: "Tensor", "Int", ...
    tensor: Optional[Tensor] = None
    tensor_list: Optional[TensorList] = None
    int_value: Optional[Int] = None
    float_value: Optional[Float] = None
    double_value: Optional[Double] = None
    bool_value: Optional[Bool] = None
    output: Optional[Bool] = None  # set on the method's outputs, logged after the last instruction


@dataclass
class DebugEvent:
    name: Optional[str]
    chain_index: int
    instruction_id: int
    delegate_debug_id_int: Optional[int]
    delegate_debug_id_str: Optional[str]
    debug_entry: Value


class PROFILE_EVENT_ENUM(Enum):
    RUN_MODEL = "Method::execute"
    OPERATOR_CALL = "OPERATOR_CALL"
    DELEGATE_CALL = "DELEGATE_CALL"
    LOAD_MODEL = "Program::load_method"


@dataclass
class ProfileEvent:
    name: Optional[str]
    chain_index: int
    instruction_id: int
    delegate_debug_id_int: Optional[int]
    delegate_debug_id_str: Optional[str]
    delegate_debug_metadata: Optional[bytes]
    start_time: int
    end_time: int


@dataclass
class AllocationEvent:
    allocator_id: int
    allocation_size: int


@dataclass
class Allocator:
    name: str


@dataclass
class Event:
    profile_event: Optional[ProfileEvent] = None
    allocation_event: Optional[AllocationEvent] = None
    debug_event: Optional[DebugEvent] = None


@dataclass
class RunData:
    name: str
    bundled_input_index: Optional[int] = -1
    allocators: Optional[List[Allocator]] = None
    events: Optional[List[Event]] = field(default_factory=list)


@dataclass
class ETDumpFlatCC:
    version: int
    run_data: List[RunData]
