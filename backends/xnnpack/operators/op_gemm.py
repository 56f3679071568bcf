"""Matrix products: fully connected (linear, addmm, mm with a constant weight) and batched matmul."""

from __future__ import annotations

import torch

from executorch.backends.xnnpack.operators.node_visitor import INVALID, XnnGraphBuilder, register
from executorch.backends.xnnpack.serialization import xnnpack_graph_schema as xs

aten = torch.ops.aten


def fully_connected(b: XnnGraphBuilder, node, x, weight: torch.Tensor, bias) -> None:
    """`node = x @ weight.T + bias` with `weight` [out, in]."""
    inp = b.tensor(x)
    filter_id = b.constant(weight)
    bias_id = INVALID if bias is None else b.constant(bias)
    out = b.output(node)
    b.add(xs.XNNFullyConnected(input1_id=inp, filter_id=filter_id, bias_id=bias_id, output_id=out), node)


@register(aten.linear.default)
def linear(b: XnnGraphBuilder, node) -> None:
    bias = node.args[2] if len(node.args) > 2 else node.kwargs.get("bias")
    fully_connected(b, node, node.args[0], b.consts[node.args[1]], None if bias is None else b.consts[bias])


@register(aten.addmm.default)
def addmm(b: XnnGraphBuilder, node) -> None:
    bias, x, mat2 = node.args
    fully_connected(b, node, x, b.consts[mat2].t(), b.consts[bias])


@register(aten.mm.default)
def mm(b: XnnGraphBuilder, node) -> None:
    x, mat2 = node.args
    fully_connected(b, node, x, b.consts[mat2].t(), None)


@register(aten.bmm.default)
def bmm(b: XnnGraphBuilder, node) -> None:
    a, c = (b.tensor(n) for n in node.args)
    out = b.output(node)
    b.add(xs.XNNBatchMatrixMultiply(input1_id=a, input2_id=c, output_id=out), node)
