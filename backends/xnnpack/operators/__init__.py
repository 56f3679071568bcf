"""Node visitors: each edge op XNNPACK takes, written as XNNGraph nodes (one table, `visitors()`)."""

from __future__ import annotations


def visitors() -> dict:
    """op overload -> visitor(builder, node); the op modules register themselves on import."""
    from executorch.backends.xnnpack.operators import op_conv, op_elementwise, op_gemm, op_pool, op_shape  # noqa: F401
    from executorch.backends.xnnpack.operators.node_visitor import VISITORS

    return VISITORS
