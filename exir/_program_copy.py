"""Copies of an ExportedProgram over a new graph (or a copy of its own), sharing the tensors; the
lowering steps edit such copies so the program they were given stays as it was."""

from __future__ import annotations

import copy
from typing import Optional

from torch import fx
from torch.export import ExportedProgram


def _copy_program(ep: ExportedProgram, gm: Optional[fx.GraphModule] = None, verifier=None) -> ExportedProgram:
    """A new ExportedProgram over a copy of the graph (or over `gm`), sharing the tensors."""
    signature = copy.deepcopy(ep.graph_signature)
    if gm is None:
        graph = fx.Graph()
        env: dict[fx.Node, fx.Node] = {}
        out = graph.graph_copy(ep.graph_module.graph, env)
        graph.output(out)
        gm = fx.GraphModule(ep.graph_module, graph)
        # The copy may rename nodes whose names shadow Python builtins (`input`).
        renamed = {old.name: new.name for old, new in env.items() if old.name != new.name}
        for spec in signature.input_specs:
            if getattr(spec.arg, "name", None) in renamed:
                spec.arg.name = renamed[spec.arg.name]
    else:
        _sync_signature_outputs(gm.graph, signature)  # a rebuilt graph (ExportPass) may name its outputs anew
    return ExportedProgram(
        root=gm,
        graph=gm.graph,
        graph_signature=signature,
        state_dict=ep.state_dict,
        range_constraints=ep.range_constraints,
        module_call_graph=ep.module_call_graph,
        example_inputs=ep.example_inputs,
        constants=ep.constants,
        verifiers=[verifier or ep.verifier],
    )


def _sync_output_names(ep: ExportedProgram) -> None:
    _sync_signature_outputs(ep.graph, ep.graph_signature)


def _sync_signature_outputs(graph: fx.Graph, signature) -> None:
    # Rewrites replace nodes; the signature must name the nodes the graph now returns.
    out_node = next(n for n in reversed(graph.nodes) if n.op == "output")
    for spec, arg in zip(signature.output_specs, out_node.args[0]):
        if isinstance(arg, fx.Node) and hasattr(spec.arg, "name"):
            spec.arg.name = arg.name
