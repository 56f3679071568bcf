"""`EmitterOutput`: what emission makes, as upstream's `emit_program` returns it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

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


def emitter_output(program: S.Program, debug_handle_map: dict, delegate_map: dict, delegate_calls: dict,
                   external_constants: dict) -> EmitterOutput:
    """The EmitterOutput of an emitted program, from its delegate calls ({method: [(pc, lowered module)]})
    and its `.ptd` constants ({tag: {fqn: (tensor, layout)}}); equal constants are stored once."""
    mutable = None
    if program.mutable_data_segments:
        from executorch.exir._serialize._program import _extras

        mutable = _extras(program)[0]
    num_outs = {method: {pc: _num_outputs(lowered) for pc, lowered in calls}
                for method, calls in delegate_calls.items()}
    buffers, index, tables = [], {}, {}
    for tag, entries in external_constants.items():
        for fqn, (tensor, _) in entries.items():
            data = bytes(tensor_bytes(tensor))
            if data not in index:
                index[data] = len(buffers)
                buffers.append(data)
            tables.setdefault(tag, {})[fqn] = index[data]
    return EmitterOutput(program, debug_handle_map, delegate_map, num_outs, mutable, buffers, tables)


def _num_outputs(lowered) -> int:
    outputs = lowered.original_module.graph_module.graph.output_node().args[0]
    return len(outputs) if isinstance(outputs, (list, tuple)) else 1
