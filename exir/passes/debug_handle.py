"""Debug handles: the integer on each edge-graph node that ties runtime instructions back to it.

Nodes that come from one node of the exported program (a decomposition's pieces) share a handle,
so the runtime's events for them map to that one source op. The ETRecord keeps the map from
instruction to handle; the Inspector joins an ETDump's events to graph nodes through it.
"""

from __future__ import annotations

from torch import fx

from executorch.exir.passes.edge import graph_modules

KEY = "debug_handle"


def _origin(node: fx.Node) -> tuple:
    """The node of the exported program `node` was made from (the oldest `from_node` source)."""
    sources = node.meta.get("from_node") or []
    source = None
    while sources:
        source = sources[-1]
        sources = getattr(source, "from_node", None) or []
    if source is None:
        return ("node", id(node.graph), node.name)
    return ("source", getattr(source, "graph_id", None), getattr(source, "name", None))


def assign_debug_handles(gm: fx.GraphModule) -> None:
    """Give every operator node without a handle one: shared by nodes of one origin, new numbers
    above the graph's largest, so handles already given (and maps made from them) stay valid."""
    graphs = list(graph_modules(gm))
    taken = [n.meta[KEY] for g in graphs for n in g.graph.nodes if isinstance(n.meta.get(KEY), int)]
    next_handle = max(taken, default=0) + 1
    by_origin: dict[tuple, int] = {}
    for g in graphs:
        for node in g.graph.nodes:
            if node.op in ("placeholder", "output", "get_attr") or isinstance(node.meta.get(KEY), int):
                continue
            origin = _origin(node)
            if origin not in by_origin:
                by_origin[origin] = next_handle
                next_handle += 1
            node.meta[KEY] = by_origin[origin]
