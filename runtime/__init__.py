"""Run `.pte` programs: `Runtime.get().load_program(path).load_method("forward").execute(inputs)`.

The same API fronts two implementations: the native C++ runtime (full wheel) and a
pure-Python interpreter over torch operators (every wheel). `Runtime.get().backend` names
the active one; `EXECUTORCH_RUNTIME=native|python` forces a choice.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from types import ModuleType
from typing import Any, BinaryIO, Optional, Sequence, Union

from executorch.runtime._backend import MethodHandle, ProgramHandle, Verification, select_backend
from executorch.runtime._errors import (
    ExecuTorchError, InvalidProgramError, MethodNotFoundError, ProgramFileError, file_error,
)
from executorch.runtime._inputs import input_checker
from executorch.runtime._meta import MethodMeta, TensorInfo

__all__ = [
    "BackendRegistry", "ExecuTorchError", "InvalidProgramError", "Method", "MethodMeta", "MethodNotFoundError",
    "OperatorRegistry", "Program", "ProgramFileError", "Runtime", "TensorInfo", "Verification",
]

ProgramSource = Union[bytes, bytearray, memoryview, BinaryIO, Path, str]


class Method:
    """One loaded method of a program; `execute` runs it."""

    def __init__(self, handle: MethodHandle) -> None:
        self._handle = handle
        self._check = input_checker(handle.meta())

    def execute(self, inputs: Sequence[Any]) -> list:
        """Run the method on `inputs` (tensors, ints, floats, bools) and return its outputs as a list."""
        if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Sequence):
            raise TypeError(
                f"inputs must be a list or tuple of tensors/scalars, got {type(inputs).__name__}; "
                f"wrap a single tensor as [tensor]")
        inputs = list(inputs)
        self._check(inputs)
        return self._handle.execute(inputs)

    @property
    def metadata(self) -> MethodMeta:
        """The method's inputs and outputs (count, shapes, dtypes)."""
        return self._handle.meta()


class Program:
    """A loaded program: its method names and their loaders."""

    def __init__(self, handle: ProgramHandle, data: Optional[object]) -> None:
        self._data = data  # the backend may point into these bytes
        self._handle = handle
        self._names = tuple(handle.method_names)
        self._methods: dict[str, Method] = {}

    @property
    def method_names(self) -> set[str]:
        """The names of the program's methods."""
        return set(self._names)

    def load_method(self, name: str) -> Method:
        """Load (once, then cached) the method called `name`; unknown names raise MethodNotFoundError."""
        method = self._methods.get(name)
        if method is None:
            self._check_name(name)
            method = self._methods[name] = Method(self._handle.load_method(name))
        return method

    def metadata(self, method_name: str) -> MethodMeta:
        """The inputs and outputs of `method_name`, without loading it."""
        self._check_name(method_name)
        return self._handle.method_meta(method_name)

    def write_etdump_result_to_file(self, etdump_path: Union[Path, str],
                                    debug_buffer_path: Optional[Union[Path, str]] = None) -> None:
        """Write the ETDump recorded since load (`load_program(..., enable_etdump=True)`) to
        `etdump_path`, and the intermediate outputs' debug buffer to `debug_buffer_path` when given."""
        result = getattr(self._handle, "etdump_result", None)
        if result is None or not self._handle.has_etdump():
            raise ExecuTorchError(
                "this program records no ETDump; load it with Runtime.get().load_program(path, enable_etdump=True)")
        etdump, debug = result()
        from executorch.exir._serialize._atomic import write_chunks

        write_chunks(etdump_path, [etdump])
        if debug_buffer_path is not None:
            write_chunks(debug_buffer_path, [debug])

    def _check_name(self, name: str) -> None:
        if name not in self._names:
            known = ", ".join(repr(n) for n in self._names) or "none"
            raise MethodNotFoundError(f"program has no method {name!r}; its methods are: {known}")


class BackendRegistry:
    """The delegate backends the active runtime can run."""

    def __init__(self, module: ModuleType) -> None:
        self._module = module

    @property
    def registered_backend_names(self) -> list[str]:
        names = getattr(self._module, "registered_backend_names", None)
        return list(names()) if names is not None else []

    def is_available(self, backend_name: str) -> bool:
        return backend_name in self.registered_backend_names


