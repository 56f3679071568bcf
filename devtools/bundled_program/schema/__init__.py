"""The `.bpte` schema: its FlatBuffers description and the matching dataclasses."""

from executorch.devtools.bundled_program.schema.bundled_program_schema import (
    VALUE_TYPES,
    Bool,
    BundledMethodTestCase,
    BundledMethodTestSuite,
    BundledProgram,
    Double,
    Int,
    Tensor,
    Value,
    ValueUnion,
)

__all__ = ["VALUE_TYPES", "Bool", "BundledMethodTestCase", "BundledMethodTestSuite", "BundledProgram", "Double",
           "Int", "Tensor", "Value", "ValueUnion"]
