"""Operators that give back their input (a slice over a whole dimension, dropout at inference) and the
dequantize -> quantize pairs they leave, in ATen and edge graphs. `to_edge` drops them, as ExecuTorch's
does; names as its `exir.passes.remove_noop_pass`, whose helpers vendor transforms import."""

from __future__ import annotations

import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (defines the quantized_decomposed ops)
from torch import fx

from executorch.exir.dialects._ops import ops as exir_ops
from executorch.exir.dialects.edge._ops import aten_op
from executorch.exir.pass_base import ExportPass, PassResult

__all__ = ["_DEQUANT_OPS", "_QUANT_OPS", "eliminate_dq_q", "remove_noops", "RemoveNoopPass"]

_aten = torch.ops.aten
_PASS_THROUGH = (_aten.to.dtype, _aten.dropout.default, _aten.slice_copy.Tensor)

_qd = torch.ops.quantized_decomposed
_DEQUANT_OPS: tuple = (_qd.dequantize_per_tensor.default, _qd.dequantize_per_channel.default,
                       exir_ops.edge.quantized_decomposed.dequantize_per_tensor.default,
                       exir_ops.edge.quantized_decomposed.dequantize_per_channel.default)
_QUANT_OPS: tuple = (_qd.quantize_per_tensor.default, _qd.quantize_per_channel.default,
                     exir_ops.edge.quantized_decomposed.quantize_per_tensor.default,
                     exir_ops.edge.quantized_decomposed.quantize_per_channel.default)


def eliminate_dq_q(graph_module: fx.GraphModule, dequant_nodes: list) -> None:
    """For each dequantize node, a quantize user with the same parameters gives back the dequantize's
    input: its users read that input instead (the nodes left without users are the caller's to drop)."""
    for dq in dequant_nodes:
        if dq.target not in _DEQUANT_OPS:
            raise ValueError(f"node '{dq.name}' ({dq.target}) is not a dequantize")
        for user in list(dq.users):
            if user.target in _QUANT_OPS and list(user.args[1:]) == list(dq.args[1:]):
                user.replace_all_uses_with(dq.args[0])


def _gives_back_its_input(node: fx.Node) -> bool:
    src, out = node.args[0].meta.get("val"), node.meta.get("val")
    if src is None or out is None:
        return False
    if src is out:  # an alias the tracer recorded as the input itself
        return True
    if aten_op(node.target) is not _aten.slice_copy.Tensor:
        return False
    static = all(isinstance(d, int) for d in (*src.shape, *out.shape))
    return static and src.shape == out.shape


def remove_noops(graph_module: fx.GraphModule) -> bool:
    """Drop every operator that gives back its input, and the dequantize -> quantize pair around it in
    a quantized graph (the quantize's users then read the int8 value itself). True if anything went."""
    dequant_nodes = []
    changed = False
    for node in list(graph_module.graph.nodes):
        if node.op != "call_function" or aten_op(node.target) not in _PASS_THROUGH:
            continue
        if not _gives_back_its_input(node):
            continue
        if node.args[0].target in _DEQUANT_OPS:
            dequant_nodes.append(node.args[0])
        node.replace_all_uses_with(node.args[0])
        changed = True
    if changed:
        graph_module.graph.eliminate_dead_code()
        eliminate_dq_q(graph_module, dequant_nodes)
        graph_module.graph.eliminate_dead_code()
    return changed


class RemoveNoopPass(ExportPass):
    """`remove_noops` as a pass (vendor pipelines run it by this name)."""

    def call(self, graph_module: fx.GraphModule) -> PassResult:
        changed = remove_noops(graph_module)
        if changed:
            graph_module.recompile()
        return PassResult(graph_module, changed)
