"""Upstream's padding helpers (`pad_to`, `padding_required`, `aligned_size`) over `_alignment`'s arithmetic."""

from executorch.exir._serialize._alignment import aligned as aligned_size, padding_for as padding_required

__all__ = ["aligned_size", "pad_to", "padding_required"]


def pad_to(data: bytes, length: int) -> bytes:
    """`data` followed by zero bytes up to `length`; ValueError when it is already longer."""
    if length < len(data):
        raise ValueError(f"pad_to: data is {len(data)} bytes, longer than the padded length {length}")
    return data + bytes(length - len(data))
