"""`get_delegation_info`: how much of a lowered graph each backend took, as ExecuTorch reports it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torch import fx

from executorch.exir.dialects.edge._ops import aten_op

__all__ = ["DelegationBreakdown", "DelegationInfo", "get_delegation_info"]

# A delegated subgraph is called through this higher-order operator's name in the graph.
_DELEGATE_CALL = "executorch_call_delegate"


@dataclass
class DelegationBreakdown:
    """One operator's count of delegated and not delegated occurrences."""

    op_type: str
    delegated: int = 0
    non_delegated: int = 0


@dataclass
class DelegationInfo:
    """Counts of delegated subgraphs and of operators inside and outside them."""

    num_delegated_subgraphs: int
    num_delegated_nodes: int
    num_non_delegated_nodes: int
    delegation_by_operator: dict[str, DelegationBreakdown] = field(default_factory=dict)

    def get_summary(self) -> str:
        return (
            f"Total delegated subgraphs: {self.num_delegated_subgraphs}\n"
            f"Number of delegated nodes: {self.num_delegated_nodes}\n"
            f"Number of non-delegated nodes: {self.num_non_delegated_nodes}\n"
        )

    def get_operator_delegation_dataframe(self) -> Any:
        """The per-operator table as a pandas DataFrame (pandas must be installed)."""
        try:
            import pandas as pd
        except ImportError as e:
            raise ImportError("get_operator_delegation_dataframe needs pandas; pip install pandas") from e
        rows = sorted(self.delegation_by_operator.values(), key=lambda b: b.op_type)
        return pd.DataFrame(
            [(b.op_type, b.delegated, b.non_delegated) for b in rows],
            columns=["op_type", "occurrences_in_delegated_graphs", "occurrences_in_non_delegated_graphs"],
        )


def _op_name(node: fx.Node) -> str:
    target = aten_op(node.target)
    name = getattr(target, "__name__", str(target))
    return name.split(".")[0]


def _count(gm: fx.GraphModule, delegated: bool, by_op: dict[str, DelegationBreakdown], info: list[int]) -> None:
    for node in gm.graph.nodes:
        if node.op != "call_function" or _op_name(node) == "getitem":
            continue
        if _op_name(node) == _DELEGATE_CALL:
            info[0] += 1
            lowered = getattr(gm, node.args[0].target)
            inner = getattr(lowered, "original_module", None)
            if inner is not None:
                _count(getattr(inner, "graph_module", inner), True, by_op, info)
            continue
        entry = by_op.setdefault(_op_name(node), DelegationBreakdown(_op_name(node)))
        if delegated:
            entry.delegated += 1
            info[1] += 1
        else:
            entry.non_delegated += 1
            info[2] += 1


def get_delegation_info(graph_module: fx.GraphModule) -> DelegationInfo:
    """Count the delegated subgraphs of `graph_module` (e.g. `edge.exported_program().graph_module`)
    and the operator nodes inside and outside them."""
    by_op: dict[str, DelegationBreakdown] = {}
    info = [0, 0, 0]
    _count(graph_module, False, by_op, info)
    return DelegationInfo(info[0], info[1], info[2], by_op)
