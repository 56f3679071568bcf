"""Convolutions: 2-D (regular, depthwise, transposed) on NHWC values with OHWI / 1HWO filters."""

from __future__ import annotations

import torch

from executorch.backends.xnnpack.operators.node_visitor import NHWC, XnnGraphBuilder, register
from executorch.backends.xnnpack.serialization import xnnpack_graph_schema as xs


def is_depthwise(weight_shape, groups: int, transposed: bool) -> bool:
    return not transposed and groups > 1 and weight_shape[1] == 1


@register(torch.ops.aten.convolution.default)
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
