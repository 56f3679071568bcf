"""Small helpers for editing FX graphs while keeping each node's fake-tensor metadata exact."""

from __future__ import annotations

import copy
import operator
from typing import Any, Callable, Optional

import torch
from torch import fx
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind


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
        node.meta.setdefault("from_node", made_from(like))
    if target is operator.getitem:
        node.meta["val"] = val(args[0])[args[1]]
    else:
        with fake_mode:
            node.meta["val"] = target(*val(args), **val(kwargs))
    return node


def made_from(node: fx.Node) -> list:
    """The `from_node` of a node that replaces `node`, as torch's decomposer records it: the pieces of one
    decomposition share their origin, and so their debug handle."""
    from torch.fx.traceback import NodeSource, NodeSourceAction

    return [NodeSource(node, "decompose", NodeSourceAction.CREATE)]


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


def order_inputs_as_decomposed(ep: ExportedProgram) -> None:
    """Put the program's inputs in the order torch's `run_decompositions` gives them, in place: the
    parameters as the unlifted module's `named_parameters()` lists them, then buffers and lifted
    constants as its `named_buffers()` does, then the rest as they were. Each module lists its own
    attributes before its children's, each in the order it first met them; a constant is an attribute
    of the root. A strict export lists parameters in the order the code first uses them, so without this a
    program's constants (and the partitions a backend receives) would be ordered otherwise than
    ExecuTorch's `to_edge` orders them."""
    specs = list(ep.graph_signature.input_specs)
    # The module tree, built from the names as the unlifted module assigns them: parameters, buffers,
    # then constants, each creating the submodules its name passes through.
    tree: dict = {"own": [], "children": {}}
    for spec in [s for kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)
                 for s in specs if s.kind == kind]:
        node = tree
        *path, _ = spec.target.split(".")
        for part in path:
            node = node["children"].setdefault(part, {"own": [], "children": {}})
        node["own"].append(spec)

    def walk(node: dict, keep) -> list:
        out = [s for s in node["own"] if keep(s)]
        for child in node["children"].values():
            out += walk(child, keep)
        return out

    ordered = walk(tree, lambda s: s.kind == InputKind.PARAMETER) + walk(tree, lambda s: s.kind != InputKind.PARAMETER)
    placed = {id(s) for s in ordered}
    ordered += [s for s in specs if id(s) not in placed]
    if ordered == specs:
        return
    by_name = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    stop = next(n for n in ep.graph.nodes if n.op != "placeholder")
    for spec in ordered:
        stop.prepend(by_name[spec.arg.name])
    ep.graph_signature.input_specs[:] = ordered
