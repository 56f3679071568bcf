"""Element types and memory layout: ScalarType codes to torch dtypes, dim orders to strides."""

from __future__ import annotations

import math
from typing import Optional, Sequence

import torch

from executorch.exir.schema import ScalarType

_DTYPES: dict[int, torch.dtype] = {
    ScalarType.BYTE: torch.uint8,
    ScalarType.CHAR: torch.int8,
    ScalarType.SHORT: torch.int16,
    ScalarType.INT: torch.int32,
    ScalarType.LONG: torch.int64,
    ScalarType.HALF: torch.float16,
    ScalarType.FLOAT: torch.float32,
    ScalarType.DOUBLE: torch.float64,
    ScalarType.BOOL: torch.bool,
    ScalarType.BFLOAT16: torch.bfloat16,
    ScalarType.UINT16: torch.uint16,
    ScalarType.UINT32: torch.uint32,
    ScalarType.UINT64: torch.uint64,
    ScalarType.FLOAT8E5M2: torch.float8_e5m2,
    ScalarType.FLOAT8E4M3FN: torch.float8_e4m3fn,
    ScalarType.FLOAT8E5M2FNUZ: torch.float8_e5m2fnuz,
    ScalarType.FLOAT8E4M3FNUZ: torch.float8_e4m3fnuz,
}
_CODES: dict[torch.dtype, int] = {dt: int(code) for code, dt in _DTYPES.items()}

# c10::MemoryFormat numbering, which programs use for MemoryFormat arguments.
_MEMORY_FORMATS = (torch.contiguous_format, torch.preserve_format, torch.channels_last, torch.channels_last_3d)


def to_dtype(code: int) -> Optional[torch.dtype]:
    """The torch dtype of a ScalarType code, or None when this runtime has no such dtype."""
    return _DTYPES.get(code)


def dtype_code(dtype: torch.dtype) -> Optional[int]:
    """The ScalarType code of a torch dtype, or None."""
    return _CODES.get(dtype)


def dtype_name(code: int) -> str:
    dt = _DTYPES.get(code)
    if dt is not None:
        return str(dt).removeprefix("torch.")
    try:
        return ScalarType(code).name.lower()
    except ValueError:
        return f"scalar type {code}"


def memory_format(code: int) -> torch.memory_format:
    if not 0 <= code < len(_MEMORY_FORMATS):
        raise ValueError(f"memory format code {code} is not one of 0..{len(_MEMORY_FORMATS) - 1}")
    return _MEMORY_FORMATS[code]


def is_permutation(dim_order: Sequence[int], ndim: int) -> bool:
    return sorted(dim_order) == list(range(ndim))


def strides_for(sizes: Sequence[int], dim_order: Sequence[int]) -> list[int]:
    """Strides of a dense tensor of `sizes` laid out outermost-first in `dim_order`."""
    strides = [0] * len(sizes)
    step = 1
    for dim in reversed(dim_order):
        strides[dim] = step
        step *= max(sizes[dim], 1)
    return strides


def dim_order_of(t: torch.Tensor) -> list[int]:
    """The dim order of a dense tensor: dims sorted by decreasing stride, ties in dim order."""
    return sorted(range(t.dim()), key=lambda d: (-t.stride(d), d))


def numel(sizes: Sequence[int]) -> int:
    return math.prod(sizes)
