"""Export passes of ExecuTorch's LLM flow: `RemoveRedundantTransposes` drops transpose/permute chains that cancel."""

from __future__ import annotations

from typing import Optional

import torch
from torch import fx

from executorch.exir.dialects.edge._ops import aten_op
from executorch.exir.pass_base import ExportPass, PassResult

_aten = torch.ops.aten
# Layout ops as torch.export leaves them and as the edge dialect copies them.
_TRANSPOSES = (_aten.transpose.int, _aten.transpose_copy.int)
_PERMUTES = (_aten.permute.default, _aten.permute_copy.default)


def _rank(node: fx.Node) -> Optional[int]:
    value = node.meta.get("val")
    return value.dim() if isinstance(value, torch.Tensor) else None


def _permutation(node: fx.Node) -> Optional[list[int]]:
    """The dim order `node` produces from its input (output dim i is input dim perm[i]), or None."""
    if node.op != "call_function" or aten_op(node.target) not in _TRANSPOSES + _PERMUTES:
        return None
    source = node.args[0]
    rank = _rank(source) if isinstance(source, fx.Node) else None
    if rank is None:
        return None
    if aten_op(node.target) in _PERMUTES:
        return [d % rank for d in node.args[1]] if rank else []
    perm = list(range(rank))
    if rank:
        a, b = node.args[1] % rank, node.args[2] % rank
        perm[a], perm[b] = perm[b], perm[a]
    return perm


class RemoveRedundantTransposes(ExportPass):
    """Replaces the result of a chain of transposes/permutes whose composition is the identity by the
    chain's input (for example `x.transpose(1, 2).transpose(1, 2)`, or a permute undone by another);
    the chain's inner nodes stay while something else uses them. Works on graphs from
    `torch.export` (`aten.transpose`/`aten.permute`) and on edge graphs (their `_copy` forms)."""

    def call(self, graph_module: fx.GraphModule) -> PassResult:
        changed = False
        for node in list(graph_module.graph.nodes):
            perm = _permutation(node)
            if perm is None:
                continue
            source = node.args[0]
            while (inner := _permutation(source)) is not None:
                perm = [inner[d] for d in perm]
                source = source.args[0]
                if perm == sorted(perm):
                    node.replace_all_uses_with(source)
                    changed = True
                    break
        if changed:
            graph_module.graph.eliminate_dead_code()
            graph_module.recompile()
        return PassResult(graph_module, changed)
