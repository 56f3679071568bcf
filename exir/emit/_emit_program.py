"""`emit_program`: upstream's entry point from edge programs to the in-memory `Program` and its debug maps."""

from __future__ import annotations

from typing import Any, Optional, Union

from torch.export import ExportedProgram

from executorch.exir.emit._output import EmitterOutput


def emit_program(methods: Union[ExportedProgram, dict[str, ExportedProgram]], emit_stacktrace: bool = False,
                 prim_getters: Optional[dict[str, Any]] = None,
                 emit_mutable_buffer_names: bool = False) -> EmitterOutput:
    """Emit edge-dialect programs (one, as "forward", or a dict of method name -> program) and the
    constant methods `prim_getters` into a `Program`, planning memory with the default planner."""
    from executorch.exir.config import ExecutorchBackendConfig
    from executorch.exir.program._program import EdgeProgramManager, _as_dict, _check_constant_methods

    programs = _as_dict(methods)
    config = ExecutorchBackendConfig(emit_stacktrace=emit_stacktrace,
                                     emit_mutable_buffer_names=emit_mutable_buffer_names)
    manager = EdgeProgramManager(programs, _check_constant_methods(prim_getters, programs)).to_executorch(config)
    return manager._emitter_output
