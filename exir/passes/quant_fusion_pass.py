"""`quant_fusion_and_const_prop_pass`: reference-quantized patterns become ops on quantized values,
then constants fold."""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch import fx
from torch.export import ExportedProgram
from torch.utils import _pytree as pytree

from executorch.exir.dialects.edge._ops import aten_op
from executorch.exir.pass_base import PassResult
from executorch.exir.passes.constant_prop_pass import constant_prop_pass


def _q():
    import torch.ao.quantization.fx._decomposed  # noqa: F401  (defines the quantized_decomposed ops)

    return torch.ops.quantized_decomposed.quantize_per_tensor.default


def _dq():
    import torch.ao.quantization.fx._decomposed  # noqa: F401  (defines the quantized_decomposed ops)

    return torch.ops.quantized_decomposed.dequantize_per_tensor.default


def _call(node: Any, target) -> bool:
    return isinstance(node, fx.Node) and node.op == "call_function" and aten_op(node.target) is target


def _qparams(node: fx.Node) -> tuple:
    # (scale, zero_point, quant_min, quant_max, dtype): what maps a float to its integer and back.
    return tuple(node.args[1:6])


def _refresh_val(node: fx.Node) -> None:
    """Recomputes `node.meta['val']` from its inputs' values (on fake tensors: no data is touched)."""
    args, kwargs = pytree.tree_map_only(fx.Node, lambda n: n.meta["val"], (node.args, node.kwargs))
    node.meta["val"] = node.target(*args, **kwargs)


def fuse_quantized_cat(gm: fx.GraphModule) -> int:
    """`dequantize -> cat -> quantize` where every dequantize and the quantize share one set of
    per-tensor parameters becomes a `cat` of the integer values (exact: concatenation moves values,
    and re-quantizing a dequantized value with its own parameters gives it back). Returns the count."""
    fused = 0
    for q in list(gm.graph.nodes):
        if not _call(q, _q()) or not _call(q.args[0], torch.ops.aten.cat.default):
            continue
        cat = q.args[0]
        parts = cat.args[0]
        if len(cat.users) != 1 or not isinstance(parts, (list, tuple)):
            continue
        if not all(_call(p, _dq()) and _qparams(p) == _qparams(q) for p in parts):
            continue
        cat.args = ([p.args[0] for p in parts], *cat.args[1:])
        _refresh_val(cat)
        q.replace_all_uses_with(cat)
        gm.graph.erase_node(q)
        fused += 1
    return fused


def fuse_quantized_slice(gm: fx.GraphModule) -> int:
    """`dequantize -> slice_copy -> quantize` over uint8 values with one set of per-tensor parameters
    (the pattern ExecuTorch fuses) becomes a `slice_copy` of the integer values. Returns the count."""
    fused = 0
    for q in list(gm.graph.nodes):
        if not _call(q, _q()) or not _call(q.args[0], torch.ops.aten.slice_copy.Tensor):
            continue
        sliced = q.args[0]
        dq = sliced.args[0]
        step = sliced.args[4] if len(sliced.args) > 4 else sliced.kwargs.get("step", 1)
        if (not _call(dq, _dq()) or _qparams(dq) != _qparams(q) or _qparams(q)[4] != torch.uint8 or step != 1
                or len(dq.users) != 1 or len(sliced.users) != 1 or dq.kwargs or q.kwargs):
            continue
        sliced.replace_input_with(dq, dq.args[0])
        _refresh_val(sliced)
        q.replace_all_uses_with(sliced)
        gm.graph.erase_node(q)
        gm.graph.erase_node(dq)
        fused += 1
    return fused


# The fusions, in the order they run; each rewrites the graph in place and returns its count.
FUSIONS: tuple[Callable[[fx.GraphModule], int], ...] = (fuse_quantized_slice, fuse_quantized_cat)


class QuantFusionPass:
    """Rewrites the reference-quantized patterns listed in `FUSIONS` in a graph module; usable in
    `ExecutorchBackendConfig(passes=[QuantFusionPass()])`. Patterns not listed stay quantize and
    dequantize around float kernels."""

    def __init__(self, _fix_node_meta_val: bool = True) -> None:
        # Every node a fusion changes gets its value recomputed: the memory planner sizes from it.
        if _fix_node_meta_val is not True:
            raise ValueError("QuantFusionPass(_fix_node_meta_val=False) is not supported: fused nodes always get "
                             "their meta['val'] recomputed; pass True or leave it out")

    def __call__(self, graph_module: fx.GraphModule) -> PassResult:
        modified = sum(fuse(graph_module) for fuse in FUSIONS) > 0
        if modified:
            graph_module.graph.eliminate_dead_code()
            graph_module.graph.lint()
            graph_module.recompile()
        return PassResult(graph_module, modified)


def quant_fusion_and_const_prop_pass(program: ExportedProgram) -> ExportedProgram:
    """The quantized patterns of `FUSIONS` fused, then `constant_prop_pass`: what
    `ExecutorchBackendConfig(do_quant_fusion_and_const_prop=True)` runs on each method. Edits
    `program` in place and returns it."""
    QuantFusionPass()(program.graph_module)
    return constant_prop_pass(program)
