"""Whole-program transforms vendor pass managers call on an ExportedProgram (names as ExecuTorch's
`exir.program._program`): `_transform` runs passes and rebuilds the program around the new graph,
`lift_constant_tensor_pass` turns tensors a pass left as graph attributes into buffer inputs."""

from __future__ import annotations

import copy

import torch
from torch import fx
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, InputSpec, TensorArgument

from executorch.exir._program_utils import _get_updated_graph_signature, _get_updated_range_constraints
from executorch.exir.pass_base import ExportedProgramPassBase


def _update_exported_program_graph_module(ep: ExportedProgram, gm: fx.GraphModule,
                                          override_verifiers=None) -> ExportedProgram:
    """`ep` around the rewritten graph module `gm`: signature names and range constraints from `gm`."""
    new = ExportedProgram(
        root=gm, graph=gm.graph, graph_signature=_get_updated_graph_signature(ep.graph_signature, gm),
        state_dict=ep.state_dict, range_constraints=_get_updated_range_constraints(gm),
        module_call_graph=copy.deepcopy(ep.module_call_graph), example_inputs=ep.example_inputs,
        constants=ep.constants, verifiers=list(override_verifiers or [ep.verifier]))
    new.graph_module.meta.update(ep.graph_module.meta)
    new.graph_module.meta.update(gm.meta)
    return new


def _run_pass(ep: ExportedProgram, p, override_verifiers=None) -> tuple[ExportedProgram, bool]:
    """(the program after pass `p`, whether it changed): a whole-program pass (ExportedProgramPassBase)
    gets the program; a graph-module pass (a PassBase, or a callable returning a PassResult, a GraphModule
    or None for changed in place) gets its graph module, and the program is rebuilt around the result."""
    if isinstance(p, ExportedProgramPassBase):
        result = p(ep)
        return (result.exported_program, True) if result.modified else (ep, False)
    result = p(ep.graph_module)
    gm = getattr(result, "graph_module", result)
    if gm is None:
        gm = ep.graph_module
    if not isinstance(gm, fx.GraphModule):
        raise TypeError(f"pass {getattr(p, '__name__', type(p).__name__)} returned {type(result).__name__}; a "
                        "graph-module pass returns a PassResult, a GraphModule or None")
    if not getattr(result, "modified", True):
        return ep, False
    gm.recompile()
    return _update_exported_program_graph_module(ep, gm, override_verifiers), True


def _transform(self: ExportedProgram, *passes, override_verifiers=None) -> ExportedProgram:
    """The program after `passes`, in order (see `_run_pass`). Returns `self` when no pass changed
    anything; `override_verifiers` replace the program's verifiers."""
    if any(isinstance(p, (list, tuple)) for p in passes):
        raise TypeError("_transform takes passes as separate arguments: _transform(ep, pass1, pass2)")
    ep = self
    for p in passes:
        ep, _ = _run_pass(ep, p, override_verifiers)
    return ep


def lift_constant_tensor_pass(ep: ExportedProgram) -> ExportedProgram:
    """Each tensor the graph reads through `get_attr` becomes a persistent buffer input
    (`_lifted_tensor_constant<N>`), placed before the user inputs; `ep` is changed in place and returned."""
    from torch._guards import detect_fake_mode

    graph = ep.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    if not placeholders:
        return ep
    user_inputs = set(ep.graph_signature.user_inputs)
    first_user = next((n for n in placeholders if n.name in user_inputs), None)
    fake = detect_fake_mode([n.meta.get("val") for n in graph.nodes if n.meta.get("val") is not None])
    taken = len(ep.graph_signature.buffers)
    lifted = []
    for node in list(graph.nodes):
        if node.op != "get_attr":
            continue
        tensor = getattr(ep.graph_module, node.target, None)
        if not isinstance(tensor, torch.Tensor):
            continue
        name = f"_lifted_tensor_constant{taken + len(lifted)}"
        with graph.inserting_before(first_user if first_user is not None else placeholders[-1].next):
            ph = graph.placeholder(name)
        ph.meta.update(node.meta)
        ph.meta["val"] = fake.from_tensor(tensor, static_shapes=True) if fake is not None else tensor
        node.replace_all_uses_with(ph)
        graph.erase_node(node)
        lifted.append(InputSpec(kind=InputKind.BUFFER, arg=TensorArgument(name=ph.name), target=name,
                                persistent=True))
        ep.state_dict[name] = tensor
    if not lifted:
        return ep
    specs = list(ep.graph_signature.input_specs)
    at = next((i for i, s in enumerate(specs) if s.kind == InputKind.USER_INPUT), len(specs))
    ep.graph_signature.input_specs[:] = specs[:at] + lifted + specs[at:]
    ep.graph_module.recompile()
    return ep
