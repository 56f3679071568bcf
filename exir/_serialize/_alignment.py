"""Alignments: the defaults of `.pte`/`.ptd` files and the arithmetic and checks every writer shares."""

from __future__ import annotations

from executorch.exir.error import SerializeError

# Where segments (delegate payloads, constants) start, in a .pte and a .ptd.
DEFAULT_SEGMENT_ALIGNMENT = 128
# Where each constant tensor and inline delegate payload starts (the schema's force_align).
DEFAULT_TENSOR_ALIGNMENT = 16


def is_power_of_two(value: object) -> bool:
    """Whether `value` is an int (not a bool) that is a positive power of two, as every alignment must be."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0 and not value & (value - 1)


def padding_for(offset: int, alignment: int) -> int:
    """Zero bytes needed after `offset` to reach the next multiple of `alignment`."""
    return -offset % alignment


def aligned(offset: int, alignment: int) -> int:
    """`offset` rounded up to a multiple of `alignment`."""
    return offset + (-offset % alignment)


class InvalidAlignmentError(SerializeError, ValueError):
    """An alignment argument that is not a positive power of two: a ValueError too, as upstream raises."""


def check_alignment(name: str, value: object) -> int:
    """Returns `value` if it is a positive power of two, else raises InvalidAlignmentError."""
    if not is_power_of_two(value):
        raise InvalidAlignmentError(
            f"{name}={value!r} is not a valid alignment: it must be a positive power of two (e.g. 16)"
        )
    return value
