"""Dim orders and torch memory formats, one for the other (ExecuTorch's `exir.dim_order_utils`, which Core ML's
operator translations import)."""

from __future__ import annotations

from typing import List, Optional

import torch

__all__ = ["get_dim_order", "get_memory_format", "is_channel_last_dim_order", "is_contiguous_dim_order"]


def _get_contiguous_dim_order(ndim: int) -> List[int]:
    if ndim < 0:
        raise AssertionError(f"a contiguous dim order needs a rank of 0 or more, not {ndim}")
    return list(range(ndim))


def _get_channels_last_dim_order(ndim: int) -> List[int]:
    if ndim != 4:
        raise AssertionError(f"a channels-last dim order is defined for rank 4 only, not {ndim}")
    return [0, 2, 3, 1]


def get_memory_format(dim_order: Optional[List[int]]) -> torch.memory_format:
    """The memory format `dim_order` lays a tensor out in: None preserves the input's; contiguous or 4-D
    channels-last orders map to theirs, any other is an AssertionError naming it."""
    if dim_order is None:
        return torch.preserve_format
    dim_order = list(dim_order)
    if dim_order == list(range(len(dim_order))):
        return torch.contiguous_format
    if dim_order == [0, 2, 3, 1]:
        return torch.channels_last
    raise AssertionError(f"the dim order {dim_order} is no torch.memory_format (contiguous, or 4-D channels-last)")


def get_dim_order(memory_format: Optional[torch.memory_format], ndim: int) -> Optional[List[int]]:
    """The dim order a rank-`ndim` tensor has in `memory_format` (None for None or preserve_format)."""
    if memory_format is None or memory_format == torch.preserve_format:
        return None
    if memory_format == torch.contiguous_format:
        return _get_contiguous_dim_order(ndim)
    if memory_format == torch.channels_last:
        return _get_channels_last_dim_order(ndim)
    raise AssertionError(f"no dim order for the memory format {memory_format}: contiguous_format or channels_last")


def is_channel_last_dim_order(tensor: torch.Tensor) -> bool:
    """Whether `tensor` is 4-D and laid out channels-last."""
    return tensor.dim() == 4 and tuple(tensor.dim_order()) == (0, 2, 3, 1)


def is_contiguous_dim_order(tensor: torch.Tensor) -> bool:
    """Whether `tensor`'s dim order is the identity."""
    return tuple(tensor.dim_order()) == tuple(range(tensor.dim()))
