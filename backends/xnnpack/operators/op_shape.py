"""Data movement and its configs: reshapes, transposes, slices, concatenation, padding and copies."""

from __future__ import annotations

import torch

import executorch.exir.dialects._ops  # noqa: F401  (registers dim_order_ops, named below)
from executorch.backends.xnnpack.operators.node_config import (
    FP32_QS8, arg, claim, one_dynamic_dim, q_pass, static_shapes,
)
from executorch.backends.xnnpack.operators.node_visitor import (
    NCHW, NHWC, PERM_NCHW_TO_NHWC, PERM_NHWC_TO_NCHW, XnnGraphBuilder, new_shape, node_val, register, shape,
    to_layout,
)
from executorch.backends.xnnpack.serialization import xnnpack_graph_schema as xs
from executorch.exir.tensor import shape_upper_bound

aten = torch.ops.aten
_dim_order = torch.ops.dim_order_ops
_CATS = (xs.XNNConcatenate2, xs.XNNConcatenate3, xs.XNNConcatenate4, xs.XNNConcatenate5)


def _layout_for(b: XnnGraphBuilder, nodes, out_node) -> str:
    """NHWC when every 4-D input already is (so a layout-neutral op keeps the chain in NHWC)."""
    ins = [n for n in nodes if isinstance(n, torch.fx.Node) and n not in b.consts]
    if ins and all(b.layout(n) == NHWC for n in ins) and node_val(out_node).dim() == 4:
        return NHWC
    return NCHW


def _dim_in(layout: str, dim: int, rank: int) -> int:
    dim %= rank
    return PERM_NCHW_TO_NHWC.index(dim) if layout == NHWC else dim


SqueezeCopyConfig = claim("SqueezeCopyConfig", aten.squeeze_copy.dims, FP32_QS8, one_dynamic_dim)
UnsqueezeCopyConfig = claim("UnsqueezeCopyConfig", aten.unsqueeze_copy.default, FP32_QS8, one_dynamic_dim)
ViewCopyConfig = claim("ViewCopyConfig", aten.view_copy.default, FP32_QS8, one_dynamic_dim)


@register(aten.view_copy.default, aten.squeeze_copy.dims, aten.squeeze_copy.dim, aten.squeeze_copy.default,
          aten.unsqueeze_copy.default)
def reshape(b: XnnGraphBuilder, node) -> None:
    inp = b.tensor(node.args[0])
    dims = new_shape(node)
    out = b.output(node)
    b.add(xs.XNNStaticReshape(num_dims=len(dims), new_shape=dims, input_id=inp, output_id=out), node)


PermuteConfig = claim("PermuteConfig", aten.permute_copy.default, FP32_QS8)


@register(aten.permute_copy.default)
def permute(b: XnnGraphBuilder, node) -> None:
    x = node.args[0]
    rank = node_val(x).dim()
    perm = [p % rank for p in node.args[1]]
    if b.layout(x) == NHWC and rank == 4:
        # Read the NHWC value directly: NCHW dim j sits at NHWC position PERM_NHWC_TO_NCHW[j].
        perm = [PERM_NHWC_TO_NCHW[p] for p in perm]
        inp = b.tensor(x, NHWC)
    else:
        inp = b.tensor(x)
    out = b.output(node)
    b.add(xs.XNNStaticTranspose(num_dims=rank, perm=perm, input_id=inp, output_id=out), node)


def _slice(node, ep) -> bool:
    return arg(node, 4, "step", 1) == 1 and static_shapes(node)


SliceCopyConfig = claim("SliceCopyConfig", aten.slice_copy.Tensor, FP32_QS8, _slice, qcheck=q_pass(_slice))


@register(aten.slice_copy.Tensor)
def slice_copy(b: XnnGraphBuilder, node) -> None:
    x = node.args[0]
    in_dims = shape(x)
    rank = len(in_dims)
    dim = arg(node, 1, "dim", 0) % rank
    start = arg(node, 2, "start", None) or 0
    if start < 0:
        start += in_dims[dim]
    start = min(max(start, 0), in_dims[dim])
    layout = _layout_for(b, [x], node)
    offsets = [0] * rank
    offsets[dim] = start
    inp = b.tensor(x, layout)
    out = b.output(node, layout)
    sizes = to_layout(shape(node), layout)
    b.add(xs.XNNStaticSlice(num_dims=rank, offsets=to_layout(offsets, layout), sizes=sizes, input_id=inp,
                            output_id=out), node)


SelectCopyConfig = claim("SelectCopyConfig", aten.select_copy.int, FP32_QS8,
                         lambda node, ep: static_shapes(node))


