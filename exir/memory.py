"""`alloc`, `free` and `view`: the memory operations a planned graph names, as plain Python functions."""

from __future__ import annotations

from typing import Union

import torch

from executorch.exir.tensor import TensorSpec

AllocSpec = Union[tuple[tuple[int, ...], torch.dtype], list[tuple[tuple[int, ...], torch.dtype]]]


def alloc(spec: AllocSpec):
    """A new uninitialised tensor for `(shape, dtype)`, or a list of them for a list of specs."""
    if isinstance(spec, list):
        return [alloc(s) for s in spec]
    shape, dtype = spec
    return torch.empty(shape, dtype=dtype)


def free(spec: TensorSpec) -> None:
    """Marks where a planned tensor's memory may be reused; frees nothing in Python."""


def view(base: torch.Tensor, size: list[int]) -> torch.Tensor:
    """A view of `base` with sizes `size`, sharing its memory."""
    return base.view(size)
