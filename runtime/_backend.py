"""Chooses the implementation behind `executorch.runtime`, and the contract each one meets.

`EXECUTORCH_RUNTIME=native|python` forces one; unset, the native runtime is used when its
module imports and the pure-Python interpreter otherwise.

A backend is a module with a `load_program(data, verification)` function returning a
`ProgramHandle`. The public classes do the argument handling (paths, method-name lookup,
caching), so a backend only sees well-formed calls:

- `load_program(data: bytes | memoryview, verification: Verification) -> ProgramHandle`
  raises `InvalidProgramError` (or the reader's `SerializeError`) for a malformed file and
  `ExecuTorchError` for a well-formed one it cannot run. `data` stays alive and unchanged
  for as long as the handle lives, so a backend may keep pointers into it.
- optional module functions `registered_backend_names() -> list[str]` and
  `operator_names() -> set[str]`: what `Runtime.backend_registry` and
  `Runtime.operator_registry` report (empty when absent).
- `ProgramHandle.method_names -> Sequence[str]`, in program order.
- `ProgramHandle.method_meta(name) -> MethodMeta` and `ProgramHandle.load_method(name) ->
  MethodHandle`, called only with a name from `method_names`.
- `MethodHandle.meta() -> MethodMeta`, whose TensorInfo entries carry the shape dynamism;
  the public `Method` checks input count, tensor dtypes and shapes against it before calling
  `execute`.
- `MethodHandle.execute(inputs: list) -> list`: inputs are torch tensors or Python
  int/float/bool, in method order; outputs are new tensors (never views of the backend's
  memory, which the next call reuses) or Python scalars, in method order. A non-tensor
  input that differs from the value fixed at export, or a failing kernel, raises
  `ExecuTorchError` naming the input or the instruction and operator.
"""

from __future__ import annotations

import importlib
import os
from enum import Enum
from types import ModuleType
from typing import Optional, Protocol, Sequence, Union

from executorch.runtime._errors import ExecuTorchError
from executorch.runtime._meta import MethodMeta

ENV_VAR = "EXECUTORCH_RUNTIME"
_MODULES = {"native": "executorch.runtime._native", "python": "executorch.runtime._python"}


class Verification(Enum):
    """How much of a program is checked at load: the header only, or every index and offset."""

    Minimal = 0
    InternalConsistency = 1


class MethodHandle(Protocol):
    def meta(self) -> MethodMeta: ...

    def execute(self, inputs: list) -> list: ...


class ProgramHandle(Protocol):
    @property
    def method_names(self) -> Sequence[str]: ...

    def method_meta(self, name: str) -> MethodMeta: ...

    def load_method(self, name: str) -> MethodHandle: ...


class Backend(Protocol):
    def load_program(self, data: Union[bytes, memoryview], verification: Verification) -> ProgramHandle: ...


def select_backend() -> tuple[str, ModuleType]:
    """Return (name, module) of the backend the environment asks for, or the best available."""
    wanted = os.environ.get(ENV_VAR, "").strip().lower()
    if wanted and wanted not in _MODULES:
        raise ExecuTorchError(
            f"{ENV_VAR}={os.environ[ENV_VAR]!r} is not a runtime; use one of: native, python "
            f"(or leave it unset to pick native when installed)")
    if wanted == "python":
        return "python", importlib.import_module(_MODULES["python"])
    try:
        return "native", importlib.import_module(_MODULES["native"])
    except ImportError as exc:
        if not _is_native_part(exc.name):
            raise
        if wanted == "native":
            raise ExecuTorchError(
                f"{ENV_VAR}=native but the native runtime is not installed ({exc}); install the full "
                f"executorch wheel, or set {ENV_VAR}=python for the pure-Python interpreter"
            ) from None
    return "python", importlib.import_module(_MODULES["python"])


# The adapter and the compiled module it loads; a missing package on the way to either means
# the native runtime is not installed (the minimal wheel), not that it is broken.
_NATIVE_PARTS = ("executorch.runtime._native", "executorch.extension.pybindings._portable_lib")


def _is_native_part(module_name: Optional[str]) -> bool:
    return module_name is None or any(
        part == module_name or part.startswith(module_name + ".") for part in _NATIVE_PARTS)
