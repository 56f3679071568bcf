"""Upstream's `executorch.exir.scalar_type`: the `.pte` ScalarType codes, defined in `executorch.exir.schema`."""

from executorch.exir.schema import ScalarType

__all__ = ["ScalarType"]
