"""Partitions from node lists, graph patterns and operator support: the largest connected groups
`CapabilityBasedPartitioner` proposes."""

from __future__ import annotations

from typing import Optional

import torch
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner, Partition
from torch.fx.passes.operator_support import OperatorSupportBase, any_chain
from torch.fx.passes.utils.matcher_utils import SubgraphMatcher


class _Marked(OperatorSupportBase):
    def __init__(self, marked: set) -> None:
        self.marked = marked

    def is_node_supported(self, submodules, node: torch.fx.Node) -> bool:
        return node in self.marked


def _propose(graph_module: torch.fx.GraphModule, marked: set,
             op_support: Optional[OperatorSupportBase]) -> list[Partition]:
    support = _Marked(marked) if op_support is None else any_chain(op_support, _Marked(marked))
    return CapabilityBasedPartitioner(graph_module, support, allows_single_node_partition=True).propose_partitions()


def generate_partitions_from_list_of_nodes(graph_module: torch.fx.GraphModule,
                                           pattern_list: Optional[list[list[torch.fx.Node]]] = None,
                                           op_support: Optional[OperatorSupportBase] = None) -> list[Partition]:
    """The partitions covering the nodes of `pattern_list` and those `op_support` accepts."""
    if pattern_list is None and op_support is None:
        raise ValueError("generate_partitions_from_list_of_nodes needs pattern_list, op_support or both")
    marked = {n for nodes in pattern_list or [] for n in nodes}
    return _propose(graph_module, marked, op_support)


def generate_pattern_op_partitions(graph_module: torch.fx.GraphModule, patterns: Optional[list[torch.fx.Graph]] = None,
                                   partitions_list: Optional[list[list[torch.fx.Node]]] = None,
                                   op_support: Optional[OperatorSupportBase] = None,
                                   ignore_literals: bool = False) -> list[Partition]:
    """The partitions covering every match of `patterns` in the graph (their non-input nodes), the nodes of
    `partitions_list`, and the nodes `op_support` accepts."""
    marked = {n for nodes in partitions_list or [] for n in nodes}
    for pattern in patterns or []:
        for match in SubgraphMatcher(pattern, ignore_literals=ignore_literals).match(graph_module.graph):
            marked.update(g for p, g in match.nodes_map.items() if p.op != "placeholder" and g.op != "placeholder")
    return _propose(graph_module, marked, op_support)
