"""DimOrderOpsRevertPass: an edge graph's dim-order copies back to torch's memory-format operators (ExecuTorch's
`exir.passes.memory_format_ops_pass`; OpenVINO's preprocess runs it before its converter reads the graph)."""

from __future__ import annotations

import functools

from executorch.exir.dialects.edge._ops import EdgeOpOverload
from executorch.exir.dim_order_utils import get_memory_format
from executorch.exir.pass_base import ExportPass, ProxyValue

__all__ = ["DimOrderOpsRevertPass"]


@functools.lru_cache(maxsize=None)
def _reverted() -> dict:
    from executorch.exir.dialects._ops import ops as exir_ops

    edge = exir_ops.edge
    return {edge.dim_order_ops._to_dim_order_copy.default: edge.aten._to_copy.default,
            edge.dim_order_ops._clone_dim_order.default: edge.aten.clone.default}


class DimOrderOpsRevertPass(ExportPass):
    """`dim_order_ops._to_dim_order_copy` and `_clone_dim_order` become `aten._to_copy` and `aten.clone` with the
    memory format of their dim order (none given: contiguous); an order no memory format has is an AssertionError."""

    def call_operator(self, op, args, kwargs, meta):
        target = _reverted().get(op) if isinstance(op, EdgeOpOverload) else None
        if target is None:
            return super().call_operator(op, args, kwargs, meta)
        x = args[0]
        ndim = (x.to_tensor() if isinstance(x, ProxyValue) else x).dim()
        kwargs = dict(kwargs)
        kwargs["memory_format"] = get_memory_format(kwargs.pop("dim_order", list(range(ndim))))
        return super().call_operator(target, args, kwargs, meta)
