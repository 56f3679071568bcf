"""`emit_program`: upstream's entry point from edge programs to the in-memory `Program` and its debug maps."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Union

from torch.export import ExportedProgram

from executorch.exir import schema as S
from executorch.exir._tensor_data import tensor_bytes


@dataclass
class EmitterOutput:
    """What emission makes: the program, per method each instruction's debug handle, per method each
    DelegateCall's backend and debug-handle map and its output count, the mutable buffers' initial
    data, and the constants placed in `.ptd` files."""

    program: S.Program
    debug_handle_map: dict[str, dict[int, int]]
    method_to_delegate_debug_id_map: dict[str, dict[int, dict]]
    # per method, per DelegateCall instruction: how many values the delegated graph returns
    instruction_id_to_num_outs_map: dict[str, dict[int, int]] = field(default_factory=dict)
    mutable_data: Optional[list[S.Buffer]] = None
    # constants placed in .ptd files: their distinct bytes, and per file (tag) each name's index in them
    external_constant_buffer: list[bytes] = field(default_factory=list)
    external_constant_map: Optional[dict[str, dict[str, int]]] = field(default_factory=dict)


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
    return emitter_output(manager)


def emitter_output(manager) -> EmitterOutput:
    """The EmitterOutput of an `ExecutorchProgramManager` (upstream's `manager._emitter_output`)."""
    program = manager.executorch_program
    mutable = None
    if program.mutable_data_segments:
        from executorch.exir._serialize._program import _extras

        mutable = _extras(program)[0]
    num_outs = {method: {pc: _num_outputs(lowered) for pc, lowered in calls}
                for method, calls in manager._delegate_calls.items()}
    buffers, index, tables = [], {}, {}
    for tag, entries in manager._external_constants.items():
        for fqn, (tensor, _) in entries.items():
            data = bytes(tensor_bytes(tensor))
            if data not in index:
                index[data] = len(buffers)
                buffers.append(data)
            tables.setdefault(tag, {})[fqn] = index[data]
    return EmitterOutput(program, manager.debug_handle_map, manager.delegate_map, num_outs, mutable, buffers, tables)


def _num_outputs(lowered) -> int:
    outputs = lowered.original_module.graph_module.graph.output_node().args[0]
    return len(outputs) if isinstance(outputs, (list, tuple)) else 1
