"""Developer tools that ship in every wheel: output comparison and bundled programs (`BundledProgram`)."""

from typing import Any

__all__ = ["BundledProgram"]


def __getattr__(name: str) -> Any:
    # Lazy, so `executorch.devtools.compare` does not import torch.export machinery it does not use.
    if name == "BundledProgram":
        from executorch.devtools.bundled_program.core import BundledProgram

        return BundledProgram
    raise AttributeError(f"module 'executorch.devtools' has no attribute {name!r}")
