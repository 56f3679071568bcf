"""`AllNodePartitioner`: hands the whole graph (operators and tensor inputs) to one backend."""

from __future__ import annotations

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind

from executorch.exir.backend.compile_spec_schema import CompileSpec
from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult

_TENSOR_STATE = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)


def is_non_tensor_placeholder(node: torch.fx.Node, ep: ExportedProgram) -> bool:
    """Whether `node` is a placeholder other than a parameter, buffer or lifted constant (a user input)."""
    if node.op != "placeholder":
        return False
    kind = next((s.kind for s in ep.graph_signature.input_specs if getattr(s.arg, "name", None) == node.name), None)
    return kind not in _TENSOR_STATE


class AllNodePartitioner(Partitioner):
    """Tags every node but the user inputs and the output with `backend_id`: one partition, lowered whole."""

    def __init__(self, backend_id: str, compile_specs: list[CompileSpec]) -> None:
        super().__init__()
        self.delegation_spec = DelegationSpec(backend_id, compile_specs)

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        tag = self.delegation_spec.backend_id
        for node in exported_program.graph_module.graph.nodes:
            if node.op != "output" and not is_non_tensor_placeholder(node, exported_program):
                node.meta["delegation_tag"] = tag
        return PartitionResult(tagged_exported_program=exported_program,
                               partition_tags={tag: self.delegation_spec})
