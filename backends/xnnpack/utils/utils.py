"""Graph queries the partitioner and preprocess share: which placeholders are constants, and their tensors."""

from __future__ import annotations

from typing import Optional

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind

_CONSTANT_KINDS = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)


def constant_targets(ep: ExportedProgram) -> dict[str, str]:
    """Placeholder name -> state_dict/constants key of every constant input (mutated buffers are
    state, not constants); built once per signature."""
    sig = ep.graph_signature
    cached = getattr(sig, "_xnn_constant_targets", None)
    if cached is not None and cached[0] == len(sig.input_specs):
        return cached[1]
    mutated = set(getattr(sig, "buffers_to_mutate", {}).values())
    out = {s.arg.name: s.target for s in sig.input_specs
           if s.kind in _CONSTANT_KINDS and hasattr(s.arg, "name") and s.target not in mutated}
    try:
        sig._xnn_constant_targets = (len(sig.input_specs), out)
    except AttributeError:
        pass
    return out


def _constant_target(ep: ExportedProgram, node: torch.fx.Node) -> Optional[str]:
    return constant_targets(ep).get(node.name) if node.op == "placeholder" else None


def is_param_node(ep: ExportedProgram, node: torch.fx.Node) -> bool:
    """A placeholder holding a parameter, an unmutated buffer or a lifted constant tensor."""
    return _constant_target(ep, node) is not None


def get_param_tensor(ep: ExportedProgram, node: torch.fx.Node) -> Optional[torch.Tensor]:
    """The tensor behind a constant placeholder (None for anything else)."""
    target = _constant_target(ep, node)
    if target is None:
        return None
    if target in ep.state_dict:
        return ep.state_dict[target]
    return ep.constants.get(target)
