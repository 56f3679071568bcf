"""`TensorLayout`: the dtype, sizes and dim order recorded beside tensor data stored by name."""

from __future__ import annotations

from dataclasses import dataclass, field

from executorch.exir.schema import ScalarType


@dataclass
class TensorLayout:
    scalar_type: ScalarType
    sizes: list[int] = field(default_factory=list)
    dim_order: list[int] = field(default_factory=list)
