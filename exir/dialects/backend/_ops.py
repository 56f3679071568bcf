"""Backend-dialect operators: a backend's own ops (Arm's `tosa.*`), in edge graphs after its passes.

A library registers its namespace in `_BACKEND_OP_LIB`; `exir_ops.backend.<namespace>.<op>.<overload>`
is then a `BackendOpOverload`, an edge op whose torch operator must have a kernel fake tensors can
run (Meta or a composite one), so graphs holding it retrace.
"""

from __future__ import annotations

import torch
from torch._C import DispatchKey

from executorch.exir.dialects.edge._ops import EdgeOpOverload, EdgeOpOverloadPacket

# Namespaces whose operators are backend ops (a backend appends its library's namespace).
_BACKEND_OP_LIB: list[str] = ["executorch_prim", "quantized_decomposed", "DO_NOT_USE_TEST_ONLY"]


class BackendOpOverload(EdgeOpOverload):
    """An edge op that only a backend's passes put in a graph."""

    def __init__(self, op: torch._ops.OpOverload, schema=None) -> None:
        super().__init__(op, schema)
        keys = (DispatchKey.Meta, DispatchKey.CompositeExplicitAutograd, DispatchKey.CompositeImplicitAutograd)
        if not any(op.has_kernel_for_dispatch_key(k) for k in keys):
            raise RuntimeError(f"backend op {self.__name__} has no Meta or composite kernel, so graphs holding it "
                               "cannot be retraced; register one (torch.library.register_fake)")


class BackendOpOverloadPacket(EdgeOpOverloadPacket):
    """`exir_ops.backend.tosa.RESCALE`: the backend overloads of one operator packet."""

    _overload_class = BackendOpOverload

    def __repr__(self) -> str:
        return (f"<BackendOpOverloadPacket(op='{self.__name__}', "
                f"parent_op='{self._parent_qualified_op_name.replace('::', '.')}')>")
