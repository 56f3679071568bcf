"""`ExecutorBackendPartitioner`: claims nodes for ExecutorBackend, all of them or chosen ops."""

from __future__ import annotations

import operator
from typing import Iterable, Optional

import torch
from torch.export import ExportedProgram
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
from executorch.exir.backend.utils import tag_constant_data
from executorch.exir.dialects._edge_ops import prim_op_name
from executorch.exir.dialects.edge._ops import EdgeOpOverload, aten_op


class _Supported(OperatorSupportBase):
    def __init__(self, ops: Optional[set]) -> None:
        self.ops = ops

    def is_node_supported(self, submodules, node: torch.fx.Node) -> bool:
        if node.op != "call_function":
            return False
        if node.target is operator.getitem:  # goes with the multi-output node it unpacks
            return self.is_node_supported(submodules, node.args[0])
        if prim_op_name(node.target) is not None:
            # Arithmetic on symbolic sizes (the position read from a tensor, plus a length): claimed
            # with the whole program, as the published partitioner claims every call, so the SymInt
            # stays inside the delegate; with `ops` it is claimed when listed, else left outside.
            return self.ops is None or node.target in self.ops
        if not isinstance(node.target, (torch._ops.OpOverload, EdgeOpOverload)):
            return False  # control flow and delegate calls stay where they are
        # `ops` may name edge ops or the torch operators they stand for
        return self.ops is None or node.target in self.ops or aten_op(node.target) in self.ops


class AnyOperatorSupport(OperatorSupportBase):
    """Accepts every call_function node (upstream's support class of that name)."""

    def is_node_supported(self, submodules, node: torch.fx.Node) -> bool:
        return node.op == "call_function"


class ExecutorBackendPartitioner(Partitioner):
    """Tags every operator node (or, with `ops`, the nodes of those ops) in convex groups, one
    partition per group, for the backend id "ExecutorBackend"."""

    def __init__(self, ops: Optional[Iterable] = None) -> None:
        super().__init__()
        self.ops = set(ops) if ops is not None else None
        self.delegation_spec = DelegationSpec("ExecutorBackend", [])

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        from executorch.exir.passes.edge import graph_modules

        tags = {}
        # The program's graph and each torch.cond branch are partitioned on their own.
        for gm in graph_modules(exported_program.graph_module):
            support = _Supported(self.ops)
            groups = CapabilityBasedPartitioner(gm, support, allows_single_node_partition=True).propose_partitions()
            for group in sorted(groups, key=lambda g: min(n.name for n in g.nodes)):
                tag = f"tag{len(tags)}"
                for node in group.nodes:
                    node.meta["delegation_tag"] = tag
                tags[tag] = self.delegation_spec
        tag_constant_data(exported_program)
        return PartitionResult(tagged_exported_program=exported_program, partition_tags=tags)
