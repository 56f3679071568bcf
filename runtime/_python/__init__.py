"""The pure-Python runtime backend: reads a `.pte` and runs its methods with torch kernels."""

from __future__ import annotations

from executorch.runtime import python_backend
from executorch.runtime._python._program import PythonProgram, load_program, operator_names

__all__ = ["PythonProgram", "load_program", "operator_names", "registered_backend_names"]


def registered_backend_names() -> list[str]:
    """The delegate backends registered with the Python runtime."""
    return python_backend.registered_backend_names()


def _register_builtin_backends() -> None:
    # The delegate backends every build ships register themselves when imported; this layer sits above
    # both them and the registry, so the registry asks it on first lookup instead of importing them.
    from executorch.backends.xnnpack.runtime import _backend  # noqa: F401
    from executorch.runtime._python import _executor_backend  # noqa: F401


python_backend._set_builtin_loader(_register_builtin_backends)
