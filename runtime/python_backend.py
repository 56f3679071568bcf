"""Delegate backends for the pure-Python runtime: `register_backend(name, PythonBackend())`.

A backend's `init` gets its payload, its compile specs and the program's named data once, when a
method that calls it loads; `execute` gets the DelegateCall's values (the partition's inputs,
then its outputs) and writes the outputs in place, as the native runtime's backends do.
"""

from __future__ import annotations

import threading
from typing import Any, Mapping

from executorch.runtime import _plugins
from executorch.runtime._errors import ExecuTorchError

__all__ = ["PythonBackend", "register_backend", "registered_backend_names", "get_backend"]


class PythonBackend:
    """Base class of a Python delegate backend; override `init` and `execute`."""

    def is_available(self) -> bool:
        return True

    def init(self, processed: memoryview, compile_specs: list, named_data: Mapping[str, memoryview]) -> Any:
        """Prepare the payload; the returned handle is passed to `execute` and `destroy`."""
        raise NotImplementedError

    def execute(self, handle: Any, args: list) -> None:
        """Run: read the inputs from `args`, write the outputs (tensors in `args`) in place."""
        raise NotImplementedError

    def destroy(self, handle: Any) -> None:
        """Release what `init` made."""


_lock = threading.Lock()
_registry: dict[str, PythonBackend] = {}


def register_backend(name: str, backend: PythonBackend) -> None:
    """Make `backend` run the delegates whose id is `name`; an id registers once."""
    if not isinstance(name, str) or not name:
        raise ExecuTorchError(f"backend name must be a non-empty string, got {name!r}")
    for method in ("init", "execute"):
        if not callable(getattr(backend, method, None)):
            raise ExecuTorchError(f"backend {name!r} has no {method}() method; subclass PythonBackend")
    with _lock:
        if name in _registry and _registry[name] is not backend:
            raise ExecuTorchError(f"a backend named {name!r} is already registered; give yours another id")
        _registry[name] = backend


def registered_backend_names() -> list[str]:
    _plugins.load(_plugins.BACKENDS)
    with _lock:
        return sorted(_registry)


def get_backend(name: str) -> PythonBackend | None:
    with _lock:
        if name in _registry:
            return _registry[name]
    _plugins.load(_plugins.BACKENDS, name)  # an installed package's backend registers when imported
    with _lock:
        return _registry.get(name)
