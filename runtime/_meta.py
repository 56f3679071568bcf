"""Method metadata (inputs, outputs, shapes, dtypes), the same shape for every backend."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence


@dataclass(frozen=True)
class TensorInfo:
    """Shape, dtype and placement of one tensor input or output of a method.

    Accessors are methods, as in the upstream bindings, so code written for those runs here.
    """

    _sizes: tuple[int, ...]
    _dtype: int  # an `executorch.exir.schema.ScalarType` value
    _is_memory_planned: bool
    _nbytes: int
    _dynamism: int = 0  # an `executorch.exir.schema.TensorShapeDynamism` value

    def sizes(self) -> tuple[int, ...]:
        """The shape (the upper bound, for a dynamically shaped tensor)."""
        return self._sizes

    def dtype(self) -> int:
        """The element type as a ScalarType code (6 is float32)."""
        return self._dtype

    def is_memory_planned(self) -> bool:
        """True when the program placed this tensor in a planned arena."""
        return self._is_memory_planned

    def nbytes(self) -> int:
        """Bytes the tensor occupies at its (upper bound) shape."""
        return self._nbytes

    def shape_dynamism(self) -> int:
        """0: the shape is fixed; 1: same rank, each dim at most `sizes()`; 2: same rank, unbounded."""
        return self._dynamism

    def __repr__(self) -> str:
        from executorch.exir._dtypes import cpp_dtype_name

        return (f"TensorInfo(sizes={list(self._sizes)}, dtype={cpp_dtype_name(self._dtype)}, "
                f"is_memory_planned={self._is_memory_planned}, nbytes={self._nbytes})")


@dataclass(frozen=True)
class MethodMeta:
    """What a method takes and returns: one entry per input/output, None for a non-tensor."""

    _name: str
    _inputs: tuple[Optional[TensorInfo], ...]
    _outputs: tuple[Optional[TensorInfo], ...]

    @classmethod
    def make(cls, name: str, inputs: Sequence[Optional[TensorInfo]],
             outputs: Sequence[Optional[TensorInfo]]) -> "MethodMeta":
        return cls(name, tuple(inputs), tuple(outputs))

    def name(self) -> str:
        return self._name

    def num_inputs(self) -> int:
        return len(self._inputs)

    def num_outputs(self) -> int:
        return len(self._outputs)

    def input_tensor_meta(self, index: int) -> TensorInfo:
        return _tensor_at(self._inputs, index, "input", self._name)

    def output_tensor_meta(self, index: int) -> TensorInfo:
        return _tensor_at(self._outputs, index, "output", self._name)

    def __repr__(self) -> str:
        # as the bindings print it: each tensor's TensorInfo as a string (None for a non-tensor value)
        def infos(values: tuple) -> list:
            return [None if v is None else repr(v) for v in values]

        return (f"MethodMeta(name={self._name!r}, num_inputs={len(self._inputs)}, "
                f"input_tensor_meta={infos(self._inputs)}, num_outputs={len(self._outputs)}, "
                f"output_tensor_meta={infos(self._outputs)})")


def _tensor_at(infos: tuple[Optional[TensorInfo], ...], index: int, what: str, method: str) -> TensorInfo:
    if not 0 <= index < len(infos):
        raise IndexError(f"{what} index {index} is out of range: method {method!r} has {len(infos)} {what}s")
    info = infos[index]
    if info is None:
        raise ValueError(f"{what} {index} of method {method!r} is not a tensor, so it has no tensor metadata")
    return info
