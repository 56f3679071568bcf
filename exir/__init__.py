"""Export IR: lower a `torch.export` program to an ExecuTorch `.pte` program.

    ep = torch.export.export(model, example_inputs)
    pte = to_edge_transform_and_lower(ep).to_executorch()
    pte.write_to_file("model.pte")

Importing this package is cheap; the lowering machinery loads on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._torch_check import require_torch
from .error import ExportError, SerializeError

require_torch()

__all__ = [
    "EdgeCompileConfig",
    "EdgeProgramManager",
    "ExecutorchBackendConfig",
    "ExecutorchProgram",
    "ExecutorchProgramManager",
    "ExportError",
    "SerializeError",
    "to_edge",
    "to_edge_transform_and_lower",
]

_LAZY = {
    "EdgeCompileConfig": ".config",
    "ExecutorchBackendConfig": ".config",
    "EdgeProgramManager": ".program",
    "ExecutorchProgramManager": ".program",
    "to_edge": ".program",
    "to_edge_transform_and_lower": ".program",
}

if TYPE_CHECKING:
    from .config import EdgeCompileConfig, ExecutorchBackendConfig
    from .program import EdgeProgramManager, ExecutorchProgramManager, to_edge, to_edge_transform_and_lower


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
    from importlib import import_module

    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
