"""XNNPACK's runtime for the pure-Python engine: `XnnpackBackend`, registered with the Python runtime."""

from executorch.backends.xnnpack.runtime._backend import XnnpackBackend

__all__ = ["XnnpackBackend"]
