"""`quant_fusion_and_const_prop_pass`: reference-quantized patterns become ops on quantized values,
then constants fold."""

from __future__ import annotations

from typing import Any, Callable, Optional

import torch
from torch import fx
from torch.export import ExportedProgram
from torch.utils import _pytree as pytree

from executorch.exir.dialects.edge._ops import aten_op
from executorch.exir.pass_base import PassResult
from executorch.exir.passes.constant_prop_pass import add_constants, constant_placeholders, constant_prop_pass


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


# torchao's integer range per embedding width: (quant_min, quant_max) -> bits per value.
_EMBEDDING_WIDTHS = {(-128, 127): 8, (-8, 7): 4, (-2, 1): 2}


def _dequantize_affine():
    torchao = getattr(torch.ops, "torchao", None)
    packet = getattr(torchao, "dequantize_affine", None) if torchao is not None else None
    return None if packet is None else packet.default


def _affine_args(dq: fx.Node) -> dict:
    return dict(zip(("input", "block_size", "scale", "zero_point", "input_dtype", "quant_min", "quant_max",
                     "output_dtype"), dq.args), **dq.kwargs)


def embedding_width(dq: fx.Node) -> Optional[int]:
    """The bits per value (8, 4 or 2) a torchao `dequantize_affine` of int8 values would be packed to as an
    embedding table, by its range; None for any other range or input dtype (not fusable)."""
    args = _affine_args(dq)
    if args.get("input_dtype") != torch.int8:
        return None
    return _EMBEDDING_WIDTHS.get((args.get("quant_min"), args.get("quant_max")))


def pack_embedding_weight(values: torch.Tensor, bits: int) -> torch.Tensor:
    """Signed `bits`-bit integers [rows, cols] (int8) as ExecuTorch's quantized embeddings store them:
    each offset by 2**(bits-1) to be unsigned, `8 // bits` to a byte in row order, the first value in the
    high nibble for 4 bits and in the low bits for 2 (uint8 [rows, cols * bits // 8])."""
    if bits == 8:
        return values.contiguous()
    per_byte = 8 // bits
    if values.size(1) % per_byte:
        raise ValueError(f"pack_embedding_weight: {values.size(1)} columns do not fill whole bytes of {per_byte} "
                         f"{bits}-bit values")
    unsigned = (values.to(torch.int16) + (1 << (bits - 1))).to(torch.uint8).view(values.size(0), -1, per_byte)
    shifts = (4, 0) if bits == 4 else (0, 2, 4, 6)
    packed = torch.zeros(unsigned.shape[:2], dtype=torch.uint8)
    for i, shift in enumerate(shifts):
        packed |= unsigned[..., i] << shift
    return packed


def fuse_quantized_embeddings(program: ExportedProgram) -> int:
    """`torchao.dequantize_affine` of a constant int8 table (one scale per row or per group of columns:
    block size [1, group]) feeding `embedding` as its weight becomes `quantized_decomposed.embedding_byte`,
    `embedding_4bit` or `embedding_2bit` (by the range, [-128, 127], [-8, 7] or [-2, 1]) of the packed
    table, so the file holds the narrow integers and the lookup dequantizes only the rows it reads. A zero
    point that is all zeros is dropped. Edits `program` in place; returns the count."""
    dequantize = _dequantize_affine()
    if dequantize is None:
        return 0
    import executorch.exir.dialects._quantized_ops  # noqa: F401  (defines the embedding ops)

    gm, constants, fused = program.graph_module, constant_placeholders(program), 0
    made: dict = {}  # (table, scale, zero point, bits) -> the new constants: a table looked up twice is stored once
    for emb in list(gm.graph.nodes):
        if not _call(emb, torch.ops.aten.embedding.default) or not _call(emb.args[0], dequantize):
            continue
        dq = emb.args[0]
        args = _affine_args(dq)
        table, scale, zero = args["input"], args["scale"], args.get("zero_point")
        bits = embedding_width(dq)
        if (bits is None or table not in constants or scale not in constants
                or (zero is not None and zero not in constants)):
            continue
        values, scales = constants[table], constants[scale]
        block = list(args["block_size"])
        if (values.dim() != 2 or values.dtype != torch.int8 or len(block) != 2 or block[0] != 1
                or values.size(1) % block[1] or scales.dim() not in (1, 2) or scales.size(0) != values.size(0)
                or scales.numel() != values.numel() // block[1] or values.size(1) * bits % 8):
            continue
        scales = scales.reshape(values.size(0), -1)
        zeros = None if zero is None or not constants[zero].any() else \
            constants[zero].reshape(scales.shape).to(scales.dtype)
        out_dtype = args.get("output_dtype", torch.float32)
        key = (table, scale, zero, bits)
        if key not in made:
            made[key] = add_constants(program, [pack_embedding_weight(values, bits), scales]
                                      + ([] if zeros is None else [zeros]))
        new = made[key]
        name = {8: "embedding_byte", 4: "embedding_4bit", 2: "embedding_2bit"}[bits]
        packet = getattr(torch.ops.quantized_decomposed, name)
        call_args = (new[0], new[1], new[2] if zeros is not None else None, args["quant_min"], args["quant_max"],
                     emb.args[1])
        with gm.graph.inserting_before(emb):
            if out_dtype == scales.dtype:
                lookup = gm.graph.call_function(packet.default, call_args)
            else:
                lookup = gm.graph.call_function(packet.dtype, call_args, {"dtype": out_dtype})
        lookup.meta.update(emb.meta)
        _refresh_val(lookup)
        emb.replace_all_uses_with(lookup)
        gm.graph.erase_node(emb)
        fused += 1
    if fused:
        gm.graph.eliminate_dead_code()
        gm.recompile()
    return fused


def quant_fusion_and_const_prop_pass(program: ExportedProgram) -> ExportedProgram:
    """The quantized patterns of `FUSIONS` fused, quantized embedding tables packed
    (`fuse_quantized_embeddings`), then `constant_prop_pass`: what
    `ExecutorchBackendConfig(do_quant_fusion_and_const_prop=True)` runs on each method. Edits
    `program` in place and returns it."""
    QuantFusionPass()(program.graph_module)
    fuse_quantized_embeddings(program)
    return constant_prop_pass(program)
