"""The graph modules a graph's control flow calls: each branch, loop body or mapped function, with the
node that calls it. Names as ExecuTorch's `exir.graph_module`."""

from __future__ import annotations

from typing import Mapping, Sequence

import torch
from torch import fx

__all__ = ["get_cond_while_submodules", "get_control_flow_submodules", "get_scan_submodules"]

Found = list[tuple[str, fx.GraphModule, fx.Node]]
_higher = torch.ops.higher_order


def _get_control_flow_submodules(graph_module: fx.GraphModule, op_to_submodule_arg_index: Mapping) -> Found:
    """(attribute name, submodule, calling node) for every call in `graph_module`'s own graph (not its
    submodules') of an operator in `op_to_submodule_arg_index`, one entry per submodule argument index."""
    found: Found = []
    for node in graph_module.graph.nodes:
        if node.op != "call_function":
            continue
        indices: Sequence[int] = next((v for op, v in op_to_submodule_arg_index.items() if node.target is op), ())
        for i in indices:
            holder = node.args[i]
            if not (isinstance(holder, fx.Node) and holder.op == "get_attr" and isinstance(holder.target, str)):
                raise ValueError(f"node '{node.name}' ({node.target}) argument {i} is not a get_attr of a submodule")
            found.append((holder.target, graph_module.get_submodule(holder.target), node))
    return found


def get_control_flow_submodules(graph_module: fx.GraphModule) -> Found:
    """The branches of `cond`, the function of `map` and the combine function of `scan`."""
    return _get_control_flow_submodules(graph_module, {_higher.cond: [1, 2], _higher.map_impl: [0],
                                                       _higher.scan: [0]})


def get_cond_while_submodules(graph_module: fx.GraphModule) -> Found:
    """The branches of `cond` and the condition and body of `while_loop`."""
    return _get_control_flow_submodules(graph_module, {_higher.cond: [1, 2], _higher.while_loop: [0, 1]})


def get_scan_submodules(graph_module: fx.GraphModule) -> Found:
    """The combine function of each `scan`."""
    return _get_control_flow_submodules(graph_module, {_higher.scan: [0]})
