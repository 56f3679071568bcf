"""`capture` and `CaptureConfig`: upstream's deprecated entry point, tracing with torch.export as the config says."""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass
from types import MethodType
from typing import Any, Callable, Optional, Union

import torch
from torch.export import ExportedProgram

from executorch.exir.config import EdgeCompileConfig, ExecutorchBackendConfig
from executorch.exir.error import ExportError


@dataclass
class CaptureConfig:
    """Options of `executorch.exir.capture`, which traces with torch.export: `enable_aot=True` also
    decomposes to core ATen, as upstream's ahead-of-time path does; `enable_dynamic_shape=True` lets
    `capture(dynamic_shapes=...)` through. Values naming a tracer torch.export replaced are refused."""

    pt2_mode: bool = True
    enable_functionalization: bool = True
    enable_dynamic_shape: bool = False
    enable_aot: bool = False
    _dynamo_config: Optional[Any] = None
    _unlift: bool = False
    _use_old_decomp_table: bool = False

    def __post_init__(self) -> None:
        for name in ("pt2_mode", "enable_functionalization", "enable_dynamic_shape", "enable_aot", "_unlift",
                     "_use_old_decomp_table"):
            if not isinstance(getattr(self, name), bool):
                raise ExportError(f"CaptureConfig.{name} must be True or False, not {getattr(self, name)!r}")
        refused = (
            (not self.pt2_mode, "pt2_mode=False (the tracer before torch.export) is not supported; leave it True"),
            (not self.enable_functionalization, "enable_functionalization=False is not supported: torch.export "
             "always functionalizes; leave it True"),
            (self._dynamo_config is not None, "_dynamo_config is not supported: torch.export sets up dynamo "
             "itself; leave it None"),
            (self._unlift, "_unlift=True (parameters as graph attributes) is not supported; leave it False"),
            (self._use_old_decomp_table, "_use_old_decomp_table=True is not supported: decompositions come from "
             "torch's current table; leave it False"),
            (self.enable_aot and self.enable_dynamic_shape, "enable_dynamic_shape=True does nothing with "
             "enable_aot=True, which always takes dynamic_shapes; set only one"),
        )
        for bad, why in refused:
            if bad:
                raise ExportError(f"CaptureConfig.{why}")


# What a captured function takes and returns (upstream's `executorch.exir.Value`).
Value = Union[None, bool, int, float, complex, str, torch.Tensor, tuple, list, dict]


class _Function(torch.nn.Module):
    def __init__(self, f: Callable) -> None:
        super().__init__()
        self.f = f

    def forward(self, *args):
        return self.f(*args)


@contextlib.contextmanager
def patch_forward(module: torch.nn.Module, method: MethodType):
    """`module` with `method` standing in for its forward while exporting."""
    module.forward = method
    try:
        yield module
    finally:
        del module.forward


class ExirExportedProgram:
    """What `capture` returns: `exported_program`, lowered step by step with `to_edge` and `to_executorch`."""

    def __init__(self, exported_program: ExportedProgram, after_to_edge_passes: bool) -> None:
        self.exported_program = exported_program
        self.after_to_edge_passes = after_to_edge_passes

    def __call__(self, *args: Any) -> Any:
        return self.exported_program.module()(*args)

    def to_edge(self, config: Optional[EdgeCompileConfig] = None) -> "ExirExportedProgram":
        from executorch.exir.program._program import to_edge

        if self.after_to_edge_passes:
            raise ExportError("this program is already in the edge dialect; call to_executorch() next")
        edge = to_edge(self.exported_program, compile_config=config or EdgeCompileConfig())
        return ExirExportedProgram(edge.exported_program(), True)

    def to_executorch(self, config: Optional[ExecutorchBackendConfig] = None):
        from executorch.exir.program._program import EdgeProgramManager

        if not self.after_to_edge_passes:
            raise ExportError("to_executorch needs an edge-dialect program; call to_edge() first")
        return EdgeProgramManager({"forward": self.exported_program}).to_executorch(config)


def capture(f: Callable, args: tuple, config: Optional[CaptureConfig] = None,
            dynamic_shapes: Optional[Any] = None) -> ExirExportedProgram:
    """Trace `f` (a module, a module's method or a function) on `args` with torch.export (deprecated:
    call torch.export.export and executorch.exir.to_edge)."""
    warnings.warn("executorch.exir.capture is deprecated; use torch.export.export and executorch.exir.to_edge",
                  DeprecationWarning, stacklevel=2)
    if not isinstance(args, tuple):
        raise ExportError(f"capture: args must be a tuple of example inputs, got {type(args).__name__}")
    config = config or CaptureConfig()
    if dynamic_shapes is not None and not (config.enable_aot or config.enable_dynamic_shape):
        raise ExportError("capture(dynamic_shapes=...) needs CaptureConfig(enable_dynamic_shape=True) or "
                          "CaptureConfig(enable_aot=True); without either the program is traced with static shapes")
    if isinstance(f, MethodType) and isinstance(f.__self__, torch.nn.Module):
        context = patch_forward(f.__self__, f)
    else:
        context = contextlib.nullcontext(f if isinstance(f, torch.nn.Module) else _Function(f))
    with context as module:
        ep = torch.export.export(module, args, dynamic_shapes=dynamic_shapes, strict=True)
    if config.enable_aot:
        ep = ep.run_decompositions()
    return ExirExportedProgram(ep, False)
