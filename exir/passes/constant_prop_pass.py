"""`constant_prop_pass`: operator calls whose inputs are all constants are run at export and become constants."""

from __future__ import annotations

import logging
from typing import Any, Iterable, Optional

import torch
from torch import fx
from torch._export.utils import (get_buffer, get_lifted_tensor_constant, get_param, is_lifted_tensor_constant,
                                 is_param)
from torch._guards import detect_fake_mode
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, InputSpec, TensorArgument
from torch.utils import _pytree as pytree

from executorch.exir.dialects.edge._ops import aten_op
from executorch.exir import memory

# The name prefix of the constants this pass makes (`_prop_tensor_constant0`, ...), as ExecuTorch names them.
PREFIX = "_prop_tensor_constant"

# Argument values that are constant by nature; a graph node is constant only when the pass has its value.
_LITERALS = (bool, int, float, str, torch.Tensor, torch.device, torch.dtype, torch.layout)


def get_default_skip_targets_no_quant() -> set:
    """Ops never folded: `full` (folding it would store a possibly large filled tensor in the file)."""
    return {torch.ops.aten.full.default}


def _quant_primitives() -> set:
    # Folded, a dequantize of a quantized weight would store it in float: these stay runtime calls.
    found = set()
    wanted = [("quantized_decomposed", name, overload) for name, overload in (
        ("dequantize_per_channel", "default"), ("dequantize_per_tensor", "default"),
        ("dequantize_per_tensor", "tensor"), ("quantize_per_tensor", "default"), ("quantize_per_tensor", "tensor"),
        ("quantize_per_channel", "default"), ("choose_qparams", "tensor"), ("convert_element_type", "no_fuse"))]
    wanted += [("torchao", name, "default")
               for name in ("dequantize_affine", "quantize_affine", "choose_qparams_affine")]
    for namespace, name, overload in wanted:
        try:
            found.add(getattr(getattr(getattr(torch.ops, namespace), name), overload))
        except (AttributeError, RuntimeError):
            pass  # the library defining it (torch's pt2e ops, torchao) is not loaded: no graph can hold it
    return found


def default_skip_targets() -> set:
    """What `constant_prop_pass` leaves alone unless told otherwise: `full` and the quantization primitives."""
    return get_default_skip_targets_no_quant() | _quant_primitives()


def _constant_buffer(ep: ExportedProgram, node: fx.Node) -> bool:
    sig = ep.graph_signature
    fqn = sig.inputs_to_buffers.get(node.target)
    return fqn is not None and fqn not in sig.buffers_to_mutate.values()


def constant_placeholders(ep: ExportedProgram) -> dict[fx.Node, torch.Tensor]:
    """Placeholder -> tensor for parameters, buffers the program never writes, and lifted tensor constants."""
    found: dict[fx.Node, torch.Tensor] = {}
    for node in ep.graph.find_nodes(op="placeholder"):
        if is_param(ep, node):
            found[node] = get_param(ep, node)
        elif _constant_buffer(ep, node):
            found[node] = get_buffer(ep, node)
        elif is_lifted_tensor_constant(ep, node):
            found[node] = get_lifted_tensor_constant(ep, node)
    return found


def _is_constant(arg: Any, known: dict) -> bool:
    if isinstance(arg, (list, tuple)):
        return all(_is_constant(a, known) for a in arg)
    if isinstance(arg, dict):
        return all(_is_constant(a, known) for a in arg.values())
    if arg is None or isinstance(arg, _LITERALS):
        return True
    return isinstance(arg, fx.Node) and arg in known


def _value(arg: Any, known: dict) -> Any:
    return known[arg] if isinstance(arg, fx.Node) else arg


def folded_values(ep: ExportedProgram, skip: Optional[Iterable] = None) -> dict[fx.Node, Any]:
    """Every node whose value is known at export (constant placeholders included), with that value,
    in graph order. Calls of `skip` targets, allocations and impure ops (random draws, mutation) are
    not run: they stay runtime calls."""
    skip = default_skip_targets() if skip is None else set(skip)
    known: dict[fx.Node, Any] = dict(constant_placeholders(ep))
    for node in ep.graph.nodes:
        if (node.op != "call_function" or node.target is memory.alloc or node.target in skip
                or aten_op(node.target) in skip or node.is_impure()):
            continue
        if not (_is_constant(node.args, known) and _is_constant(node.kwargs, known)):
            continue
        args, kwargs = pytree.tree_map_only(fx.Node, lambda a: _value(a, known), (node.args, node.kwargs))
        with torch.no_grad():
            value = node.target(*args, **kwargs)
        if isinstance(value, torch.Tensor) and 0 in value.stride():
            value = value.contiguous()  # an expanded (zero-stride) result has no layout a .pte can hold
        known[node] = value
    _keep_computed_scalars(known)
    return known


def _keep_computed_scalars(known: dict) -> None:
    # Only tensors can become constants of the file: a folded non-tensor (a tuple, a number) that a
    # runtime node reads stays a runtime call, and so its inputs are needed at run time too.
    changed = True
    while changed:
        changed = False
        for node, value in list(known.items()):
            if (node.op != "placeholder" and not isinstance(value, torch.Tensor)
                    and any(user not in known for user in node.users)):
                del known[node]
                changed = True


def _new_name(ep: ExportedProgram) -> str:
    name = f"{PREFIX}{len(ep.constants)}"
    if name not in ep.constants:
        return name
    taken = [int(k[len(PREFIX):]) for k in ep.constants if k.startswith(PREFIX) and k[len(PREFIX):].isdigit()]
    return f"{PREFIX}{max(taken, default=-1) + 1}"


