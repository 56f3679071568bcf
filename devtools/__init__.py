"""Developer tools that ship in every wheel: output comparison, bundled programs (`BundledProgram`),
ETDump/ETRecord and the `Inspector`."""

from typing import Any

__all__ = ["BundledProgram", "Inspector", "generate_etrecord", "parse_etrecord"]


def __getattr__(name: str) -> Any:
    # Lazy, so `executorch.devtools.compare` does not import torch.export machinery it does not use.
    if name == "BundledProgram":
        from executorch.devtools.bundled_program.core import BundledProgram

        return BundledProgram
    if name == "Inspector":
        from executorch.devtools.inspector import Inspector

        return Inspector
    if name in ("generate_etrecord", "parse_etrecord"):
        from executorch.devtools import etrecord

        return getattr(etrecord, name)
    raise AttributeError(f"module 'executorch.devtools' has no attribute {name!r}")
