"""Element types and memory layout: ScalarType codes to torch dtypes, dim orders of tensors."""

from __future__ import annotations

import math
from typing import Optional, Sequence

import torch

from executorch.exir import _dtypes

# c10::MemoryFormat numbering, which programs use for MemoryFormat arguments.
_MEMORY_FORMATS = (torch.contiguous_format, torch.preserve_format, torch.channels_last, torch.channels_last_3d)


def to_dtype(code: int) -> Optional[torch.dtype]:
    """The torch dtype of a ScalarType code, or None when this runtime has no such dtype."""
    return _dtypes.to_torch(code)


def dtype_code(dtype: torch.dtype) -> Optional[int]:
    """The ScalarType code of a torch dtype, or None."""
    return _dtypes.runtime_code(dtype)


def dtype_name(code: int) -> str:
    return _dtypes.dtype_name(code)


def memory_format(code: int) -> torch.memory_format:
    if not 0 <= code < len(_MEMORY_FORMATS):
        raise ValueError(f"memory format code {code} is not one of 0..{len(_MEMORY_FORMATS) - 1}")
    return _MEMORY_FORMATS[code]


def is_permutation(dim_order: Sequence[int], ndim: int) -> bool:
    return sorted(dim_order) == list(range(ndim))


def dim_order_of(t: torch.Tensor) -> list[int]:
    """The dim order of a dense tensor: dims sorted by decreasing stride, ties in dim order."""
    return sorted(range(t.dim()), key=lambda d: (-t.stride(d), d))


def numel(sizes: Sequence[int]) -> int:
    return math.prod(sizes)
