"""The pure-Python runtime backend: reads a `.pte` and runs its methods with torch kernels."""

from __future__ import annotations

from typing import Optional, Sequence, Union

import torch

from executorch.exir import schema
from executorch.exir._serialize import read_program
from executorch.runtime._backend import Verification
from executorch.runtime._errors import InvalidProgramError
from executorch.runtime._meta import MethodMeta
from executorch.runtime._python import _kernels
from executorch.runtime._python._method import PythonMethod, plan_meta
from executorch.runtime._python._values import SharedArena

__all__ = ["PythonProgram", "load_program", "operator_names", "registered_backend_names"]


class PythonProgram:
    """A deserialized program whose methods load on demand."""

    def __init__(self, program: schema.Program, external: Optional[dict] = None) -> None:
        self._program = program
        self._external = external
        self._shared: Optional[SharedArena] = None  # arena 2, made when the first method loads
        self._plans = {}
        for plan in program.execution_plan:
            if plan.name in self._plans:
                raise InvalidProgramError(f"the program has two methods named {plan.name!r}")
            self._plans[plan.name] = plan

    @property
    def method_names(self) -> Sequence[str]:
        return list(self._plans)

    def method_meta(self, name: str) -> MethodMeta:
        return plan_meta(self._plans[name])

    def load_method(self, name: str) -> PythonMethod:
        if self._shared is None:
            self._shared = SharedArena(self._program)
        return PythonMethod(self._program, self._plans[name], self._external, self._shared)


def load_program(data: Union[bytes, memoryview],
                 verification: Verification = Verification.InternalConsistency,
                 external_data: Optional[Union[bytes, memoryview]] = None) -> PythonProgram:
    """Read `.pte` bytes (and the `.ptd` bytes its external tensors come from); every index and
    offset is checked whatever `verification` asks."""
    external = None
    if external_data is not None:
        from executorch.extension.flat_tensor.serialize.serialize import read_ptd

        external = read_ptd(external_data)
    return PythonProgram(read_program(data), external)


def operator_names() -> set[str]:
    """ExecuTorch's own operators implemented here, and every operator torch registers."""
    listed = getattr(torch._C, "_dispatch_get_all_op_names", lambda: [])()
    return set(_kernels.SCALAR_KERNELS) | set(_kernels.TENSOR_KERNELS) | set(_kernels.DEVICE_COPIES) | set(listed)


def registered_backend_names() -> list[str]:
    """The delegate backends registered with the Python runtime."""
    from executorch.runtime import python_backend

    return python_backend.registered_backend_names()
