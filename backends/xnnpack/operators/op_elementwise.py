"""Element-wise ops and their configs: unary and binary XNNPACK nodes, computed in whichever layout their inputs
have; softmax and the q/dq Converts."""

from __future__ import annotations

import math

import torch

from executorch.backends.xnnpack.operators.node_config import (
    FP32_QS8, ConfigPrecisionType, XNNPartitionerConfig, arg, claim, q_pass,
)
from executorch.backends.xnnpack.operators.node_visitor import NCHW, NHWC, XnnGraphBuilder, node_val, register
from executorch.backends.xnnpack.serialization import xnnpack_graph_schema as xs
from executorch.backends.xnnpack.utils import quant_utils as qu
from executorch.backends.xnnpack.utils.utils import is_param_node

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


def _in_out(b: XnnGraphBuilder, node) -> tuple:
    """The ids of a one-input node's input and output, in their common layout."""
    layout = common_layout(b, node, node.args[:1])
    return b.tensor(node.args[0], layout), b.output(node, layout)


def _into(table: dict):
    """`claim`, also entering in `table` the node kind its op is written as."""
    def row(name, op, kind, *args, **kwargs):
        table[op] = kind
        return claim(name, op, *args, **kwargs)
    return row


_UNARY: dict = {}
_BINARY: dict = {}
_unary, _binary = _into(_UNARY), _into(_BINARY)


def _gelu(node, ep) -> bool:
    return node.kwargs.get("approximate", "none") == "none" and node.meta["val"].dtype == torch.float32


AbsConfig = _unary("AbsConfig", aten.abs.default, xs.XNNAbs)
CeilConfig = _unary("CeilConfig", aten.ceil.default, xs.XNNCeiling)
CosConfig = _unary("CosConfig", aten.cos.default, xs.XNNCos)
ExpConfig = _unary("ExpConfig", aten.exp.default, xs.XNNExp)
FloorConfig = _unary("FloorConfig", aten.floor.default, xs.XNNFloor)
GeluConfig = _unary("GeluConfig", aten.gelu.default, xs.XNNGelu, check=_gelu)
HardswishConfig = _unary("HardswishConfig", aten.hardswish.default, xs.XNNHardswish, keep=True)
LogConfig = _unary("LogConfig", aten.log.default, xs.XNNLog)
NegConfig = _unary("NegConfig", aten.neg.default, xs.XNNNegate)
PowConfig = _unary("PowConfig", aten.pow.Tensor_Scalar, xs.XNNSquare, check=lambda node, ep: node.args[1] == 2)
ReciprocalSquareRootConfig = _unary("ReciprocalSquareRootConfig", aten.rsqrt.default, xs.XNNReciprocalSquareRoot)
SigmoidConfig = _unary("SigmoidConfig", aten.sigmoid.default, xs.XNNSigmoid)
SinConfig = _unary("SinConfig", aten.sin.default, xs.XNNSin)
SquareRootConfig = _unary("SquareRootConfig", aten.sqrt.default, xs.XNNSquareRoot)
TanhConfig = _unary("TanhConfig", aten.tanh.default, xs.XNNTanh)


@register(*_UNARY)
def unary(b: XnnGraphBuilder, node) -> None:
    inp, out = _in_out(b, node)
    b.add(_UNARY[node.target](input_id=inp, output_id=out), node)


def clamp_bounds(node) -> tuple:
    """(min, max) of relu, hardtanh or clamp."""
    if node.target == aten.relu.default:
        return 0.0, INF
    if node.target == aten.hardtanh.default:
        return float(arg(node, 1, "min_val", -1.0)), float(arg(node, 2, "max_val", 1.0))
    lo, hi = arg(node, 1, "min", None), arg(node, 2, "max", None)
    return (-INF if lo is None else float(lo)), (INF if hi is None else float(hi))


CLAMPS = (aten.relu.default, aten.hardtanh.default, aten.clamp.default)
ClampConfig = claim("ClampConfig", aten.clamp.default, FP32_QS8)
HardtanhConfig = claim("HardtanhConfig", aten.hardtanh.default, FP32_QS8)
ReLUConfig = claim("ReLUConfig", aten.relu.default, FP32_QS8)


