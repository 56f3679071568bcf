"""The in-memory model of a `.pte` program: plain dataclasses mirroring schema/program.fbs.

The emitter produces these, the serializer turns them into bytes and back, the Python
interpreter runs them and the inspect CLI prints them. Field names and order follow the
FlatBuffers tables so that a reader can hold the two side by side.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Optional, Union

# Bytes-like payloads (constant data, delegate blobs) are kept as whatever buffer the producer
# has (bytes, bytearray, memoryview over a tensor) so that no tensor data is copied before the
# final file is assembled.
BytesLike = Union[bytes, bytearray, memoryview]


class ScalarType(IntEnum):
    BYTE = 0
    CHAR = 1
    SHORT = 2
    INT = 3
    LONG = 4
    HALF = 5
    FLOAT = 6
    DOUBLE = 7
    BOOL = 11
    QINT8 = 12
    QUINT8 = 13
    QINT32 = 14
    BFLOAT16 = 15
    QUINT4X2 = 16
    QUINT2X4 = 17
    BITS16 = 22
    FLOAT8E5M2 = 23
    FLOAT8E4M3FN = 24
    FLOAT8E5M2FNUZ = 25
    FLOAT8E4M3FNUZ = 26
    UINT16 = 27
    UINT32 = 28
    UINT64 = 29


class TensorShapeDynamism(IntEnum):
    STATIC = 0
    DYNAMIC_BOUND = 1
    DYNAMIC_UNBOUND = 2


class TensorDataLocation(IntEnum):
    SEGMENT = 0
    EXTERNAL = 1


class DeviceType(IntEnum):
    CPU = 0
    CUDA = 1


class DataLocation(IntEnum):
    INLINE = 0
    SEGMENT = 1


@dataclass
class ContainerMetadata:
    encoded_inp_str: str
    encoded_out_str: str


@dataclass
class AllocationDetails:
    memory_id: int
    memory_offset_low: int
    memory_offset_high: int = 0

    @property
    def memory_offset(self) -> int:
        return self.memory_offset_low | (self.memory_offset_high << 32)

    @classmethod
    def at(cls, memory_id: int, offset: int) -> "AllocationDetails":
        return cls(memory_id, offset & 0xFFFFFFFF, offset >> 32)


@dataclass
class ExtraTensorInfo:
    mutable_data_segments_idx: int = 0
    fully_qualified_name: Optional[str] = None
    location: TensorDataLocation = TensorDataLocation.SEGMENT
    device_type: DeviceType = DeviceType.CPU
    device_index: int = 0


@dataclass
class Tensor:
    scalar_type: ScalarType
    storage_offset: int
    sizes: list[int]
    dim_order: list[int]
    requires_grad: bool
    data_buffer_idx: int
    allocation_info: Optional[AllocationDetails]
    layout: int = 0
    shape_dynamism: TensorShapeDynamism = TensorShapeDynamism.STATIC
    extra_tensor_info: Optional[ExtraTensorInfo] = None


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
class String:
    string_val: str


@dataclass
class IntList:
    items: list[int]


@dataclass
class DoubleList:
    items: list[float]


@dataclass
class BoolList:
    items: list[bool]


@dataclass
class TensorList:
    items: list[int]  # indices into ExecutionPlan.values


@dataclass
class OptionalTensorList:
    items: list[int]  # indices into ExecutionPlan.values; -1 means None


KernelTypes = Union[
    Null, Int, Bool, Double, Tensor, String, IntList, DoubleList, BoolList, TensorList, OptionalTensorList
]


class KernelTypesTag(IntEnum):
    """The wire tag of each KernelTypes union member (0 is the FlatBuffer's NONE)."""

    NULL = 1
    INT = 2
    BOOL = 3
    DOUBLE = 4
    TENSOR = 5
    STRING = 6
    INT_LIST = 7
    DOUBLE_LIST = 8
    BOOL_LIST = 9
    TENSOR_LIST = 10
    OPTIONAL_TENSOR_LIST = 11


# The KernelTypes union's members in tag order: KERNEL_TYPES[tag - 1] is the member of `tag`.
KERNEL_TYPES: tuple[type, ...] = (
    Null, Int, Bool, Double, Tensor, String, IntList, DoubleList, BoolList, TensorList, OptionalTensorList
)
KERNEL_TYPE_TAG: dict[type, KernelTypesTag] = {cls: KernelTypesTag(i + 1) for i, cls in enumerate(KERNEL_TYPES)}


@dataclass
class EValue:
    val: KernelTypes


@dataclass
class Operator:
    name: str
    overload: str


@dataclass
class KernelCall:
    op_index: int
    args: list[int]


@dataclass
class DelegateCall:
    delegate_index: int
    args: list[int]


@dataclass
class MoveCall:
    move_from: int
    move_to: int


@dataclass
class JumpFalseCall:
    cond_value_index: int
    destination_instruction: int


@dataclass
class FreeCall:
    value_index: int


InstructionArguments = Union[KernelCall, DelegateCall, MoveCall, JumpFalseCall, FreeCall]


class InstructionArgumentsTag(IntEnum):
    """The wire tag of each InstructionArguments union member (0 is the FlatBuffer's NONE)."""

    KERNEL_CALL = 1
    DELEGATE_CALL = 2
    MOVE_CALL = 3
    JUMP_FALSE_CALL = 4
    FREE_CALL = 5


# The InstructionArguments union's members in tag order.
INSTRUCTION_TYPES: tuple[type, ...] = (KernelCall, DelegateCall, MoveCall, JumpFalseCall, FreeCall)
INSTRUCTION_TAG: dict[type, InstructionArgumentsTag] = {
    cls: InstructionArgumentsTag(i + 1) for i, cls in enumerate(INSTRUCTION_TYPES)
}


@dataclass
class Instruction:
    instr_args: InstructionArguments


@dataclass
class Frame:
    filename: str
    lineno: int
    name: str
    context: str


@dataclass
class FrameList:
    items: list[Frame]


@dataclass
class BackendDelegateDataReference:
    location: DataLocation
    index: int


@dataclass
class CompileSpec:
    key: str
    value: bytes


@dataclass
class BackendDelegate:
    id: str
    processed: BackendDelegateDataReference
    compile_specs: list[CompileSpec]


@dataclass
class Chain:
    inputs: list[int]
    outputs: list[int]
    instructions: list[Instruction]
    stacktrace: Optional[list[FrameList]] = None


@dataclass
class NonConstBufferDevice:
    buffer_idx: int
    device_type: DeviceType = DeviceType.CPU
    device_index: int = 0


@dataclass
class ExecutionPlan:
    name: str
    container_meta_type: ContainerMetadata
    values: list[EValue]
    inputs: list[int]
    outputs: list[int]
    chains: list[Chain]
    operators: list[Operator]
    delegates: list[BackendDelegate]
    # Index 0 is reserved (constants); each later entry is one planned memory arena.
    non_const_buffer_sizes: list[int]
    non_const_buffer_device: Optional[list[NonConstBufferDevice]] = None


@dataclass
class Buffer:
    storage: BytesLike


@dataclass
class BackendDelegateInlineData:
    data: BytesLike


@dataclass
class DataSegment:
    offset: int
    size: int


@dataclass
class SubsegmentOffsets:
    segment_index: int
    offsets: list[int]


@dataclass
class NamedData:
    key: str
    segment_index: int


@dataclass
class Program:
    """A whole program. In memory, constant tensor data lives in `constant_buffer`
    (entry 0 is the reserved empty buffer); the serializer moves it into the constant
    segment of the file and the deserializer moves it back, so a round trip is exact."""

    version: int
    execution_plan: list[ExecutionPlan]
    constant_buffer: list[Buffer]
    backend_delegate_data: list[BackendDelegateInlineData]
    segments: list[DataSegment]
    constant_segment: SubsegmentOffsets
    mutable_data_segments: Optional[list[SubsegmentOffsets]] = None
    named_data: Optional[list[NamedData]] = None
    # Raw bytes of segments other than the constant segment (delegate and named data),
    # indexed like `segments`; not a schema field, carried so a round trip loses nothing.
    segment_data: list[BytesLike] = field(default_factory=list)
