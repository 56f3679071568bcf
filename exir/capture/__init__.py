"""Upstream's `executorch.exir.capture`: the lowering configs, `CaptureConfig`, and `capture` (full wheel) on torch.export."""

import sys
import types

from executorch.exir.capture._config import CaptureConfig, EdgeCompileConfig, ExecutorchBackendConfig

__all__ = ["CaptureConfig", "EdgeCompileConfig", "ExecutorchBackendConfig", "capture"]


def __getattr__(name: str):
    if name == "capture":
        from executorch.exir.capture._capture import capture

        return capture
    raise AttributeError(f"module 'executorch.exir.capture' has no attribute {name!r}")


class _Package(types.ModuleType):
    # Importing this package makes `executorch.exir.capture` this module, where upstream has the function.
    def __call__(self, *args, **kwargs):
        return __getattr__("capture")(*args, **kwargs)


sys.modules[__name__].__class__ = _Package
