"""`CompileSpec(key, value: bytes)`: one option a backend's `preprocess` and runtime `init` read."""

from executorch.exir.schema import CompileSpec

__all__ = ["CompileSpec"]