@register(*CLAMPS)
def clamp(b: XnnGraphBuilder, node) -> None:
    inp, out = _in_out(b, node)
    b.add(xs.XNNClamp(input_id=inp, output_id=out), node, min_max=clamp_bounds(node))


LeakyReLUConfig = claim("LeakyReLUConfig", aten.leaky_relu.default)


@register(aten.leaky_relu.default)
def leaky_relu(b: XnnGraphBuilder, node) -> None:
    inp, out = _in_out(b, node)
    b.add(xs.XNNLeakyReLU(negative_slope=float(arg(node, 1, "negative_slope", 0.01)), input_id=inp, output_id=out),
          node)


# Binary nodes whose output XNNPACK can clamp (the others ignore output_min_max).
BINARY_WITH_MIN_MAX = (aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.div.Tensor)


def _alpha_one(node, ep) -> bool:
    return node.kwargs.get("alpha", 1) == 1


AddConfig = _binary("AddConfig", aten.add.Tensor, xs.XNNAdd, FP32_QS8, _alpha_one, qcheck=q_pass(_alpha_one))
AddScalarConfig = _binary("AddScalarConfig", aten.add.Scalar, xs.XNNAdd, check=_alpha_one)
DivConfig = _binary("DivConfig", aten.div.Tensor, xs.XNNDiv)
MaximumConfig = _binary("MaximumConfig", aten.maximum.default, xs.XNNMaximum)
MinimumConfig = _binary("MinimumConfig", aten.minimum.default, xs.XNNMinimum)
MulConfig = _binary("MulConfig", aten.mul.Tensor, xs.XNNMultiply, FP32_QS8)
MulScalarConfig = _binary("MulScalarConfig", aten.mul.Scalar, xs.XNNMultiply)
SubConfig = _binary("SubConfig", aten.sub.Tensor, xs.XNNSubtract, FP32_QS8, _alpha_one, qcheck=q_pass(_alpha_one))


@register(*_BINARY)
def binary(b: XnnGraphBuilder, node) -> None:
    lhs, rhs = node.args[:2]
    layout = common_layout(b, node, (lhs, rhs))
    a, c = _operand(b, lhs, node, layout), _operand(b, rhs, node, layout)
    out = b.output(node, layout)
    b.add(_BINARY[node.target](input1_id=a, input2_id=c, output_id=out), node)


def _q_dq_int8(node, ep) -> bool:
    """A per-tensor float32 <-> int8 q/dq with constant parameters (a Convert where no int8 op takes it)."""
    if not qu.int8_static(node) or qu.qd_name(node) not in qu.QUANTIZE_PER_TENSOR + qu.DEQUANTIZE_PER_TENSOR:
        return False
    if any(isinstance(a, torch.fx.Node) for a in node.args[1:]):
        return False
    x = node.args[0]
    if isinstance(x, torch.fx.Node) and x.op == "placeholder" and is_param_node(ep, x):
        return False  # a quantized constant: the op reading it takes it as its weight
    val = node.meta.get("val")
    return isinstance(val, torch.Tensor) and all(isinstance(d, int) and d > 0 for d in val.shape)


class _QuantDequantConfig(XNNPartitionerConfig):
    def supported_precision_types(self):
        return [ConfigPrecisionType.STATIC_QUANT]

    def check_constraints(self, node, ep):
        return ConfigPrecisionType.STATIC_QUANT in self.enabled_precision_types and _q_dq_int8(node, ep)

    def quantized_deps(self, node, ep):
        return None


class QuantizedPerTensorConfig(_QuantDequantConfig):
    """Claims `quantize_per_tensor` to int8: a Convert from float32."""

    target_name = "quantize_per_tensor.default"


class DeQuantizedPerTensorConfig(_QuantDequantConfig):
    """Claims `dequantize_per_tensor` from int8: a Convert to float32."""

    target_name = "dequantize_per_tensor.default"


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


def _softmax(node, ep) -> bool:
    rank = node_val(node.args[0]).dim()
    return node.args[1] % rank == rank - 1 and not node.args[2]


SoftmaxConfig = claim("SoftmaxConfig", aten._softmax.default, check=_softmax)


@register(aten._softmax.default)
def softmax(b: XnnGraphBuilder, node) -> None:
    inp = b.tensor(node.args[0])
    out = b.output(node)
    b.add(xs.XNNSoftmax(input_id=inp, output_id=out), node)
