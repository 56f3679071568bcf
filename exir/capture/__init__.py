"""Upstream's `executorch.exir.capture` path for the lowering configs (`capture()` itself is long deprecated and not provided)."""

from executorch.exir.capture._config import EdgeCompileConfig, ExecutorchBackendConfig

__all__ = ["EdgeCompileConfig", "ExecutorchBackendConfig"]
