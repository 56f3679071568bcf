"""Helpers partitioners call: give constants and mutated buffers the tag of their users
(full wheel: look into lowered graphs)."""

from __future__ import annotations

from torch.export import ExportedProgram
from torch.fx.passes.operator_support import OperatorSupportBase
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


class WhyNoPartitionReporter:
    """Collects why a partitioner left nodes out (the first reason given per node) for one report:
    `report_reject(node, reason)` while checking, `get_table_report()` after."""

    def __init__(self) -> None:
        self._rejected: dict = {}

    def report_reject(self, node, reason: str) -> None:
        self._rejected.setdefault(node, reason)

    def wrap_check(self, operator_support, message: str):
        """`operator_support` whose refusals are reported with `message`."""
        return ReportRejected(operator_support, self, message)

    def get_table_report(self) -> str:
        rows = [(n.name, str(getattr(n.target, "_op", n.target)), str(n.meta.get("torch_fn", "-")), reason)
                for n, reason in self._rejected.items() if n.op not in ("placeholder", "output")]
        if not rows:
            return "No nodes rejected."
        header = ("Node name", "Target", "Torch func", "Reason")
        widths = [max(len(r[i]) for r in (header, *rows)) for i in range(4)]
        line = lambda r: " | ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
        return "\n".join([line(header), "-+-".join("-" * w for w in widths), *map(line, rows)])


class ReportRejected(OperatorSupportBase):
    """An operator support check that reports each node it refuses to a WhyNoPartitionReporter."""

    def __init__(self, operator_support, reporter: WhyNoPartitionReporter, message: str) -> None:
        self.operator_support = operator_support
        self.reporter = reporter
        self.message = message

    def is_node_supported(self, submodules, node) -> bool:
        ok = self.operator_support.is_node_supported(submodules, node)
        if not ok:
            self.reporter.report_reject(node, self.message)
        return ok


class DelegateMappingBuilder:
    """Builds a `preprocess`'s `debug_handle_map`: delegate-side identifiers (ints numbered from 0 when
    `generated_identifiers`, else given ones) -> the sorted debug handles of the nodes behind them."""

    def __init__(self, generated_identifiers: bool = False) -> None:
        self._generated_identifiers = generated_identifiers
        self._debug_handle_map: dict = {}

    def get_delegate_mapping(self) -> dict:
        return {k: tuple(sorted(v)) for k, v in self._debug_handle_map.items()}

    def insert_delegate_mapping_entry(self, nodes=None, handles=None, identifier=None):
        """Map `identifier` (generated, or given) to the debug handles of `nodes` (a node or a list) or to
        `handles` (an int or a list; None entries skipped), exactly one of the two; returns the identifier."""
        if self._generated_identifiers == (identifier is not None):
            given = self._generated_identifiers
            raise ValueError(f"identifier {identifier!r}: a builder with generated_identifiers={given} takes "
                             f"{'no' if given else 'an'} identifier")
        if identifier in self._debug_handle_map:
            raise ValueError(f"delegate debug identifier {identifier!r} was already inserted; identifiers are unique")
        if (nodes is None) == (handles is None):
            raise ValueError("insert_delegate_mapping_entry takes nodes or handles, exactly one of them")
        if nodes is not None:
            found = {n.meta.get("debug_handle") for n in (nodes if isinstance(nodes, list) else [nodes])}
        else:
            found = set(handles if isinstance(handles, (list, tuple)) else [handles])
        found.discard(None)
        if not found:
            raise ValueError(f"no debug handle among {nodes if nodes is not None else handles!r}; nothing to map")
        if identifier is None:
            identifier = len(self._debug_handle_map)
        self._debug_handle_map[identifier] = found
        return identifier