def _fake_mode(ep: ExportedProgram):
    mode = detect_fake_mode(tuple(n.meta.get("val") for n in ep.graph.find_nodes(op="placeholder")))
    if mode is None:
        from torch._subclasses.fake_tensor import FakeTensorMode

        mode = FakeTensorMode()
    return mode


def _drop_constant(ep: ExportedProgram, node: fx.Node) -> None:
    sig = ep.graph_signature
    if node.name in sig.inputs_to_parameters:
        ep.state_dict.pop(sig.inputs_to_parameters[node.name], None)
    elif node.name in sig.inputs_to_lifted_tensor_constants:
        ep.constants.pop(sig.inputs_to_lifted_tensor_constants[node.name], None)
    elif node.name in sig.inputs_to_buffers:
        fqn = sig.inputs_to_buffers[node.name]
        ep.constants.pop(fqn, None)
        ep.state_dict.pop(fqn, None)
    ep.graph.erase_node(node)


def _materialize(ep: ExportedProgram, known: dict) -> dict[str, InputSpec]:
    """Replaces each folded node that a runtime node still reads with a new constant placeholder, and
    erases constants only folded nodes read. Returns the new placeholders' input specs by name."""
    specs: dict[str, InputSpec] = {}
    mode = _fake_mode(ep)
    first_input = next((n for n in ep.graph.find_nodes(op="placeholder")
                        if n.name in ep.graph_signature.user_inputs), None)
    for node, value in reversed(list(known.items())):  # users first, so a node's users are settled
        if all(user in known for user in node.users):
            _drop_constant(ep, node)
            continue
        if node.op == "placeholder":
            continue
        placeholder, spec = _placeholder(ep, value, mode, first_input, node.meta)
        node.replace_all_uses_with(placeholder)
        ep.graph.erase_node(node)
        specs[placeholder.name] = spec
    return specs


def _placeholder(ep: ExportedProgram, value: torch.Tensor, mode, before: Optional[fx.Node],
                 meta: Optional[dict] = None) -> tuple[fx.Node, InputSpec]:
    # A new lifted constant holding `value`, its placeholder inserted before `before`; the caller
    # places its input spec (the signature lists placeholders in graph order).
    fqn = _new_name(ep)
    ep.constants[fqn] = value
    with ep.graph.inserting_before(before):
        placeholder = ep.graph.placeholder(fqn)
    placeholder.meta.update(meta or {})
    placeholder.meta["val"] = mode.from_tensor(value, static_shapes=True)
    placeholder.meta["val"].constant = value
    return placeholder, InputSpec(kind=InputKind.CONSTANT_TENSOR, arg=TensorArgument(name=placeholder.name),
                                  target=fqn, persistent=True)


def add_constants(ep: ExportedProgram, values: list[torch.Tensor]) -> list[fx.Node]:
    """New lifted constants (named `_prop_tensor_constantN`) holding `values`, with their placeholders
    and input specs; returns the placeholders, for the caller to wire in."""
    mode = _fake_mode(ep)
    first_input = next((n for n in ep.graph.find_nodes(op="placeholder")
                        if n.name in ep.graph_signature.user_inputs), None)
    made = [_placeholder(ep, value, mode, first_input) for value in values]
    specs = {s.arg.name: s for s in ep.graph_signature.input_specs}
    specs.update({node.name: spec for node, spec in made})
    ep.graph_signature.input_specs = [specs[n.name] for n in ep.graph.find_nodes(op="placeholder")]
    return [node for node, _ in made]


def _copy_constant_outputs(ep: ExportedProgram, skip_dim_order: bool) -> None:
    # An output must be a value the method computes: a constant returned as is gets a clone.
    constants = constant_placeholders(ep)
    output = ep.graph.output_node()
    outs = list(output.args[0])
    specs = ep.graph_signature.output_specs
    clone = (torch.ops.aten.clone.default if skip_dim_order
             else torch.ops.dim_order_ops._clone_dim_order.default)
    for i, node in enumerate(outs):
        if node not in constants:
            continue
        with ep.graph.inserting_after(node):
            copy = ep.graph.call_function(clone, (node,))
        copy.meta["val"] = node.meta["val"]
        outs[i] = copy
        specs[i].arg = TensorArgument(name=copy.name)
    output.args = (outs,)


def constant_prop_pass(exported_program: ExportedProgram, custom_skip_targets: Optional[set] = None,
                       _skip_dim_order: bool = True) -> ExportedProgram:
    """Folds every subgraph of the top-level graph whose inputs are all constants (parameters, buffers
    never written, lifted tensor constants) into one new lifted constant per value the rest of the
    graph reads, named `_prop_tensor_constantN`; constants only folded ops read are dropped. User
    inputs, written buffers, delegate calls and control-flow bodies are left alone. Edits
    `exported_program` in place and returns it."""
    ep = exported_program
    if not ep.graph.find_nodes(op="placeholder"):
        return ep
    if any(n.target is torch.ops.higher_order.cond for n in ep.graph.nodes):
        logging.warning("constant_prop_pass does not fold constants inside torch.cond branches")
    known = folded_values(ep, custom_skip_targets)
    specs = {s.arg.name: s for s in ep.graph_signature.input_specs}
    specs.update(_materialize(ep, known))
    ep.graph_signature.input_specs = [specs[n.name] for n in ep.graph.find_nodes(op="placeholder")]
    _copy_constant_outputs(ep, _skip_dim_order)
    ep.graph.eliminate_dead_code()
    ep.graph_module.recompile()
    return ep
