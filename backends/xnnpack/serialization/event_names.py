"""The name of each XNNPACK node's profiling event: `<kind> #<n>`, the payload's n-th node of that kind.

The runtimes (Python here, C++ in runtime/executor.cpp) report each node they run under this name,
in the published runtime's `<operator> #<n>` form; the ahead-of-time half maps the same names to the
nodes' debug handles (`PreprocessResult.debug_handle_map`), so the Inspector gives them op types.
"""

from __future__ import annotations


def node_kind(xnode) -> str:
    """`Conv2d` for an `XNNConv2d` node."""
    return type(xnode.xnode_union).__name__.removeprefix("XNN")


def event_names(xnodes) -> list[str]:
    counts: dict[str, int] = {}
    names = []
    for node in xnodes:
        kind = node_kind(node)
        counts[kind] = counts.get(kind, 0) + 1
        names.append(f"{kind} #{counts[kind]}")
    return names
