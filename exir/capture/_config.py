"""Upstream's module path of the lowering configs; they are defined in `executorch.exir.config`."""

from executorch.exir.config import EdgeCompileConfig, ExecutorchBackendConfig

__all__ = ["EdgeCompileConfig", "ExecutorchBackendConfig"]
