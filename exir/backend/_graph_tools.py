"""Upstream's helpers that look into a lowered graph: delegates, what stayed outside them, payloads,
a printout, a comparison."""

from __future__ import annotations

import operator

import torch

from executorch.exir.delegate import executorch_call_delegate, is_lowered_module


def _is_delegate_getitem(node: torch.fx.Node) -> bool:
    return (node.target is operator.getitem and isinstance(node.args[0], torch.fx.Node)
            and node.args[0].target is executorch_call_delegate)


def get_delegates(graph: torch.fx.Graph) -> list[torch.fx.Node]:
    """The `get_attr` nodes that hold the graph's lowered modules."""
    return [n for n in graph.nodes if n.op == "get_attr" and n.name.startswith("lowered_module_")]


def get_non_lowered_nodes(graph: torch.fx.Graph) -> list[torch.fx.Node]:
    """The operator calls left outside every delegate (delegate calls and their getitems excluded)."""
    return [n for n in graph.nodes if n.op == "call_function" and n.target is not executorch_call_delegate
            and not _is_delegate_getitem(n)]


def is_identical_graph(graph_left: torch.fx.GraphModule, graph_right: torch.fx.GraphModule) -> bool:
    """Whether the two graphs have the same nodes in the same order: same op, same target, and inputs at
    the same positions."""
    left, right = list(graph_left.graph.nodes), list(graph_right.graph.nodes)
    if len(left) != len(right):
        return False
    at_left, at_right = {n: i for i, n in enumerate(left)}, {n: i for i, n in enumerate(right)}
    return all(a.op == b.op and a.target == b.target
               and [at_left[x] for x in a.all_input_nodes] == [at_right[x] for x in b.all_input_nodes]
               for a, b in zip(left, right))


def get_lowered_submodules(graph_module: torch.fx.GraphModule) -> list[tuple]:
    """(attribute name, lowered module, the call node) for each delegate call in this graph (not in submodules)."""
    return [(n.args[0].target, getattr(graph_module, n.args[0].target), n) for n in graph_module.graph.nodes
            if n.op == "call_function" and n.target is executorch_call_delegate]


def get_lowered_backend_modules(graph_module: torch.fx.GraphModule) -> list:
    """The lowered module of each delegate call in this graph."""
    return [module for _, module, _ in get_lowered_submodules(graph_module)]


def get_delegated_payload(graph_module: torch.fx.GraphModule) -> dict[str, tuple[str, list, bytes]]:
    """Per lowered module's attribute name: (backend id, compile specs, the payload its preprocess made)."""
    out = {}
    for node in get_delegates(graph_module.graph):
        module = getattr(graph_module, node.target, None)
        if is_lowered_module(module):
            out[node.name] = (module.backend_id, module.compile_specs, module.processed_bytes)
    return out


def format_delegated_graph(graph_module: torch.fx.GraphModule) -> str:
    """The graph, each lowered module's line followed by its backend id and its own graph, indented."""
    lines = ["graph():"]
    for node in graph_module.graph.nodes:
        lines.append(f"  {node.format_node()}")
        if node.op == "get_attr" and node.name.startswith("lowered_module_"):
            module = getattr(graph_module, node.target)
            lines += [f"    backend_id: {module.backend_id}", "    lowered graph():"]
            lines += [f"      {n.format_node()}" for n in module.original_module.graph.nodes]
    return "\n".join(lines) + "\n"


def print_delegated_graph(graph_module: torch.fx.GraphModule) -> None:
    print(format_delegated_graph(graph_module))
