"""q/dq nodes become value types: a node XNNPACK holds as int8 carries its `QParams` in
`meta["xnn_quant"]`. dq(int8 constant) -> an int8 constant; dq -> int8 op -> [activation] -> q -> the
op on int8 (those q/dq go); q(dq(v)) at v's parameters -> v; choose_qparams -> q -> dq -> linear or
convolution -> a Convert to qdint8 the layer reads (per row; per image for convolutions); any other
q/dq -> a Convert."""

from __future__ import annotations

import torch
from torch import fx

from executorch.backends.xnnpack._passes.fold import new_constant
from executorch.backends.xnnpack.partition.config import computes_in_int8
from executorch.backends.xnnpack.utils import quant_utils as qu
from executorch.exir.error import ExportError

aten = torch.ops.aten

# Their bias (argument 2) stays float here; the visitor quantizes it to int32.
_GEMMS = (aten.convolution.default, aten.linear.default)

# Ops written on int8 only with the output's quantization equal to each input's: the published runtime's
# XNNPACK refuses an int8 Copy that requantizes (invalid parameter; a pad too, but pads stay float here).
# Reshapes, slices, concatenation and max pooling are held to it as well, unverified either way; a
# requantizing Clamp or StaticTranspose it takes, so activations and permutes are not.
_SAME_PARAMS = {"clone.default", "_clone_dim_order.default", "_to_dim_order_copy.default", "slice_copy.Tensor",
                "select_copy.int", "squeeze_copy.dims", "unsqueeze_copy.default", "view_copy.default", "cat.default",
                "max_pool2d.default", "max_pool2d_with_indices.default"}


# Binary ops: XNNPACK computes one on int8 only when both operands are int8 values. A Python number
# operand (`x - 0.012`; pt2e leaves it unquantized) keeps the op float between a Convert in and a
# Convert out, as the published exporter writes it: an int8 op reading a float constant is refused at
# load by the published runtime.
_BINARY = {"add.Tensor", "add.Scalar", "sub.Tensor", "sub.Scalar", "mul.Tensor", "mul.Scalar", "div.Tensor",
           "maximum.default", "minimum.default"}


def _params(node, consts):
    return qu.static_params(node, consts.get)


def _quantized_source(arg):
    """The int8 value an op input reads: a dq's input, or a node already holding int8."""
    if not isinstance(arg, fx.Node):
        return None
    if qu.is_dequant(arg) and isinstance(arg.args[0], fx.Node) and "xnn_quant" in arg.args[0].meta:
        return arg.args[0]
    return arg if "xnn_quant" in arg.meta else None


def _lower_dynamic(node: fx.Node) -> None:
    """A fully connected layer or convolution on a dynamically quantized input: it reads the qdint8 value."""
    src = _quantized_source(node.args[0])
    if src is not None and src.meta["xnn_quant"].dynamic and "xnn_quant" in node.args[1].meta:
        node.replace_input_with(node.args[0], src)


def _lower_op(node: fx.Node, consts: dict) -> None:
    q = qu.output_quant(node)
    params = _params(q, consts) if q is not None else None
    if q is None and node.target in _GEMMS:
        _lower_dynamic(node)
        return
    if not qu.is_int8(params):
        return
    if getattr(node.target, "__name__", "") in _BINARY and not all(isinstance(a, fx.Node) for a in node.args[:2]):
        return
    swaps = {}
    for i, arg in enumerate(node.args):
        for a in arg if isinstance(arg, (list, tuple)) else [arg]:
            if not isinstance(a, fx.Node) or (i == 2 and node.target in _GEMMS and a in consts):
                continue
            src = _quantized_source(a)
            if src is None:
                return
            swaps[a] = src
    if getattr(node.target, "__name__", "") in _SAME_PARAMS and any(
            src.meta["xnn_quant"].key() != params.key() for src in swaps.values()):
        # A requantizing copy: the op stays float between its dq and q, which become Converts.
        return
    for old, new in swaps.items():
        if old is not new:
            node.replace_input_with(old, new)
    node.meta["xnn_quant"] = params


def absorb_quant(graph: fx.Graph, consts: dict) -> None:
    for node in list(graph.nodes):
        if qu.is_dequant(node) and node.args[0] in consts:
            params = _params(node, consts)
            if params is None and qu.qd_name(node) in qu.DEQUANTIZE_AFFINE:
                raise ExportError(f"XNNPACK: weight '{node.args[0].name}' is not symmetric int8/int4 with whole "
                                  "groups of input channels; quantize it symmetrically (zero points 0)")
            if params is not None:
                const = new_constant(graph, consts, f"{node.name}_int8", consts[node.args[0]])
                const.meta["xnn_quant"] = params
                node.replace_all_uses_with(const)
                graph.erase_node(node)
    for node in list(graph.nodes):
        if node.op == "placeholder" and node not in consts and node.meta["val"].dtype == torch.int8:
            # An int8 input (its q is outside the partition): the parameters of the dq reading it.
            dq = next((u for u in node.users if qu.is_dequant(u)), None)
            params = _params(dq, consts) if dq is not None else None
            if params is not None:
                node.meta["xnn_quant"] = params
        elif qu.is_quant(node) and qu.is_dynamic(node):
            # Quantized per row at run time (a Convert to qdint8): the choose_qparams feeding it goes.
            per_image = qu.only_read_by(node, "convolution.default")
            node.args, node.kwargs = (node.args[0],), {}
            node.meta["xnn_quant"] = qu.DYNAMIC_PER_IMAGE if per_image else qu.DYNAMIC
        elif qu.is_quant(node):
            params = _params(node, consts)
            if params is None:
                continue
            src = node.args[0]
            if qu.is_dequant(src) and "xnn_quant" in src.args[0].meta:
                src = src.args[0]  # q(dq(v)) at v's own parameters is v
            if isinstance(src, fx.Node) and src.meta.get("xnn_quant") is not None and (
                    src.meta["xnn_quant"].key() == params.key()):
                node.replace_all_uses_with(src)
                graph.erase_node(node)
            else:
                node.meta["xnn_quant"] = params
        elif node.op == "call_function" and computes_in_int8(node):
            _lower_op(node, consts)
    graph.eliminate_dead_code()
