"""A program's signature and range constraints brought up to date with a rewritten graph module (names
as ExecuTorch's `exir._program_utils`, which vendor pass managers call after their passes)."""

from __future__ import annotations

import torch
from torch import fx
from torch.export.graph_signature import ConstantArgument, ExportGraphSignature, InputSpec, OutputSpec

__all__ = ["_get_updated_graph_signature", "_get_updated_range_constraints"]


def _renamed(arg, node):
    return arg if isinstance(arg, ConstantArgument) or not isinstance(node, fx.Node) else type(arg)(name=node.name)


def _get_updated_graph_signature(old_signature: ExportGraphSignature, new_gm: fx.GraphModule) -> ExportGraphSignature:
    """`old_signature` naming `new_gm`'s placeholders and outputs, which a pass may have renamed; the
    kinds, targets and counts stay (a pass that adds or drops an input or output must say so itself)."""
    placeholders = [n for n in new_gm.graph.nodes if n.op == "placeholder"]
    outputs = list(new_gm.graph.output_node().args[0])
    if len(placeholders) != len(old_signature.input_specs) or len(outputs) != len(old_signature.output_specs):
        raise ValueError(
            f"the graph has {len(placeholders)} inputs and {len(outputs)} outputs where its signature names "
            f"{len(old_signature.input_specs)} and {len(old_signature.output_specs)}; a pass that adds or removes "
            "an input or output must update the signature itself")
    inputs = [InputSpec(spec.kind, _renamed(spec.arg, node), spec.target, persistent=spec.persistent)
              for spec, node in zip(old_signature.input_specs, placeholders)]
    outs = [OutputSpec(spec.kind, _renamed(spec.arg, node), spec.target)
            for spec, node in zip(old_signature.output_specs, outputs)]
    return ExportGraphSignature(input_specs=inputs, output_specs=outs)


def _get_updated_range_constraints(gm: fx.GraphModule) -> dict:
    """The value ranges of the symbols `gm`'s example values use, from their shape environment."""
    from torch._guards import detect_fake_mode

    values = [n.meta["val"] for n in gm.graph.nodes if n.meta.get("val") is not None]
    fake = detect_fake_mode(values)
    env = fake.shape_env if fake is not None else next(
        (v.node.shape_env for v in values if isinstance(v, torch.SymInt)), None)
    if env is None:
        return {}
    ranges = {env.replacements.get(k, k): v for k, v in env.var_to_range.items()}
    ranges.update({k: v for k, v in env.var_to_range.items() if k not in env.replacements})
    return ranges
