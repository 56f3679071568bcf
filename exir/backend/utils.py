"""Helpers partitioners call: give constants and mutated buffers the tag of their users (full wheel: look into lowered graphs)."""

from __future__ import annotations

from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind


def _constant_kinds() -> tuple:
    return (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)


def tag_constant_data(edge_program: ExportedProgram) -> None:
    """A constant whose users all carry one tag gets that tag, so it moves into that partition."""
    kinds = {s.arg.name: s.kind for s in edge_program.graph_signature.input_specs if hasattr(s.arg, "name")}
    for node in edge_program.graph.nodes:
        if node.op != "placeholder" or kinds.get(node.name) not in _constant_kinds():
            continue
        tags = {u.meta.get("delegation_tag") for u in node.users}
        if len(tags) == 1 and None not in tags:
            node.meta["delegation_tag"] = tags.pop()


def tag_mutated_buffer(edge_program: ExportedProgram) -> None:
    """A mutated buffer whose users all carry one tag gets that tag."""
    sig = edge_program.graph_signature
    mutated = set(getattr(sig, "buffers_to_mutate", {}).values())
    targets = {s.arg.name: s.target for s in sig.input_specs if hasattr(s.arg, "name")}
    for node in edge_program.graph.nodes:
        if node.op != "placeholder" or targets.get(node.name) not in mutated:
            continue
        tags = {u.meta.get("delegation_tag") for u in node.users}
        if len(tags) == 1 and None not in tags:
            node.meta["delegation_tag"] = tags.pop()


_GRAPH_TOOLS = ("format_delegated_graph", "get_delegated_payload", "get_delegates", "get_non_lowered_nodes",
                "is_identical_graph", "print_delegated_graph")


def __getattr__(name: str):
    # Graph inspection ships with the full wheel only (tools/packaging/components.py).
    if name in _GRAPH_TOOLS:
        from executorch.exir.backend import _graph_tools

        return getattr(_graph_tools, name)
    raise AttributeError(f"module 'executorch.exir.backend.utils' has no attribute {name!r}")
