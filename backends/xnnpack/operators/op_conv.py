"""Convolutions, their configs (and a batch norm's, folded into one): 2-D (regular, depthwise, transposed) on
NHWC values with OHWI / 1HWO filters."""

from __future__ import annotations

from typing import Optional

import torch

from executorch.backends.xnnpack.operators.node_config import GEMM, claim, first_output_only, static_shapes
from executorch.backends.xnnpack.operators.node_visitor import NHWC, XnnGraphBuilder, register
from executorch.backends.xnnpack.serialization import xnnpack_graph_schema as xs
from executorch.backends.xnnpack.utils import quant_utils as qu
from executorch.backends.xnnpack.utils.utils import is_param_node

aten = torch.ops.aten


def is_depthwise(weight_shape, groups: int, transposed: bool) -> bool:
    return not transposed and groups > 1 and weight_shape[1] == 1


def _own_constant(node, ep) -> bool:
    """A constant only this node reads: it moves into the node's partition whatever the partitioning
    (XNNPACK needs convolution filters and folded batch norm statistics at build time)."""
    return node is None or (is_param_node(ep, node) and len(node.users) == 1)


def _conv(node, ep) -> bool:
    """2-D convolutions on constant filters; a transposed one in float32 only (XNNPACK refuses a
    half-precision deconvolution at init)."""
    weight = node.args[1]
    if node.args[6] and node.meta["val"].dtype != torch.float32:
        return False
    return (weight.meta["val"].dim() == 4 and _own_constant(weight, ep) and _own_constant(node.args[2], ep)
            and static_shapes(node))


def _q_conv(node) -> bool:
    """2-D convolutions; a transposed one only ungrouped with per-output-channel (dim 1) scales."""
    w = node.args[1]
    if w.meta["val"].dim() != 4:
        return False
    if node.args[6] and qu.qd_name(w) in qu.DEQUANTIZE_PER_CHANNEL:
        return node.args[8] == 1 and w.args[3] == 1
    return True


def _qd_conv(node) -> Optional[int]:
    """XNNPACK's dynamically quantized convolutions are 2-D and not depthwise (as the published partitioner
    claims them), on static shapes; the weight is quantized along its output channels (dim 1 of a
    transposed one's, which is ungrouped)."""
    w = node.args[1]
    transposed, groups = node.args[6], node.args[8]
    if w.meta["val"].dim() != 4 or not static_shapes(node):
        return None
    if (transposed and groups != 1) or is_depthwise(w.meta["val"].shape, groups, transposed):
        return None
    return 1 if transposed else 0


def _batch_norm_deps(node, ep):
    """A batch norm is folded into the convolution before it, so it is taken only after one that
    it alone reads, and only when its statistics are constants and only its output is used."""
    conv = node.args[0]
    if conv.op != "call_function" or conv.target != aten.convolution.default or len(conv.users) != 1:
        return None
    if not _conv(conv, ep) or conv.args[6]:
        return None
    if not all(_own_constant(a, ep) for a in node.args[1:5]):
        return None
    users = first_output_only(node, ep)
    return None if users is None else [a for a in node.args[1:5] if a is not None] + users


BatchNormConfig = claim("BatchNormConfig", aten._native_batch_norm_legit_no_training.default, deps=_batch_norm_deps)
ConvolutionConfig = claim("ConvolutionConfig", aten.convolution.default, GEMM, _conv, gemm=(0, 1, 2), qcheck=_q_conv,
                          dynamic_axis=_qd_conv)


@register(aten.convolution.default)
def conv(b: XnnGraphBuilder, node: torch.fx.Node) -> None:
    x, w, bias, stride, padding, dilation, transposed, output_padding, groups = node.args
    weight = b.consts[w]
    o_i = list(weight.shape)
    if transposed:
        # [I, O/g, kh, kw] -> [O, kh, kw, I/g]
        in_ch, out_g, kh, kw = o_i
        filt = (weight.reshape(groups, in_ch // groups, out_g, kh, kw).permute(0, 2, 3, 4, 1)
                .reshape(groups * out_g, kh, kw, in_ch // groups))
        group_in, group_out = in_ch // groups, out_g
        kind = xs.XNNConvTranspose2d
        channel_dim = 0
    elif is_depthwise(o_i, groups, transposed):
        filt = weight.permute(1, 2, 3, 0)  # [O, 1, kh, kw] -> [1, kh, kw, O]
        group_in, group_out = 1, o_i[0] // groups
        kind = xs.XNNDepthwiseConv2d
        channel_dim = 3
    else:
        filt = weight.permute(0, 2, 3, 1)  # OIHW -> OHWI
        group_in, group_out = o_i[1], o_i[0] // groups
        kind = xs.XNNConv2d
        channel_dim = 0
    kh, kw = o_i[2], o_i[3]
    adj = list(output_padding) if transposed else [0, 0]
    inp = b.tensor(x, NHWC)
    params = w.meta.get("xnn_quant")  # int8 weights: per-channel scales follow the output channels
    filter_id = b.constant(filt) if params is None else b.quantized_constant(filt, params, channel_dim)
    bias_id = b.bias(bias, x, w)
    out = b.output(node, NHWC)
    b.add(kind(padding_top=padding[0], padding_right=padding[1], padding_bottom=padding[0],
               padding_left=padding[1], kernel_height=kh, kernel_width=kw, subsampling_height=stride[0],
               subsampling_width=stride[1], dilation_height=dilation[0], dilation_width=dilation[1],
               group_input_channels=group_in, group_output_channels=group_out, groups=groups,
               adjustment_height=adj[0], adjustment_width=adj[1], input1_id=inp, filter_id=filter_id,
               bias_id=bias_id, output_id=out), node)
