"""Upstream's module path of the lowering configs (defined in `executorch.exir.config`), and `CaptureConfig`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from executorch.exir.config import EdgeCompileConfig, ExecutorchBackendConfig
from executorch.exir.error import ExportError

__all__ = ["CaptureConfig", "EdgeCompileConfig", "ExecutorchBackendConfig"]


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