class OperatorRegistry:
    """The operators (`namespace::name.overload`) the active runtime can run."""

    def __init__(self, module: ModuleType) -> None:
        self._module = module

    @property
    def operator_names(self) -> set[str]:
        names = getattr(self._module, "operator_names", None)
        return set(names()) if names is not None else set()


class Runtime:
    """The process-wide runtime; `Runtime.get()` returns the singleton."""

    @staticmethod
    @functools.lru_cache(maxsize=1)
    def get() -> "Runtime":
        """Return the runtime, choosing the backend on first use."""
        name, module = select_backend()
        return Runtime(name, module)

    def __init__(self, backend: str, module: ModuleType) -> None:
        self._backend = backend
        self._module = module
        self.backend_registry = BackendRegistry(module)
        self.operator_registry = OperatorRegistry(module)

    @property
    def backend(self) -> str:
        """Which implementation runs programs: "native" or "python"."""
        return self._backend

    def load_program(
        self,
        data: ProgramSource,
        *,
        verification: Verification = Verification.InternalConsistency,
        enable_etdump: bool = False,
        debug_buffer_size: int = 0,
        data_path: Optional[Union[Path, str]] = None,
    ) -> Program:
        """Load a program from a `.pte` path, its bytes, or a binary file object.

        `verification=Verification.Minimal` trusts the file: the whole-program consistency check
        (the FlatBuffer verifier in the native runtime) is skipped."""
        if not isinstance(verification, Verification):
            raise TypeError(f"verification must be a Verification, got {verification!r}")
        if not isinstance(debug_buffer_size, int) or debug_buffer_size < 0:
            raise ValueError(f"debug_buffer_size must be a byte count >= 0, got {debug_buffer_size!r}")
        if debug_buffer_size and not enable_etdump:
            raise ValueError(
                f"debug_buffer_size={debug_buffer_size} needs enable_etdump=True: the debug buffer holds the "
                "ETDump's intermediate outputs")
        payload = _read(data)
        external = _read_data_file(data_path) if data_path is not None else None
        extra = {"etdump_debug_buffer_size": debug_buffer_size} if enable_etdump else {}
        handle = self._module.load_program(payload, verification, external, **extra)
        return Program(handle, payload if external is None else (payload, external))


def _read_data_file(path: Union[Path, str]) -> memoryview:
    """The `.ptd` file read into memory the program owns, as the `.pte` is: a file changed or truncated
    after load never reaches a loaded program (through a mapping of the file, a truncation would
    fault, SIGBUS, on the next read of a weight)."""
    import mmap

    name = os.fspath(path)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                raise ExecuTorchError(f"data file {name!r} is empty; pass the .ptd written with the .pte")
            # Private anonymous pages, faulted in at once (a third faster than one by one): page-aligned,
            # so the native engine uses them in place rather than copying them again.
            flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_POPULATE", 0)
            data = memoryview(mmap.mmap(-1, size, flags=flags))
            got = 0
            while got < size:
                n = f.readinto(data[got:])
                if not n:
                    break
                got += n
            if got != size:
                raise ExecuTorchError(f"data file {name!r} shrank while being read ({got} of {size} bytes); "
                                      f"load it again once it is written")
            return data
    except OSError as e:
        raise file_error(e, path, "data", "the .ptd file written with the .pte (write_tensor_data_to_file)") from None


def read_program_file(path: Union[Path, str]) -> bytes:
    """The bytes of the `.pte` at `path`; a path that is not a readable, non-empty file raises the
    runtime's error naming it."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise file_error(e, path, "program", "the .pte file export wrote (ExecutorchProgramManager.write_to_file)"
                         ) from None
    if not data:
        raise InvalidProgramError(f"program file {os.fspath(path)!r} is empty; re-export it (a write that was "
                                  "interrupted, or a file truncated on the way)")
    return data


def _read(data: ProgramSource) -> Union[bytes, memoryview]:
    if isinstance(data, (str, Path)):
        return read_program_file(data)
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        # A private copy: the caller may change its buffer while the program points into it.
        return bytes(data)
    if hasattr(data, "read"):
        payload = data.read()
        if not isinstance(payload, (bytes, bytearray)):
            raise TypeError(f"the file object returned {type(payload).__name__} from read(); "
                            f"open it in binary mode ('rb')")
        return bytes(payload)
    raise TypeError(
        f"load_program takes a path, bytes, bytearray, memoryview or binary file object, "
        f"got {type(data).__name__}")
