"""Data movement: reshapes, transposes, slices, concatenation, padding and copies."""

from __future__ import annotations

import torch

from executorch.backends.xnnpack.operators.node_visitor import (
    NCHW, NHWC, PERM_NCHW_TO_NHWC, PERM_NHWC_TO_NCHW, XnnGraphBuilder, new_shape, node_val, register, shape,
    to_layout,
)
from executorch.backends.xnnpack.serialization import xnnpack_graph_schema as xs

aten = torch.ops.aten
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


@register(aten.view_copy.default, aten.squeeze_copy.dims, aten.squeeze_copy.dim, aten.squeeze_copy.default,
          aten.unsqueeze_copy.default)
def reshape(b: XnnGraphBuilder, node) -> None:
    inp = b.tensor(node.args[0])
    dims = new_shape(node)
    out = b.output(node)
    b.add(xs.XNNStaticReshape(num_dims=len(dims), new_shape=dims, input_id=inp, output_id=out), node)


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


@register(aten.slice_copy.Tensor)
def slice_copy(b: XnnGraphBuilder, node) -> None:
    x = node.args[0]
    in_dims = shape(x)
    rank = len(in_dims)
    dim = (node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)) % rank
    start = node.args[2] if len(node.args) > 2 else node.kwargs.get("start")
    start = 0 if start is None else start
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


@register(aten.cat.default)
def cat(b: XnnGraphBuilder, node) -> None:
    parts = list(node.args[0])
    rank = node_val(node).dim()
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
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


@register(aten.constant_pad_nd.default)
def constant_pad(b: XnnGraphBuilder, node) -> None:
    x = node.args[0]
    rank = node_val(x).dim()
    pads = list(node.args[1])
    value = node.args[2] if len(node.args) > 2 else node.kwargs.get("value", 0.0)
    pre, post = [0] * rank, [0] * rank
    for i in range(len(pads) // 2):
        pre[rank - 1 - i], post[rank - 1 - i] = pads[2 * i], pads[2 * i + 1]
    layout = _layout_for(b, [x], node)
    inp = b.tensor(x, layout)
    out = b.output(node, layout)
    b.add(xs.XNNStaticConstantPad(pre_paddings=to_layout(pre, layout), post_paddings=to_layout(post, layout),
                                  padding_value=float(value), input_id=inp, output_id=out), node)


@register(aten.clone.default, aten.expand_copy.default, torch.ops.dim_order_ops._clone_dim_order.default,
          torch.ops.dim_order_ops._to_dim_order_copy.default)
def copy(b: XnnGraphBuilder, node) -> None:
    x = node.args[0]
    layout = _layout_for(b, [x], node)
    inp = b.tensor(x, layout)
    out = b.output(node, layout)
    b.add(xs.XNNCopy(input_id=inp, output_id=out), node)
