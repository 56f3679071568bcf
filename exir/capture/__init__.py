"""Upstream's `executorch.exir.capture`: the lowering configs, `CaptureConfig`, and `capture` (full wheel)
on torch.export."""

import sys
import types

from executorch.exir.capture._config import EdgeCompileConfig, ExecutorchBackendConfig

__all__ = ["CaptureConfig", "EdgeCompileConfig", "ExecutorchBackendConfig", "capture"]


def __getattr__(name: str):
    # capture and CaptureConfig ship with the full wheel only (tools/packaging/components.py).
    if name in ("capture", "CaptureConfig"):
        from executorch.exir.capture import _capture

        return getattr(_capture, name)
    raise AttributeError(f"module 'executorch.exir.capture' has no attribute {name!r}")


class _Package(types.ModuleType):
    # Importing this package makes `executorch.exir.capture` this module, where upstream has the function.
    def __call__(self, *args, **kwargs):
        return __getattr__("capture")(*args, **kwargs)


sys.modules[__name__].__class__ = _Package
