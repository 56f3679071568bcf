"""Helpers of upstream's configuration-based partitioner that backends import on their own (`format_target_name`)."""

from __future__ import annotations


def format_target_name(target_name: str) -> str:
    """An operator's name without its namespace: `aten.add.Tensor` -> `add.Tensor`; `add.Tensor` stays."""
    names = target_name.split(".")
    return ".".join(names[1:] if len(names) > 2 else names)
