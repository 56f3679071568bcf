"""Node visitors: each edge op XNNPACK takes, written as XNNGraph nodes (one table, `visitors()`)."""

from __future__ import annotations


def visitors() -> dict:
    """op overload -> visitor(builder, node); the op modules register themselves on import."""
    from executorch.backends.xnnpack.operators import op_conv, op_elementwise, op_gemm, op_pool, op_shape  # noqa: F401
    from executorch.backends.xnnpack.operators.node_visitor import VISITORS

    return VISITORS


def visitor_for(node):
    """The visitor writing `node` (None when XNNPACK has no form for it): a quantize/dequantize
    preprocess left in place is a Convert (pt2e's q/dq ops are matched by name, see quant_utils)."""
    from executorch.backends.xnnpack.operators.op_elementwise import convert
    from executorch.backends.xnnpack.utils import quant_utils as qu

    visit = visitors().get(node.target)
    if visit is None and (qu.is_quant(node) or qu.is_dequant(node)):
        return convert
    return visit
