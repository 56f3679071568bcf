"""`AddMulPartitionerDemo`: the partitioner of ExecuTorch's delegation tutorial; claims add and mm for
BackendWithCompilerDemo (with `AddOperatorSupport` and `MatmulOperatorSupport`)."""

from __future__ import annotations

from typing import final

import torch
from torch.export import ExportedProgram
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase, any_chain

from executorch.exir.dialects._ops import ops as exir_ops
from executorch.exir.backend.compile_spec_schema import CompileSpec
from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
from executorch.exir.backend.test.backend_with_compiler_demo import BackendWithCompilerDemo


class AddOperatorSupport(OperatorSupportBase):
    """Accepts add.Tensor nodes."""

    def is_node_supported(self, submodules, node: torch.fx.Node) -> bool:
        return node.op == "call_function" and node.target == exir_ops.edge.aten.add.Tensor


class MatmulOperatorSupport(OperatorSupportBase):
    """Accepts mm nodes."""

    def is_node_supported(self, submodules, node: torch.fx.Node) -> bool:
        return node.op == "call_function" and node.target == exir_ops.edge.aten.mm.default


@final
class AddMulPartitionerDemo(Partitioner):
    """Tags each connected group of add.Tensor and mm nodes (in the graph and in control-flow
    branches) as one partition for BackendWithCompilerDemo, with the compile spec max_value=4."""

    def __init__(self) -> None:
        super().__init__()
        self.op_support = any_chain(AddOperatorSupport(), MatmulOperatorSupport())
        self.delegation_spec = DelegationSpec(BackendWithCompilerDemo.__name__, [CompileSpec("max_value", bytes([4]))])

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        from executorch.exir.passes.edge import graph_modules

        tags: dict[str, DelegationSpec] = {}
        for gm in graph_modules(exported_program.graph_module):
            groups = CapabilityBasedPartitioner(gm, self.op_support,
                                                allows_single_node_partition=True).propose_partitions()
            for group in sorted(groups, key=lambda g: min(n.name for n in g.nodes)):
                tag = f"tag{len(tags)}"
                for node in group.nodes:
                    node.meta["delegation_tag"] = tag
                tags[tag] = self.delegation_spec
        return PartitionResult(tagged_exported_program=exported_program, partition_tags=tags)
