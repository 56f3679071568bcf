"""Upstream's module path of the lowering configs (defined in `executorch.exir.config`), and `CaptureConfig`
(full wheel)."""

from executorch.exir.config import EdgeCompileConfig, ExecutorchBackendConfig

__all__ = ["CaptureConfig", "EdgeCompileConfig", "ExecutorchBackendConfig"]  # noqa: F822  (served by __getattr__)


def __getattr__(name: str):
    # CaptureConfig ships with capture(), in the full wheel only (tools/packaging/components.py).
    if name == "CaptureConfig":
        from executorch.exir.capture._capture import CaptureConfig

        return CaptureConfig
    raise AttributeError(f"module 'executorch.exir.capture._config' has no attribute {name!r}")
