"""ExecuTorch's `portable_lib` Python API (`_load_for_executorch`, `ExecuTorchModule`) over the native runtime."""

from __future__ import annotations

import os
from typing import Any, Sequence, Union

try:
    from executorch.extension.pybindings import _portable_lib  # noqa: F401
    from executorch.runtime import _native
except ImportError as exc:  # the C++ extension is built only with EXECUTORCH_BUILD_PYBIND=ON
    raise ImportError(
        "executorch.extension.pybindings.portable_lib needs the native runtime extension (_portable_lib), "
        "which this install lacks; install the full wheel, or build with cmake "
        "-DEXECUTORCH_BUILD_PYBIND=ON and copy _portable_lib*.so into extension/pybindings/ "
        f"({exc})"
    ) from exc
from executorch.runtime._backend import Verification
from executorch.runtime._meta import MethodMeta

_unsafe_reset_threadpool = _portable_lib._unsafe_reset_threadpool
_threadpool_get_thread_count = _portable_lib._threadpool_get_thread_count

__all__ = [
    "ExecuTorchMethod",
    "ExecuTorchModule",
    "ExecuTorchProgram",
    "MethodMeta",
    "Verification",
    "_load_for_executorch",
    "_load_for_executorch_from_buffer",
    "_load_program",
    "_load_program_from_buffer",
    "_threadpool_get_thread_count",
    "_unsafe_reset_threadpool",
]


def _read(path: Union[str, os.PathLike]) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _refuse_unsupported(enable_etdump: bool, debug_buffer_size: int) -> None:
    if enable_etdump or debug_buffer_size:
        raise ValueError(
            "enable_etdump / debug_buffer_size: ETDump profiling is not built into this runtime; "
            "load with the defaults (enable_etdump=False, debug_buffer_size=0)"
        )


class ExecuTorchMethod:
    """One loaded method: `call(inputs)` runs it and returns its outputs as a list."""

    def __init__(self, handle: _native.NativeMethod) -> None:
        self._handle = handle

    def call(self, inputs: Sequence[Any]) -> list:
        return self._handle.execute(list(inputs))

    __call__ = call

    def method_meta(self) -> MethodMeta:
        return self._handle.meta()


class ExecuTorchProgram:
    """A loaded `.pte`: its method names by index, and `load_method(name)`."""

    def __init__(self, data: bytes, verification: Verification) -> None:
        self._data = data  # the native program reads from these bytes for as long as it lives
        self._program = _native.load_program(data, verification)
        self._names = sorted(self._program.method_names)

    def num_methods(self) -> int:
        return len(self._names)

    def get_method_name(self, index: int) -> str:
        if not 0 <= index < len(self._names):
            raise IndexError(f"method index {index} out of range; the program has {len(self._names)} methods")
        return self._names[index]

    def load_method(self, name: str) -> ExecuTorchMethod:
        return ExecuTorchMethod(self._program.load_method(name))


class ExecuTorchModule:
    """A `.pte` with its methods loaded on first use: `forward(inputs)`, `run_method(name, inputs)`."""

    def __init__(self, data: bytes, verification: Verification) -> None:
        self._program = ExecuTorchProgram(data, verification)
        self._methods: dict[str, ExecuTorchMethod] = {}

    def method_names(self) -> set[str]:
        return set(self._program._names)

    def _method(self, name: str) -> ExecuTorchMethod:
        if name not in self._methods:
            if name not in self._program._names:
                raise RuntimeError(f"no method {name!r} in this program; its methods: {self._program._names}")
            self._methods[name] = self._program.load_method(name)
        return self._methods[name]

    def run_method(self, method_name: str, inputs: Sequence[Any] = (), clone_outputs: bool = True) -> list:
        """Run `method_name` on `inputs`; outputs are always fresh tensors (`clone_outputs` is
        accepted for compatibility: this runtime never returns views of its memory)."""
        return self._method(method_name).call(inputs)

    def forward(self, inputs: Sequence[Any] = (), clone_outputs: bool = True) -> list:
        return self.run_method("forward", inputs, clone_outputs)

    __call__ = forward

    def method_meta(self, method_name: str) -> MethodMeta:
        return self._method(method_name).method_meta()

    def has_etdump(self) -> bool:
        return False


def _load_for_executorch(path: Union[str, os.PathLike], enable_etdump: bool = False, debug_buffer_size: int = 0,
                         program_verification: Verification = Verification.InternalConsistency) -> ExecuTorchModule:
    """Load the `.pte` at `path` as an `ExecuTorchModule`."""
    _refuse_unsupported(enable_etdump, debug_buffer_size)
    return ExecuTorchModule(_read(path), program_verification)


def _load_for_executorch_from_buffer(buffer: bytes, enable_etdump: bool = False, debug_buffer_size: int = 0,
                                     program_verification: Verification = Verification.InternalConsistency
                                     ) -> ExecuTorchModule:
    """Load `.pte` bytes as an `ExecuTorchModule`."""
    _refuse_unsupported(enable_etdump, debug_buffer_size)
    return ExecuTorchModule(bytes(buffer), program_verification)


def _load_program(path: Union[str, os.PathLike], enable_etdump: bool = False, debug_buffer_size: int = 0,
                  program_verification: Verification = Verification.InternalConsistency) -> ExecuTorchProgram:
    """Load the `.pte` at `path` as an `ExecuTorchProgram` (methods loaded on request)."""
    _refuse_unsupported(enable_etdump, debug_buffer_size)
    return ExecuTorchProgram(_read(path), program_verification)


def _load_program_from_buffer(buffer: bytes, enable_etdump: bool = False, debug_buffer_size: int = 0,
                              program_verification: Verification = Verification.InternalConsistency
                              ) -> ExecuTorchProgram:
    """Load `.pte` bytes as an `ExecuTorchProgram`."""
    _refuse_unsupported(enable_etdump, debug_buffer_size)
    return ExecuTorchProgram(bytes(buffer), program_verification)
