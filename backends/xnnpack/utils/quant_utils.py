"""Quantize/dequantize nodes as XNNPACK reads them: which op is which, their parameters, and the
quantized patterns (dq -> op -> [activation] -> q) the partitioner claims and preprocess lowers."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Callable, Optional, Union

import torch

aten = torch.ops.aten

# q/dq ops by `name.overload` (torch registers them only once its or torchao's quantization is imported).
QUANTIZE_PER_TENSOR = ("quantize_per_tensor.default", "quantize_per_tensor.tensor")
DEQUANTIZE_PER_TENSOR = ("dequantize_per_tensor.default", "dequantize_per_tensor.tensor")
QUANTIZE_PER_CHANNEL = ("quantize_per_channel.default",)
DEQUANTIZE_PER_CHANNEL = ("dequantize_per_channel.default",)
QUANTIZE_AFFINE, DEQUANTIZE_AFFINE = ("quantize_affine.default",), ("dequantize_affine.default",)
CHOOSE_QPARAMS = ("choose_qparams.tensor", "choose_qparams_affine.default")
QUANTIZE = QUANTIZE_PER_TENSOR + QUANTIZE_PER_CHANNEL + QUANTIZE_AFFINE
DEQUANTIZE = DEQUANTIZE_PER_TENSOR + DEQUANTIZE_PER_CHANNEL + DEQUANTIZE_AFFINE
INT4_RANGE = (-8, 7)


def qd_name(node) -> str:
    """`name.overload` of a quantized_decomposed or torchao q/dq op node ("" for anything else)."""
    if not isinstance(node, torch.fx.Node) or node.op != "call_function":
        return ""
    target = node.target
    if getattr(target, "namespace", None) not in ("quantized_decomposed", "torchao"):
        return ""
    return getattr(target, "__name__", "")


# Activations a quantized producer takes as its output range (dq -> op -> act -> q).
FUSED_ACTIVATIONS = (aten.relu.default, aten.hardtanh.default, aten.clamp.default)

INT8_RANGE = (-128, 127)


def is_quant(node) -> bool:
    return qd_name(node) in QUANTIZE


def is_dequant(node) -> bool:
    return qd_name(node) in DEQUANTIZE


def is_dynamic(node) -> bool:
    """A q/dq whose parameters are computed at run time (choose_qparams feeds them)."""
    name = qd_name(node)
    if name in QUANTIZE_AFFINE + DEQUANTIZE_AFFINE:
        return choose_qparams_of(node) is not None
    return name in ("quantize_per_tensor.tensor", "dequantize_per_tensor.tensor") and all(
        isinstance(a, torch.fx.Node) for a in node.args[1:3])


@dataclass(frozen=True)
class QParams:
    """One quantization: int8 (or int32 for biases) with per-tensor or per-channel scales."""

    scale: Union[float, torch.Tensor]
    zero_point: Union[int, torch.Tensor]
    qmin: int
    qmax: int
    dtype: torch.dtype
    axis: Optional[int] = None  # per channel: the channel dim
    group_size: int = 0  # per channel and group: input channels per scale (scale is [out, in / group])
    dynamic: bool = False  # computed per row at run time (XNNPACK's qdint8)
    nonbatch_dims: int = 1  # dynamic: the trailing dims a row spans (3: an image, for convolutions)

    @property
    def per_channel(self) -> bool:
        return self.axis is not None

    @property
    def int4(self) -> bool:
        return self.dtype == torch.int8 and (self.qmin, self.qmax) == INT4_RANGE

    def key(self) -> tuple:
        """A value to compare two parameter sets by."""
        if self.dynamic:
            return ("dynamic", self.nonbatch_dims)
        if self.per_channel:
            return (self.axis, tuple(self.scale.tolist()), tuple(self.zero_point.tolist()), self.qmin, self.qmax)
        return (float(self.scale), int(self.zero_point), self.qmin, self.qmax, self.dtype)


def _arg(node, i: int, name: str):
    return node.args[i] if len(node.args) > i else node.kwargs[name]


def static_params(node: torch.fx.Node,
                  tensor_of: Callable[[torch.fx.Node], Optional[torch.Tensor]]) -> Optional[QParams]:
    """The parameters of a static per-tensor or per-channel q/dq node (None for anything else);
    `tensor_of` gives a constant node's tensor (per-channel scales and zero points)."""
    if not (is_quant(node) or is_dequant(node)) or is_dynamic(node):
        return None
    name = qd_name(node)
    if name in QUANTIZE_PER_TENSOR + DEQUANTIZE_PER_TENSOR:
        scale, zp, qmin, qmax, dtype = (_arg(node, i, n) for i, n in
                                        enumerate(("scale", "zero_point", "quant_min", "quant_max", "dtype"), 1))
        if isinstance(scale, torch.fx.Node):
            scale, zp = tensor_of(scale), tensor_of(zp)
            if scale is None or zp is None or scale.numel() != 1:
                return None
            scale, zp = float(scale), int(zp)
        return QParams(float(scale), int(zp), int(qmin), int(qmax), dtype)
    if name in QUANTIZE_PER_CHANNEL + DEQUANTIZE_PER_CHANNEL:
        scale, zp = tensor_of(node.args[1]), tensor_of(node.args[2])
        if scale is None or zp is None:
            return None
        axis, qmin, qmax, dtype = node.args[3:7]
        return QParams(scale.to(torch.float32), zp.to(torch.int32), int(qmin), int(qmax), dtype, axis=int(axis))
    if name in DEQUANTIZE_AFFINE:
        return _affine_weight_params(node, tensor_of)
    return None


