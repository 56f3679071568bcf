"""XNNPACK, ExecuTorch's CPU backend: partitioner, payload writer and quantizer in pure Python."""

from __future__ import annotations

import importlib

_EXPORTS = {
    "XnnpackPartitioner": "executorch.backends.xnnpack.partition.xnnpack_partitioner",
    "XnnpackDynamicallyQuantizedPartitioner": "executorch.backends.xnnpack.partition.xnnpack_partitioner",
    "XnnpackBackend": "executorch.backends.xnnpack.xnnpack_preprocess",
    "get_xnnpack_edge_compile_config": "executorch.backends.xnnpack.utils.configs",
    "get_xnnpack_executorch_backend_config": "executorch.backends.xnnpack.utils.configs",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
