"""ExecuTorch's `portable_lib` Python API (`_load_for_executorch`, `ExecuTorchModule`) over the native runtime."""

from __future__ import annotations

import os
from typing import Any, Optional, Sequence, Union

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
from executorch.runtime import read_program_file
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


def _etdump_option(enable_etdump: bool, debug_buffer_size: int) -> Optional[int]:
    """The native loader's ETDump argument: None (off) or the debug buffer's size in bytes."""
    if not isinstance(debug_buffer_size, int) or debug_buffer_size < 0:
        raise ValueError(f"debug_buffer_size must be a byte count >= 0, got {debug_buffer_size!r}")
    if debug_buffer_size and not enable_etdump:
        raise ValueError(f"debug_buffer_size={debug_buffer_size} needs enable_etdump=True")
    return debug_buffer_size if enable_etdump else None


def _input_list(inputs: Any) -> list:
    """The inputs as a list; a lone tensor is one input, as upstream's bindings take it (a method of one
    input may be called with its tensor)."""
    import torch

    return [inputs] if isinstance(inputs, torch.Tensor) else list(inputs)


class ExecuTorchMethod:
    """One loaded method: `call(inputs)` runs it and returns its outputs as a list; or, step by step,
    `set_inputs(inputs)`, `execute()`, `get_outputs()`."""

    def __init__(self, handle: _native.NativeMethod) -> None:
        self._handle = handle
        self._inputs: Optional[list] = None
        self._outputs: Optional[list] = None

    def call(self, inputs: Sequence[Any]) -> list:
        return self._handle.execute(_input_list(inputs))

    def set_inputs(self, inputs: Sequence[Any]) -> None:
        """Give the next `execute()` these inputs; tensors are copied now, as into the method's memory."""
        import torch

        self._inputs = [x.clone() if isinstance(x, torch.Tensor) else x for x in _input_list(inputs)]

    def execute(self) -> None:
        """Run the method on the inputs of the last `set_inputs`; `get_outputs()` returns the results."""
        if self._inputs is None:
            if self.method_meta().num_inputs():
                raise RuntimeError("ExecuTorchMethod.execute(): no inputs set; call set_inputs(inputs) first")
            self._inputs = []
        self._outputs = self._handle.execute(self._inputs)

    def get_outputs(self, clone_outputs: bool = True) -> list:
        """The outputs of the last `execute()` (always tensors of their own: this runtime hands out
        no views of its memory, so `clone_outputs` changes nothing)."""
        if self._outputs is None:
            raise RuntimeError("ExecuTorchMethod.get_outputs(): the method has not run; call execute() first")
        return list(self._outputs)

    __call__ = call

    def method_meta(self) -> MethodMeta:
        return self._handle.meta()


class ExecuTorchProgram:
    """A loaded `.pte`: its method names by index, and `load_method(name)`."""

    def __init__(self, data: bytes, verification: Verification, etdump: Optional[int] = None) -> None:
        self._data = data  # the native program reads from these bytes for as long as it lives
        self._program = _native.load_program(data, verification, None, etdump)
        self._names = sorted(self._program.method_names)

    def has_etdump(self) -> bool:
        return self._program.has_etdump()

    def write_etdump_result_to_file(self, path: Union[str, os.PathLike],
                                    debug_buffer_path: Optional[Union[str, os.PathLike]] = None) -> None:
        """Write the ETDump recorded since load (and the debug buffer, when a path is given)."""
        if not self.has_etdump():
            raise RuntimeError("this program records no ETDump; load it with enable_etdump=True")
        from executorch.exir._serialize._atomic import write_chunks

        etdump, debug = self._program.etdump_result()
        write_chunks(path, [etdump])
        if debug_buffer_path is not None:
            write_chunks(debug_buffer_path, [debug])

    def num_methods(self) -> int:
        return len(self._names)

    def get_method_name(self, index: int) -> str:
        if not 0 <= index < len(self._names):
            raise IndexError(f"method index {index} out of range; the program has {len(self._names)} methods")
        return self._names[index]

    def load_method(self, name: str) -> ExecuTorchMethod:
        return ExecuTorchMethod(self._program.load_method(name))

    def method_meta(self, method_name: str) -> MethodMeta:
        """The inputs, outputs and memory of `method_name`, without loading it."""
        return self._program.method_meta(method_name)


class ExecuTorchModule:
    """A `.pte` with its methods loaded on first use: `forward(inputs)`, `run_method(name, inputs)`."""

    def __init__(self, data: bytes, verification: Verification, etdump: Optional[int] = None) -> None:
        self._program = ExecuTorchProgram(data, verification, etdump)
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
        return self._program.has_etdump()

    def write_etdump_result_to_file(self, path: Union[str, os.PathLike],
                                    debug_buffer_path: Optional[Union[str, os.PathLike]] = None) -> None:
        """Write the ETDump recorded since load (and the debug buffer, when a path is given)."""
        self._program.write_etdump_result_to_file(path, debug_buffer_path)


def _load_for_executorch(path: Union[str, os.PathLike], enable_etdump: bool = False, debug_buffer_size: int = 0,
                         program_verification: Verification = Verification.InternalConsistency) -> ExecuTorchModule:
    """Load the `.pte` at `path` as an `ExecuTorchModule`."""
    return ExecuTorchModule(read_program_file(path), program_verification,
                            _etdump_option(enable_etdump, debug_buffer_size))


def _load_for_executorch_from_buffer(buffer: bytes, enable_etdump: bool = False, debug_buffer_size: int = 0,
                                     program_verification: Verification = Verification.InternalConsistency
                                     ) -> ExecuTorchModule:
    """Load `.pte` bytes as an `ExecuTorchModule`."""
    return ExecuTorchModule(bytes(buffer), program_verification, _etdump_option(enable_etdump, debug_buffer_size))


def _load_program(path: Union[str, os.PathLike], enable_etdump: bool = False, debug_buffer_size: int = 0,
                  program_verification: Verification = Verification.InternalConsistency) -> ExecuTorchProgram:
    """Load the `.pte` at `path` as an `ExecuTorchProgram` (methods loaded on request)."""
    return ExecuTorchProgram(read_program_file(path), program_verification,
                             _etdump_option(enable_etdump, debug_buffer_size))


def _load_program_from_buffer(buffer: bytes, enable_etdump: bool = False, debug_buffer_size: int = 0,
                              program_verification: Verification = Verification.InternalConsistency
                              ) -> ExecuTorchProgram:
    """Load `.pte` bytes as an `ExecuTorchProgram`."""
    return ExecuTorchProgram(bytes(buffer), program_verification, _etdump_option(enable_etdump, debug_buffer_size))
