"""Mutated buffers and inputs: an in-place `copy_` at the end of the graph writes each new value back."""

from __future__ import annotations

import torch
from torch import fx
from torch.export.graph_signature import InputKind, OutputKind

from executorch.exir.dialects._edge_ops import writes_first_argument

MUTATIONS = (OutputKind.BUFFER_MUTATION, OutputKind.USER_INPUT_MUTATION)


def _placeholder_of(signature) -> dict[str, str]:
    """A mutation's target (buffer name, or user input name) -> its placeholder's name."""
    found = {}
    for spec in signature.input_specs:
        name = getattr(spec.arg, "name", None)
        if spec.kind == InputKind.BUFFER:
            found[spec.target] = name
        elif spec.kind == InputKind.USER_INPUT and name is not None:
            found[name] = name
    return found


def mutated_placeholders(signature) -> dict[str, str]:
    """Placeholder name -> the buffer (or user input) the program mutates through it."""
    placeholder = _placeholder_of(signature)
    return {placeholder[spec.target]: spec.target for spec in signature.output_specs
            if spec.kind in MUTATIONS and spec.target in placeholder}


def insert_write_back(gm: fx.GraphModule, signature) -> None:
    """Before the output, `aten.copy_(placeholder, new_value)` for each mutation the signature
    lists; the signature's mutation outputs then name the copies (which return the placeholder).

    A value the graph already computes in place into its placeholder needs no copy."""
    placeholders = {n.name: n for n in gm.graph.nodes if n.op == "placeholder"}
    targets = _placeholder_of(signature)
    output = gm.graph.output_node()
    results = list(output.args[0])
    for i, spec in enumerate(signature.output_specs):
        if spec.kind not in MUTATIONS:
            continue
        value = results[i]
        dest = placeholders.get(targets.get(spec.target, ""))
        if dest is None:
            raise ValueError(f"the program mutates {spec.target!r} but has no placeholder for it")
        if value is dest:
            continue
        if isinstance(value, fx.Node) and value.args and value.args[0] is dest and writes_first_argument(value.target):
            # an in-place op (reinplace_pass) wrote the placeholder: it is the mutation's output
            results[i] = dest
            spec.arg.name = dest.name
            continue
        with gm.graph.inserting_before(output):
            copy = gm.graph.call_function(torch.ops.aten.copy_.default, (dest, value))
        copy.meta["val"] = dest.meta.get("val")
        copy.meta["stack_trace"] = value.meta.get("stack_trace") if isinstance(value, fx.Node) else None
        results[i] = copy
        spec.arg.name = copy.name
    output.args = (tuple(results),)
    gm.recompile()
