"""Buffers (bytes live over an inclusive range of steps) and the planners that place them in one arena."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from executorch.exir._serialize._alignment import aligned
from executorch.exir.tensor import ALIGNMENT as DEFAULT_ALIGNMENT


@dataclass
class Buffer:
    """Storage for one tensor, or for a tensor and the views that alias it."""

    size: int  # bytes, upper bound for dynamically shaped tensors
    first: int  # first step at which it is live
    last: int  # last step at which it is live
    offset: Optional[int] = None
    device: tuple = (0, 0)  # (schema.DeviceType, index) of the memory it lives in; (0, 0) is the host
    memory_id: int = 1  # the arena `plan_by_device` placed it in

    def overlaps(self, other: "Buffer") -> bool:
        return self.first <= other.last and other.first <= self.last


def naive_buffers(buffers: list[Buffer], alignment: int = DEFAULT_ALIGNMENT) -> int:
    """Every buffer gets its own bytes, one after another: no reuse."""
    end = 0
    for b in buffers:
        b.offset = end
        end = aligned(end + b.size, alignment)
    return end


def greedy_buffers(buffers: list[Buffer], alignment: int = DEFAULT_ALIGNMENT) -> int:
    """Greedy by size: largest first, each at the lowest aligned offset where it fits between
    the buffers already placed whose lifetimes overlap it."""
    placed: list[Buffer] = []
    arena = 0
    for b in sorted(buffers, key=lambda b: (-b.size, b.first)):
        busy = sorted((p.offset, p.offset + p.size) for p in placed if p.overlaps(b) and p.size)
        offset = 0
        for start, end in busy:
            if offset + b.size <= start:
                break
            offset = max(offset, aligned(end, alignment))
        b.offset = offset
        placed.append(b)
        arena = max(arena, aligned(offset + b.size, alignment))
    return arena
