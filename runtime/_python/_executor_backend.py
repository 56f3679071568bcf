"""`ExecutorBackend` for the Python runtime: the payload is a `.pte` that this runtime runs."""

from __future__ import annotations

from executorch.exir._serialize import read_program
from executorch.exir._serialize._flat_tensor import NamedTensorData
from executorch.runtime import python_backend
from executorch.runtime._errors import ExecuTorchError, InvalidProgramError
from executorch.runtime._python import _kernels
from executorch.runtime._python._method import PythonMethod
from executorch.runtime._python._values import SharedArena


class ExecutorBackend(python_backend.PythonBackend):
    def init(self, processed, compile_specs, named_data):
        program = read_program(bytes(processed))
        plan = next((p for p in program.execution_plan if p.name == "forward"), None)
        if plan is None:
            raise InvalidProgramError("the ExecutorBackend payload has no 'forward' method; lower a program with one")
        # Compile specs are a bag: `external_constants` changed the payload ahead of time (its weights
        # are the outer program's named data, passed here); nothing else is read.
        external = {key: NamedTensorData(data, None) for key, data in named_data.items()}
        method = PythonMethod(program, plan, external, SharedArena(program))
        return method, len(method._plan.inputs), len(method._plan.outputs)

    def execute_traced(self, handle, args, tracer):
        """`execute`, each nested instruction a delegate event named `<op>#<instruction>`."""
        method = handle[0]
        method.set_event_tracer(_NestedEvents(tracer))
        try:
            self.execute(handle, args)
        finally:
            method.set_event_tracer(None)

    def execute(self, handle, args):
        method, n_in, n_out = handle
        if len(args) != n_in + n_out:
            raise ExecuTorchError(
                f"ExecutorBackend: the DelegateCall passes {len(args)} values but the nested program takes "
                f"{n_in} inputs and returns {n_out} outputs; the file is corrupt, re-export it")
        for pos, value in enumerate(args[:n_in]):
            if type(value) is int:  # a size computed before the call (a SymInt input)
                method.set_int_input(pos, value)
        results = method.execute(list(args[:n_in]))
        for slot, value in zip(args[n_in:], results):
            if slot.shape != value.shape:
                _kernels.resize(slot, value.shape)
            slot.copy_(value)


class _NestedEvents:
    """What the nested method's tracer sees: its kernel events become the outer call's delegate events."""

    logs_outputs = False

    def __init__(self, outer) -> None:
        self.outer = outer
        self.chain_id, self.debug_handle = -1, 0

    def create_event_block(self, name: str) -> None:
        pass

    def profile(self, name: str, start: int, end: int, chain: int, instruction: int) -> None:
        if name.startswith("native_call_"):
            self.outer.profile_delegate(f"{name[len('native_call_'):]}#{instruction}", start, end)

    def log_value(self, *args, **kwargs) -> None:
        pass


python_backend.register_backend("ExecutorBackend", ExecutorBackend())