DYNAMIC = QParams(0.0, 0, INT8_RANGE[0], INT8_RANGE[1], torch.int8, dynamic=True)
# XNNPACK's dynamically quantized convolutions take one scale and zero point per image (NHWC: H, W, C).
DYNAMIC_PER_IMAGE = QParams(0.0, 0, INT8_RANGE[0], INT8_RANGE[1], torch.int8, dynamic=True, nonbatch_dims=3)


def _affine_weight_params(node, tensor_of) -> Optional[QParams]:
    """torchao's weight dequantize: symmetric int8 or int4 values, blocks of one output channel by
    `group` input channels (a group the whole row: per channel)."""
    qdata, block, scale, zp, dtype, qmin, qmax = node.args[:7]
    w, scale, zp = tensor_of(qdata), tensor_of(scale), tensor_of(zp)
    if w is None or scale is None or w.dim() != 2 or list(block)[0] != 1 or dtype != torch.int8:
        return None
    if zp is not None and bool(zp.ne(0).any()):
        return None
    out, k = w.shape
    group = int(block[1])
    if k % group or scale.numel() != out * (k // group):
        return None
    zero = torch.zeros(out, dtype=torch.int32)
    if group == k:
        return QParams(scale.reshape(out).to(torch.float32), zero, int(qmin), int(qmax), dtype, axis=0)
    return QParams(scale.reshape(out, k // group).to(torch.float32), zero, int(qmin), int(qmax), dtype, axis=0,
                   group_size=group)


def choose_qparams_of(node) -> Optional[torch.fx.Node]:
    """The choose_qparams node whose (scale, zero point) getitems a dynamic q/dq reads, else None."""
    name = qd_name(node)
    if name in QUANTIZE_AFFINE + DEQUANTIZE_AFFINE:
        scale, zp = node.args[2:4]
    elif name in ("quantize_per_tensor.tensor", "dequantize_per_tensor.tensor"):
        scale, zp = node.args[1:3]
    else:
        return None
    if not all(isinstance(a, torch.fx.Node) and a.target is operator.getitem for a in (scale, zp)):
        return None
    source = scale.args[0]
    return source if zp.args[0] is source and qd_name(source) in CHOOSE_QPARAMS else None


def dynamic_activation(dq) -> Optional[list]:
    """[dq, q, scale getitem, zero-point getitem, choose_qparams] of an activation quantized per row
    at run time to int8 (XNNPACK's qdint8), or None."""
    if not is_dequant(dq) or not isinstance(dq.args[0], torch.fx.Node):
        return None
    q = dq.args[0]
    choose = choose_qparams_of(q)
    if not is_quant(q) or choose is None or choose_qparams_of(dq) is not choose or choose.args[0] is not q.args[0]:
        return None
    if qd_name(q) in QUANTIZE_AFFINE:
        block, x = list(q.args[1]), q.args[0].meta["val"]
        if block != [1] * (x.dim() - 1) + [x.shape[-1]] or q.args[4:7] != (torch.int8, *INT8_RANGE):
            return None
    elif tuple(q.args[3:6]) != (*INT8_RANGE, torch.int8):
        return None
    return [dq, q, q.args[2 if qd_name(q) in QUANTIZE_AFFINE else 1],
            q.args[3 if qd_name(q) in QUANTIZE_AFFINE else 2], choose]


def only_read_by(q, op: str) -> bool:
    """Every value dequantized from the dynamic quantize `q` is read as the input of `op` (a `name.overload`)
    nodes alone: a fully connected layer takes a qdint8 value per row, a convolution per image, and
    nothing else takes one."""
    dqs = list(q.users)
    return bool(dqs) and all(is_dequant(d) and d.users and all(
        getattr(u.target, "__name__", "") == op and u.args[0] is d for u in d.users) for d in dqs)


def int8_static(node) -> bool:
    """A static q/dq node to or from signed 8-bit values (read from its arguments alone)."""
    if not (is_quant(node) or is_dequant(node)) or is_dynamic(node):
        return False
    per_tensor = qd_name(node) in QUANTIZE_PER_TENSOR + DEQUANTIZE_PER_TENSOR
    qmin, qmax, dtype = node.args[3:6] if per_tensor else node.args[4:7]
    return dtype == torch.int8 and qmin >= INT8_RANGE[0] and qmax <= INT8_RANGE[1]


def is_int8(params: Optional[QParams]) -> bool:
    """Signed 8-bit values XNNPACK holds as qint8/qcint8 (unsigned ones it does not take)."""
    return (params is not None and params.dtype == torch.int8 and params.qmin >= INT8_RANGE[0]
            and params.qmax <= INT8_RANGE[1])


def output_quant(node: torch.fx.Node) -> Optional[torch.fx.Node]:
    """The q node `node`'s only use leads to, straight or through one fused activation; None when
    its output is used any other way."""
    users = list(node.users)
    if len(users) != 1:
        return None
    user = users[0]
    if user.target is operator.getitem and user.args[1] == 0:  # max_pool2d_with_indices' values
        users = list(user.users)
        if len(users) != 1:
            return None
        user = users[0]
    if user.op == "call_function" and user.target in FUSED_ACTIVATIONS:
        more = list(user.users)
        if len(more) != 1:
            return None
        user = more[0]
    return user if is_quant(user) and not is_dynamic(user) else None