@register(aten.select_copy.int)
def select_copy(b: XnnGraphBuilder, node) -> None:
    """A slice of length 1 along the dim, then a reshape dropping it."""
    x, dim, index = node.args
    in_dims = shape(x)
    dim %= len(in_dims)
    index %= in_dims[dim]
    offsets = [0] * len(in_dims)
    offsets[dim] = index
    sizes = list(in_dims)
    sizes[dim] = 1
    inp = b.tensor(x)
    part = b._define(sizes, *b.value_type(node))
    b.add(xs.XNNStaticSlice(num_dims=len(sizes), offsets=offsets, sizes=sizes, input_id=inp, output_id=part), node)
    dims = shape(node) or [1]
    out = b.output(node)
    b.add(xs.XNNStaticReshape(num_dims=len(dims), new_shape=dims, input_id=part, output_id=out), node)


def _cat(node, ep) -> bool:
    """Two or more inputs whose upper bounds add up to the output's along the axis and equal it elsewhere."""
    out, *parts = [[shape_upper_bound(d) for d in n.meta["val"].shape] for n in [node, *node.args[0]]]
    axis = arg(node, 1, "dim", 0) % len(out)
    return len(parts) > 1 and sum(p.pop(axis) for p in parts) == out.pop(axis) and all(p == out for p in parts)


CatConfig = claim("CatConfig", aten.cat.default, FP32_QS8, _cat, qcheck=q_pass(_cat))


@register(aten.cat.default)
def cat(b: XnnGraphBuilder, node) -> None:
    parts = list(node.args[0])
    rank = node_val(node).dim()
    dim = arg(node, 1, "dim", 0)
    layout = _layout_for(b, parts, node)
    axis = _dim_in(layout, dim, rank)
    ids = [b.tensor(p, layout) for p in parts]
    dims = to_layout(shape(node), layout)
    # More than five inputs: concatenate five at a time into intermediates, the last into the output.
    while True:
        take, ids = ids[:5], ids[5:]
        if not ids:
            out = b.output(node, layout)
        else:
            part_dims = list(dims)
            part_dims[axis] = sum(b.graph.xvalues[i].xvalue_union.dims[axis] for i in take)
            out = b._define(part_dims, *b.value_type(node))
        kind = _CATS[len(take) - 2]
        padded = take + [0] * (5 - len(take))
        b.add(kind(axis=axis, input1_id=padded[0], input2_id=padded[1], input3_id=padded[2], input4_id=padded[3],
                   output_id=out, input5_id=padded[4]), node)
        if not ids:
            return
        ids = [out] + ids


ConstantPadConfig = claim("ConstantPadConfig", aten.constant_pad_nd.default,
                          check=lambda node, ep: all(p >= 0 for p in node.args[1]))


@register(aten.constant_pad_nd.default)
def constant_pad(b: XnnGraphBuilder, node) -> None:
    x = node.args[0]
    rank = node_val(x).dim()
    pads = list(node.args[1])
    value = arg(node, 2, "value", 0.0)
    pre, post = [0] * rank, [0] * rank
    for i in range(len(pads) // 2):
        pre[rank - 1 - i], post[rank - 1 - i] = pads[2 * i], pads[2 * i + 1]
    layout = _layout_for(b, [x], node)
    inp = b.tensor(x, layout)
    out = b.output(node, layout)
    b.add(xs.XNNStaticConstantPad(pre_paddings=to_layout(pre, layout), post_paddings=to_layout(post, layout),
                                  padding_value=float(value), input_id=inp, output_id=out), node)


def _same_layout_copy(node, ep) -> bool:
    """Clones and dim-order copies that neither change dtype nor the contiguous layout."""
    order = node.kwargs.get("dim_order")
    if order is not None and list(order) != list(range(len(order))):
        return False
    return node.kwargs.get("dtype") in (None, node.args[0].meta["val"].dtype)


def _same_shape(node, ep) -> bool:
    """An expand keeping the shape (the same sizes or symbols, never equal by example values): a copy."""
    return str(node.meta["val"].shape) == str(node.args[0].meta["val"].shape)


CloneConfig = claim("CloneConfig", aten.clone.default, FP32_QS8, _same_layout_copy, qcheck=q_pass(_same_layout_copy))
CloneDimOrderConfig = claim("CloneDimOrderConfig", _dim_order._clone_dim_order.default, FP32_QS8, _same_layout_copy,
                            qcheck=q_pass(_same_layout_copy))
ExpandCopyConfig = claim("ExpandCopyConfig", aten.expand_copy.default, check=_same_shape)
ToDimOrderCopyConfig = claim("ToDimOrderCopyConfig", _dim_order._to_dim_order_copy.default, FP32_QS8,
                             _same_layout_copy, qcheck=q_pass(_same_layout_copy))


@register(aten.clone.default, aten.expand_copy.default, _dim_order._clone_dim_order.default,
          _dim_order._to_dim_order_copy.default)
def copy(b: XnnGraphBuilder, node) -> None:
    x = node.args[0]
    layout = _layout_for(b, [x], node)
    inp = b.tensor(x, layout)
    out = b.output(node, layout)
    b.add(xs.XNNCopy(input_id=inp, output_id=out), node)
