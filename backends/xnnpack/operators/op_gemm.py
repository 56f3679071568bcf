"""Matrix products and their configs: fully connected (linear, addmm, mm with a constant weight; torchao's q/dq
around QD8 linears) and batched matmul."""

from __future__ import annotations

import torch

from executorch.backends.xnnpack.operators.node_config import (
    GEMM, ConfigPrecisionType, XNNPartitionerConfig, arg, claim,
)
from executorch.backends.xnnpack.operators.node_visitor import INVALID, XnnGraphBuilder, register, shape
from executorch.backends.xnnpack.serialization import xnnpack_graph_schema as xs
from executorch.backends.xnnpack.utils import quant_utils as qu
from executorch.backends.xnnpack.utils.utils import is_param_node

aten = torch.ops.aten


def _gemm(node, ep) -> bool:
    """addmm/mm: the weight is a constant (or a transpose of one), the batch operand 2-D."""
    mat2 = node.args[-1]
    if mat2.target == aten.permute_copy.default and list(mat2.args[1]) == [1, 0]:
        mat2 = mat2.args[0]
    if not is_param_node(ep, mat2):
        return False
    if node.target == aten.addmm.default:
        if node.kwargs.get("beta", 1) != 1 or node.kwargs.get("alpha", 1) != 1:
            return False
        bias = node.args[0]
        return is_param_node(ep, bias) and bias.meta["val"].dim() == 1
    return True


def _linear(node, ep) -> bool:
    weight = node.args[1]
    bias = arg(node, 2, "bias", None)
    return is_param_node(ep, weight) and (bias is None or is_param_node(ep, bias))


def _q_linear(node) -> bool:
    """Per-channel weights are scaled along the output dim."""
    w = node.args[1]
    return qu.qd_name(w) not in qu.DEQUANTIZE_PER_CHANNEL or w.args[3] == 0


AddmmConfig = claim("AddmmConfig", aten.addmm.default, GEMM, _gemm)
BMMConfig = claim("BMMConfig", aten.bmm.default)
LinearConfig = claim("LinearConfig", aten.linear.default, GEMM, _linear, keep=True, gemm=(0, 1, 2),
                     qcheck=_q_linear)
MMConfig = claim("MMConfig", aten.mm.default, GEMM, _gemm)


class _AffineConfig(XNNPartitionerConfig):
    """torchao's affine q/dq ops: kept whole where a QD8 linear claims them as its dependencies."""

    def supported_precision_types(self):
        return [ConfigPrecisionType.DYNAMIC_QUANT]

    def get_original_aten(self):
        packet = getattr(torch.ops.torchao, self.target_name.split(".")[0], None)  # None until torchao is imported
        return None if packet is None else packet.default

    def check_constraints(self, node, ep):
        if ConfigPrecisionType.DYNAMIC_QUANT not in self.enabled_precision_types:
            return False
        linear = LinearConfig()
        linear.set_enabled_precision_types([ConfigPrecisionType.DYNAMIC_QUANT])
        seen, todo = set(), [node]
        for _ in range(4):  # choose_qparams -> getitem -> q -> dq -> linear
            todo = [u for n in todo for u in n.users if u not in seen]
            seen.update(todo)
            for user in todo:
                if getattr(user.target, "__name__", "") == "linear.default" and node in (
                        linear.quantized_deps(user, ep) or ()):
                    return True
        return False

    def quantized_deps(self, node, ep):
        return None

    def get_partition(self, node, ep):
        return []


class ChooseQParamsAffineConfig(_AffineConfig):
    target_name = "choose_qparams_affine.default"


class QuantizeAffineConfig(_AffineConfig):
    target_name = "quantize_affine.default"


class DeQuantizeAffineConfig(_AffineConfig):
    target_name = "dequantize_affine.default"


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
    fully_connected(b, node, node.args[0], node.args[1], arg(node, 2, "bias", None))


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
