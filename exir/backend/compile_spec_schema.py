"""`CompileSpec(key, value: bytes)`: one option a backend's `preprocess` and runtime `init` read.
Compile specs are a bag: each backend reads the keys it knows (`read_compile_specs`)."""

from __future__ import annotations

import warnings
from typing import Iterable

from executorch.exir.schema import CompileSpec

__all__ = ["CompileSpec", "read_compile_specs"]


def read_compile_specs(backend: str, compile_specs: Iterable[CompileSpec], known: Iterable[str]) -> dict[str, bytes]:
    """The specs whose key `backend` knows, as key -> value (the last of a repeated key); the
    others are ignored with one warning naming them."""
    known = tuple(known)
    read: dict[str, bytes] = {}
    ignored: list[str] = []
    for spec in compile_specs:
        if spec.key in known:
            read[spec.key] = bytes(spec.value)
        elif spec.key not in ignored:
            ignored.append(spec.key)
    if ignored:
        reads = f"it reads only {list(known)}" if known else "it reads none"
        warnings.warn(f"{backend} ignores the compile specs {ignored}: {reads}", UserWarning, stacklevel=3)
    return read
