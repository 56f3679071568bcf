"""Pools, means, layer norm and their configs: max/avg pooling and the mean over H and W on NHWC values; a mean
over the last dim as a fully connected node with a constant 1/n filter (one node, no reduction op needed)."""

from __future__ import annotations

import torch

from executorch.backends.xnnpack.operators.node_config import (
    FP32_QS8, arg, claim, first_output_only, one_dynamic_dim, q_pass, static_shapes,
)
from executorch.backends.xnnpack.operators.node_visitor import (
    INVALID, NHWC, PERM_NCHW_TO_NHWC, XnnGraphBuilder, new_shape, node_val, register, shape,
)
from executorch.backends.xnnpack.serialization import xnnpack_graph_schema as xs

aten = torch.ops.aten
XNN_FLAG_KEEP_DIMS = 0x40


def _pair(v, default):
    v = list(v) if v else list(default)
    return v * 2 if len(v) == 1 else v


def _pool_geometry(node):
    k = _pair(node.args[1], None)
    stride = _pair(arg(node, 2, "stride", None), k)
    pad = _pair(arg(node, 3, "padding", None), [0, 0])
    return k, stride, pad


def _max_pool(node, ep) -> bool:
    if node_val(node.args[0]).dim() != 4 or not static_shapes(node):
        return False
    k, stride, _ = _pool_geometry(node)
    ceil_mode = arg(node, 5, "ceil_mode", False)
    return not ceil_mode and stride[0] <= k[0] and stride[1] <= k[1]


def _avg_pool(node, ep) -> bool:
    if node_val(node.args[0]).dim() != 4 or not static_shapes(node):
        return False
    k, _, pad = _pool_geometry(node)
    ceil_mode = arg(node, 4, "ceil_mode", False)
    count_include_pad = arg(node, 5, "count_include_pad", True)
    divisor = arg(node, 6, "divisor_override", None)
    return not ceil_mode and not (count_include_pad and any(pad)) and divisor in (None, k[0] * k[1])


AvgPoolingConfig = claim("AvgPoolingConfig", aten.avg_pool2d.default, check=_avg_pool)
MaxPool2dConfig = claim("MaxPool2dConfig", aten.max_pool2d.default, FP32_QS8, _max_pool, keep=True,
                        qcheck=q_pass(_max_pool))
MaxPool2dWithIndicesConfig = claim("MaxPool2dWithIndicesConfig", aten.max_pool2d_with_indices.default,
                                   FP32_QS8, _max_pool, deps=first_output_only, qcheck=q_pass(_max_pool))


@register(aten.max_pool2d.default, aten.max_pool2d_with_indices.default)
def max_pool(b: XnnGraphBuilder, node) -> None:
    k, stride, pad = _pool_geometry(node)
    dil = _pair(arg(node, 4, "dilation", None), [1, 1])
    inp = b.tensor(node.args[0], NHWC)
    out = b.output(node, NHWC)
    b.add(xs.XNNMaxPooling2d(padding_top=pad[0], padding_right=pad[1], padding_bottom=pad[0], padding_left=pad[1],
                             pooling_height=k[0], pooling_width=k[1], stride_height=stride[0],
                             stride_width=stride[1], dilation_height=dil[0], dilation_width=dil[1], input_id=inp,
                             output_id=out), node)


@register(aten.avg_pool2d.default)
def avg_pool(b: XnnGraphBuilder, node) -> None:
    k, stride, pad = _pool_geometry(node)
    inp = b.tensor(node.args[0], NHWC)
    out = b.output(node, NHWC)
    b.add(xs.XNNAvgPooling2d(padding_top=pad[0], padding_right=pad[1], padding_bottom=pad[0], padding_left=pad[1],
                             pooling_height=k[0], pooling_width=k[1], stride_height=stride[0],
                             stride_width=stride[1], dilation_height=1, dilation_width=1, input_id=inp,
                             output_id=out), node)


def _mean_dims(node):
    rank = node_val(node.args[0]).dim()
    return sorted(d % rank for d in node.args[1]), rank


def _mean(node, ep) -> bool:
    """Mean over H and W of a static 4-D value, or over the last dim of any value."""
    if node.kwargs.get("dtype") is not None:
        return False
    dims, rank = _mean_dims(node)
    hw = rank == 4 and dims == [2, 3]
    return (hw or dims == [rank - 1]) and static_shapes(node, leading=not hw) and one_dynamic_dim(node, ep)


