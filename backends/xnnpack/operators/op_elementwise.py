"""Element-wise ops: unary and binary XNNPACK nodes, computed in whichever layout their inputs have."""

from __future__ import annotations

import math

import torch

from executorch.backends.xnnpack.operators.node_visitor import NCHW, NHWC, XnnGraphBuilder, node_val, register
from executorch.backends.xnnpack.serialization import xnnpack_graph_schema as xs

aten = torch.ops.aten
INF = math.inf


def common_layout(b: XnnGraphBuilder, node, args) -> str:
    """NHWC when an input was produced in NHWC and every tensor operand is 4-D or a single element
    (which broadcasts the same in either layout); NCHW otherwise."""
    nodes = [a for a in args if isinstance(a, torch.fx.Node)]
    if not any(b.layout(a) == NHWC for a in nodes):
        return NCHW
    ok = all(node_val(a).dim() == 4 or node_val(a).numel() == 1 for a in nodes) and node_val(node).dim() == 4
    return NHWC if ok else NCHW


def _operand(b, arg, node, layout):
    if isinstance(arg, torch.fx.Node) and layout == NHWC and node_val(arg).dim() != 4:
        return b.tensor(arg)  # a single element: its NCHW value broadcasts the same way
    return b.operand(arg, node, layout)


_UNARY = {
    aten.abs.default: xs.XNNAbs, aten.ceil.default: xs.XNNCeiling, aten.cos.default: xs.XNNCos,
    aten.exp.default: xs.XNNExp, aten.floor.default: xs.XNNFloor, aten.gelu.default: xs.XNNGelu,
    aten.hardswish.default: xs.XNNHardswish, aten.log.default: xs.XNNLog, aten.neg.default: xs.XNNNegate,
    aten.pow.Tensor_Scalar: xs.XNNSquare, aten.rsqrt.default: xs.XNNReciprocalSquareRoot,
    aten.sigmoid.default: xs.XNNSigmoid, aten.sin.default: xs.XNNSin, aten.sqrt.default: xs.XNNSquareRoot,
    aten.tanh.default: xs.XNNTanh,
}


@register(*_UNARY)
def unary(b: XnnGraphBuilder, node) -> None:
    layout = common_layout(b, node, node.args[:1])
    inp = b.tensor(node.args[0], layout)
    out = b.output(node, layout)
    b.add(_UNARY[node.target](input_id=inp, output_id=out), node)


def clamp_bounds(node) -> tuple:
    """(min, max) of relu, hardtanh or clamp."""
    if node.target == aten.relu.default:
        return 0.0, INF
    if node.target == aten.hardtanh.default:
        lo = node.args[1] if len(node.args) > 1 else node.kwargs.get("min_val", -1.0)
        hi = node.args[2] if len(node.args) > 2 else node.kwargs.get("max_val", 1.0)
        return float(lo), float(hi)
    lo = node.args[1] if len(node.args) > 1 else node.kwargs.get("min")
    hi = node.args[2] if len(node.args) > 2 else node.kwargs.get("max")
    return (-INF if lo is None else float(lo)), (INF if hi is None else float(hi))


CLAMPS = (aten.relu.default, aten.hardtanh.default, aten.clamp.default)


@register(*CLAMPS)
def clamp(b: XnnGraphBuilder, node) -> None:
    layout = common_layout(b, node, node.args[:1])
    inp = b.tensor(node.args[0], layout)
    out = b.output(node, layout)
    b.add(xs.XNNClamp(input_id=inp, output_id=out), node, min_max=clamp_bounds(node))


@register(aten.leaky_relu.default)
def leaky_relu(b: XnnGraphBuilder, node) -> None:
    layout = common_layout(b, node, node.args[:1])
    inp = b.tensor(node.args[0], layout)
    out = b.output(node, layout)
    slope = node.args[1] if len(node.args) > 1 else node.kwargs.get("negative_slope", 0.01)
    b.add(xs.XNNLeakyReLU(negative_slope=float(slope), input_id=inp, output_id=out), node)


_BINARY = {
    aten.add.Tensor: xs.XNNAdd, aten.add.Scalar: xs.XNNAdd, aten.sub.Tensor: xs.XNNSubtract,
    aten.mul.Tensor: xs.XNNMultiply, aten.mul.Scalar: xs.XNNMultiply, aten.div.Tensor: xs.XNNDiv,
    aten.maximum.default: xs.XNNMaximum, aten.minimum.default: xs.XNNMinimum,
}
# Binary nodes whose output XNNPACK can clamp (the others ignore output_min_max).
BINARY_WITH_MIN_MAX = (aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.div.Tensor)


@register(*_BINARY)
def binary(b: XnnGraphBuilder, node) -> None:
    lhs, rhs = node.args[:2]
    layout = common_layout(b, node, (lhs, rhs))
    a, c = _operand(b, lhs, node, layout), _operand(b, rhs, node, layout)
    out = b.output(node, layout)
    b.add(_BINARY[node.target](input1_id=a, input2_id=c, output_id=out), node)


def convert(b: XnnGraphBuilder, node) -> None:
    """A quantize or dequantize no int8 op took in: float32 <-> int8 at the node's parameters. A
    dynamic quantization converts in the layout of the layer reading it, as XNNPACK moves no qdint8 value
    through a transpose or reshape: per row in the program's layout for a fully connected node, per
    image in NHWC for a convolution."""
    params = node.meta.get("xnn_quant")
    if params is not None and params.dynamic:
        layout = NHWC if params.nonbatch_dims == 3 else NCHW
    else:
        layout = common_layout(b, node, node.args[:1])
    inp = b.tensor(node.args[0], layout)
    out = b.output(node, layout)
    b.add(xs.XNNConvert(input_id=inp, output_id=out), node)


@register(aten._softmax.default)
def softmax(b: XnnGraphBuilder, node) -> None:
    inp = b.tensor(node.args[0])
    out = b.output(node)
    b.add(xs.XNNSoftmax(input_id=inp, output_id=out), node)
