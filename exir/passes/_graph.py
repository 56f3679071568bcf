"""Small helpers for editing FX graphs while keeping each node's fake-tensor metadata exact."""

from __future__ import annotations

import copy
import operator
from typing import Any, Callable, Optional

import torch
from torch import fx
from torch.export import ExportedProgram


def fake_mode_of(graph: fx.Graph):
    """The FakeTensorMode the graph's metadata was produced under."""
    from torch._guards import detect_fake_mode

    vals = [n.meta.get("val") for n in graph.nodes if n.op == "placeholder"]
    return detect_fake_mode([v for v in vals if isinstance(v, torch.Tensor)])


def val(arg: Any) -> Any:
    """The fake value standing for a node argument (recursing into lists and tuples)."""
    if isinstance(arg, fx.Node):
        return arg.meta["val"]
    if isinstance(arg, (list, tuple)):
        return type(arg)(val(a) for a in arg)
    return arg


# The metadata a node passes to the nodes that replace it: where it came from, and the user's own
# ("custom": torch.export keeps it from the traced module, where vendor quantizers mark nodes).
CARRIED_META = ("stack_trace", "nn_module_stack", "source_fn_stack", "from_node", "torch_fn", "custom")


def insert_call(graph: fx.Graph, fake_mode, target: Callable, args: tuple, kwargs: dict | None = None,
                like: fx.Node | None = None) -> fx.Node:
    """Insert `target(*args, **kwargs)` at the graph's insert point, with its fake value computed."""
    kwargs = kwargs or {}
    node = graph.call_function(target, args, kwargs)
    if like is not None:
        for key in CARRIED_META:
            if key in like.meta:
                node.meta[key] = like.meta[key]
    if target is operator.getitem:
        node.meta["val"] = val(args[0])[args[1]]
    else:
        with fake_mode:
            node.meta["val"] = target(*val(args), **val(kwargs))
    return node


def source_line(node: fx.Node) -> str:
    """The user's source line that produced `node`, as `file:line`, or '' when unknown."""
    trace = node.meta.get("stack_trace") or ""
    lines = [ln.strip() for ln in trace.strip().splitlines() if ln.strip().startswith("File ")]
    if not lines:
        return ""
    last = lines[-1]  # innermost frame: "File "x.py", line 12, in forward"
    try:
        path = last.split('"')[1]
        lineno = last.split("line ")[1].split(",")[0]
        return f"{path}:{lineno}"
    except IndexError:
        return last


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


def _copy_program_and_tables(ep: ExportedProgram) -> ExportedProgram:
    """A copy whose graph and tensor tables (state dict, constants) a pass may edit; the tensors are shared."""
    copied = _copy_program(ep)
    return ExportedProgram(root=copied.graph_module, graph=copied.graph, graph_signature=copied.graph_signature,
                           state_dict=dict(ep.state_dict), range_constraints=ep.range_constraints,
                           module_call_graph=ep.module_call_graph, example_inputs=ep.example_inputs,
                           constants=dict(ep.constants), verifiers=[ep.verifier])


def _sync_output_names(ep: ExportedProgram) -> None:
    _sync_signature_outputs(ep.graph, ep.graph_signature)


def _sync_signature_outputs(graph: fx.Graph, signature) -> None:
    # Rewrites replace nodes; the signature must name the nodes the graph now returns.
    out_node = next(n for n in reversed(graph.nodes) if n.op == "output")
    for spec, arg in zip(signature.output_specs, out_node.args[0]):
        if isinstance(arg, fx.Node) and hasattr(spec.arg, "name"):
            spec.arg.name = arg.name
