"""Export IR: lower a `torch.export` program to an ExecuTorch `.pte` program.

    ep = torch.export.export(model, example_inputs)
    pte = to_edge_transform_and_lower(ep).to_executorch()
    pte.write_to_file("model.pte")

Importing this package is cheap and needs no torch: the `.pte` reader (`executorch.exir.schema`,
`executorch.exir._serialize`) uses the standard library only; the lowering machinery checks for
torch and loads on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from executorch.exir._torch_check import require_torch
from executorch.exir.error import ExportError, SerializeError

__all__ = [
    "CaptureConfig",
    "EdgeCompileConfig",
    "EdgeProgramManager",
    "ExecutorchBackendConfig",
    "ExecutorchProgram",
    "ExecutorchProgramManager",
    "ExportError",
    "ExportGraphSignature",
    "ExportedProgram",
    "SerializeError",
    "Value",
    "capture",
    "to_edge",
    "to_edge_transform_and_lower",
    "to_edge_with_preserved_ops",
]

_LAZY = {
    "CaptureConfig": "executorch.exir.capture._capture",
    "capture": "executorch.exir.capture._capture",
    "Value": "executorch.exir.capture._capture",
    "EdgeCompileConfig": "executorch.exir.config",
    "ExecutorchBackendConfig": "executorch.exir.config",
    # torch.export's program types, re-exported as upstream's exir does (backends import them from here).
    "ExportedProgram": "torch.export",
    "ExportGraphSignature": "torch.export",
    "EdgeProgramManager": "executorch.exir.program._program",
    "ExecutorchProgramManager": "executorch.exir.program._program",
    "to_edge": "executorch.exir.program._program",
    "to_edge_transform_and_lower": "executorch.exir.program._program",
    "to_edge_with_preserved_ops": "executorch.exir.program._program",
}

if TYPE_CHECKING:
    from executorch.exir.config import EdgeCompileConfig, ExecutorchBackendConfig
    from executorch.exir.program import (EdgeProgramManager, ExecutorchProgramManager, to_edge,
                                         to_edge_transform_and_lower)


def __getattr__(name: str):
    if name == "ExecutorchProgram":
        import warnings

        warnings.warn(
            "executorch.exir.ExecutorchProgram is deprecated; use ExecutorchProgramManager, which "
            "to_edge(...).to_executorch() returns",
            DeprecationWarning,
            stacklevel=2,
        )
        return __getattr__("ExecutorchProgramManager")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'executorch.exir' has no attribute {name!r}")
    require_torch()
    from importlib import import_module

    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
