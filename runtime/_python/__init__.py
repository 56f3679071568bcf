"""The pure-Python runtime backend: reads a `.pte` and runs its methods with torch kernels."""

from __future__ import annotations

from typing import Optional, Sequence, Union

import torch

from executorch.exir import schema
from executorch.exir._serialize import read_program
from executorch.runtime import _plugins, python_backend
from executorch.runtime._backend import Verification
from executorch.runtime._errors import ExecuTorchError, InvalidProgramError
from executorch.runtime._meta import MethodMeta
from executorch.runtime._python import _kernels
from executorch.runtime._python._method import PythonMethod, now, plan_meta
from executorch.runtime._python._values import SharedArena

__all__ = ["PythonProgram", "load_program", "operator_names", "registered_backend_names"]


class PythonProgram:
    """A deserialized program whose methods load on demand."""

    def __init__(self, program: schema.Program, external: Optional[dict] = None, tracer=None) -> None:
        self._program = program
        self._external = external
        self._tracer = tracer  # an ETDumpGen when loaded with enable_etdump
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
        tracer = self._tracer
        if tracer is None:
            return PythonMethod(self._program, self._plans[name], self._external, self._shared)
        tracer.create_event_block("Default")
        start = now()
        method = PythonMethod(self._program, self._plans[name], self._external, self._shared)
        end = now()
        tracer.profile("Method::init", start, end, -1, 0)
        tracer.profile("Program::load_method", start, now(), -1, 0)
        method.set_event_tracer(tracer)
        return method

    def has_etdump(self) -> bool:
        return self._tracer is not None

    def etdump_result(self) -> tuple[bytes, bytes]:
        """The ETDump and the debug buffer recorded since load (enable_etdump=True)."""
        return self._tracer.get_etdump_data(), self._tracer.get_debug_buffer()


def load_program(data: Union[bytes, memoryview],
                 verification: Verification = Verification.InternalConsistency,
                 external_data: Optional[Union[bytes, memoryview]] = None,
                 etdump_debug_buffer_size: Optional[int] = None) -> PythonProgram:
    """Read `.pte` bytes (and the `.ptd` bytes its external tensors come from). `verification`
    Minimal skips the program-wide reference check (a trusted file; a bad reference then fails when
    used, as a Python error). With `etdump_debug_buffer_size` (0 or more) the program records an
    ETDump as it loads methods and runs them."""
    tracer = None
    if etdump_debug_buffer_size is not None:
        make = _plugins.load(_plugins.EVENT_TRACERS, "etdump").get("etdump")
        if make is None:
            raise ExecuTorchError("enable_etdump: no ETDump writer is installed; reinstall executorch")
        tracer = make(etdump_debug_buffer_size)
    external = None
    if external_data is not None:
        from executorch.exir._serialize._flat_tensor import read_ptd

        external = read_ptd(external_data)
    verify = verification is not Verification.Minimal
    return PythonProgram(read_program(data, verify=verify), external, tracer)


def operator_names() -> set[str]:
    """ExecuTorch's own operators implemented here, and every operator torch registers."""
    listed = getattr(torch._C, "_dispatch_get_all_op_names", lambda: [])()
    return set(_kernels.SCALAR_KERNELS) | set(_kernels.TENSOR_KERNELS) | set(_kernels.DEVICE_COPIES) | set(listed)


def registered_backend_names() -> list[str]:
    """The delegate backends registered with the Python runtime."""
    return python_backend.registered_backend_names()

