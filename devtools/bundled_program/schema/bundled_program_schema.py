"""The `.bpte` tables as dataclasses (schema/bundled_program_schema.fbs), as ExecuTorch names them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from executorch.exir.schema import BytesLike, ScalarType


@dataclass
class Tensor:
    scalar_type: ScalarType
    sizes: list[int]
    data: BytesLike
    dim_order: list[int]


@dataclass
class Int:
    int_val: int


@dataclass
class Bool:
    bool_val: bool


@dataclass
class Double:
    double_val: float


ValueUnion = Union[Tensor, Int, Bool, Double]
# Union tags in the file, in the schema's order.
VALUE_TYPES = (Tensor, Int, Bool, Double)


@dataclass
class Value:
    val: ValueUnion


@dataclass
class BundledMethodTestCase:
    inputs: list[Value] = field(default_factory=list)
    expected_outputs: list[Value] = field(default_factory=list)


@dataclass
class BundledMethodTestSuite:
    method_name: str
    test_cases: list[BundledMethodTestCase] = field(default_factory=list)


@dataclass
class BundledProgram:
    """`program` is the `.pte` bytes; the writer also takes them as a list of pieces in order."""

    version: int
    method_test_suites: list[BundledMethodTestSuite]
    program: BytesLike
