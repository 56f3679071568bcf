"""Alignment arithmetic shared by the `.pte` writer and reader."""

from __future__ import annotations

from executorch.exir.error import SerializeError


def padding_for(offset: int, alignment: int) -> int:
    """Zero bytes needed after `offset` to reach the next multiple of `alignment`."""
    return -offset % alignment


def aligned(offset: int, alignment: int) -> int:
    """`offset` rounded up to a multiple of `alignment`."""
    return offset + (-offset % alignment)


def check_alignment(name: str, value: object) -> int:
    """Returns `value` if it is a positive power of two, else raises SerializeError."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0 or value & (value - 1):
        raise SerializeError(
            f"{name}={value!r} is not a valid alignment: it must be a positive power of two (e.g. 16)"
        )
    return value
