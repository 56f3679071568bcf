"""Matrix products: fully connected (linear, addmm, mm with a constant weight) and batched matmul."""

from __future__ import annotations

import torch

from executorch.backends.xnnpack.operators.node_visitor import INVALID, XnnGraphBuilder, register, shape
from executorch.backends.xnnpack.serialization import xnnpack_graph_schema as xs

aten = torch.ops.aten


XNN_FLAG_TRANSPOSE_WEIGHTS = 0x1


def fully_connected(b: XnnGraphBuilder, node, x, weight, bias, transposed: bool = False) -> None:
    """`node = x @ weight.T + bias` with `weight` [out, in] ([in, out] when `transposed`). A weight
    that is no constant of this partition (a tied weight another partition also reads) is a
    runtime value, which XNNPACK's fully connected takes too."""
    inp = b.tensor(x)
    if weight in b.consts and "xnn_quant" in weight.meta and not transposed:
        filter_id, flags = b.tensor(weight), 0
    elif weight in b.consts:
        w = b.consts[weight]
        filter_id, flags = b.constant(w.t() if transposed else w), 0
    else:
        filter_id, flags = b.tensor(weight), XNN_FLAG_TRANSPOSE_WEIGHTS if transposed else 0
    if isinstance(bias, torch.fx.Node) and bias not in b.consts:
        # A bias this partition reads at run time (a parameter another partition also reads): XNNPACK
        # packs a fully connected node's bias at init, so it must be a constant (the published runtime
        # crashed on such a node). The product is written without it and the bias added after.
        product = b._define(shape(node), *b.value_type(node))
        b.add(xs.XNNFullyConnected(input1_id=inp, filter_id=filter_id, bias_id=INVALID, output_id=product,
                                   flags=flags), node)
        out = b.output(node)
        b.add(xs.XNNAdd(input1_id=product, input2_id=b.tensor(bias), output_id=out), node)
        return
    bias_id = b.bias(bias, x, weight)
    out = b.output(node)
    b.add(xs.XNNFullyConnected(input1_id=inp, filter_id=filter_id, bias_id=bias_id, output_id=out, flags=flags),
          node)


@register(aten.linear.default)
def linear(b: XnnGraphBuilder, node) -> None:
    bias = node.args[2] if len(node.args) > 2 else node.kwargs.get("bias")
    fully_connected(b, node, node.args[0], node.args[1], bias)


@register(aten.addmm.default)
def addmm(b: XnnGraphBuilder, node) -> None:
    bias, x, mat2 = node.args
    fully_connected(b, node, x, mat2, bias, transposed=True)


@register(aten.mm.default)
def mm(b: XnnGraphBuilder, node) -> None:
    x, mat2 = node.args
    fully_connected(b, node, x, mat2, None, transposed=True)


@register(aten.bmm.default)
def bmm(b: XnnGraphBuilder, node) -> None:
    a, c = (b.tensor(n) for n in node.args)
    out = b.output(node)
    b.add(xs.XNNBatchMatrixMultiply(input1_id=a, input2_id=c, output_id=out), node)