def _q_mean(node) -> bool:
    """Only the mean over H and W (a global average pool) has a quantized form."""
    dims, rank = _mean_dims(node)
    return rank == 4 and dims == [2, 3] and node.kwargs.get("dtype") is None


MeanDimConfig = claim("MeanDimConfig", aten.mean.dim, FP32_QS8, _mean, qcheck=_q_mean)


@register(aten.mean.dim)
def mean(b: XnnGraphBuilder, node) -> None:
    x = node.args[0]
    in_dims = shape(x)
    dims, rank = _mean_dims(node)
    keepdim = arg(node, 2, "keepdim", False)
    kept = list(in_dims)
    for d in dims:
        kept[d] = 1
    if rank == 4 and dims == [2, 3]:
        inp = b.tensor(x, NHWC)
        if keepdim:
            out = b.output(node, NHWC)
        else:
            out = b._define([kept[i] for i in PERM_NCHW_TO_NHWC], *b.value_type(node))
        b.add(xs.XNNGlobalAvgPooling2d(input_id=inp, output_id=out, flags=XNN_FLAG_KEEP_DIMS), node)
    else:
        n = in_dims[-1]
        inp = b.tensor(x)
        filter_id = b.constant(torch.full((1, n), 1.0 / n, dtype=node_val(x).dtype))
        out = b.output(node) if keepdim else b._define(kept, *b.value_type(node))
        b.add(xs.XNNFullyConnected(input1_id=inp, filter_id=filter_id, bias_id=INVALID, output_id=out), node)
    if not keepdim:
        # [N, 1, 1, C] in NHWC and [N, C, 1, 1] hold the same bytes, as do [..., 1] and [...].
        final = b.output(node)
        dims = new_shape(node)
        b.add(xs.XNNStaticReshape(num_dims=len(dims), new_shape=dims, input_id=out, output_id=final), node)


def _layer_norm_deps(node, ep):
    """Layer norm over the last dim, written as XNNPACK arithmetic; only its output may be used."""
    if len(node.args[1]) != 1:
        return None
    return first_output_only(node, ep)


LayerNormConfig = claim("LayerNormConfig", aten.native_layer_norm.default, deps=_layer_norm_deps)


@register(aten.native_layer_norm.default)
def layer_norm(b: XnnGraphBuilder, node) -> None:
    """(x - mean) * rsqrt(var + eps) * weight + bias over the last dim: two 1/n fully connected
    means and element-wise nodes, so the transformer around it stays in one delegate."""
    x, _shape, weight, bias, eps = node.args
    dims = shape(node)
    n = dims[-1]
    stat_dims = dims[:-1] + [1]
    dtype = b.dtype(node)
    mean_filter = b.constant(torch.full((1, n), 1.0 / n, dtype=node_val(x).dtype))

    def value(d):
        return b._define(d, dtype)

    inp = b.tensor(x)
    mean_id, centred, squared, var = value(stat_dims), value(dims), value(dims), value(stat_dims)
    b.add(xs.XNNFullyConnected(input1_id=inp, filter_id=mean_filter, bias_id=INVALID, output_id=mean_id), node)
    b.add(xs.XNNSubtract(input1_id=inp, input2_id=mean_id, output_id=centred), node)
    b.add(xs.XNNSquare(input_id=centred, output_id=squared), node)
    b.add(xs.XNNFullyConnected(input1_id=squared, filter_id=mean_filter, bias_id=INVALID, output_id=var), node)
    shifted, inv_std = value(stat_dims), value(stat_dims)
    b.add(xs.XNNAdd(input1_id=var, input2_id=b.scalar(eps, x), output_id=shifted), node)
    b.add(xs.XNNReciprocalSquareRoot(input_id=shifted, output_id=inv_std), node)
    steps = [(xs.XNNMultiply, inv_std)]
    if weight is not None:
        steps.append((xs.XNNMultiply, b.tensor(weight)))
    if bias is not None:
        steps.append((xs.XNNAdd, b.tensor(bias)))
    cur = centred
    for i, (kind, operand) in enumerate(steps):
        out = b.output(node) if i == len(steps) - 1 else value(dims)
        b.add(kind(input1_id=cur, input2_id=operand, output_id=out), node)
        cur = out
