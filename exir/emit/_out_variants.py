"""Finding the out variant (`add.out`) of a functional op (`add.Tensor`), and the prim ops."""

from __future__ import annotations

import operator
from functools import lru_cache
from typing import Optional

import torch
from torch import fx

from ..error import ExportError
from ..passes._graph import source_line

# Python-level symbolic arithmetic on sizes, run by the runtime's prim ops.
_PRIM_OPS = {
    torch.ops.aten.sym_size.int: "aten::sym_size.int",
    torch.ops.aten.sym_numel.default: "aten::sym_numel",
    operator.add: "executorch_prim::add.Scalar",
    operator.sub: "executorch_prim::sub.Scalar",
    operator.mul: "executorch_prim::mul.Scalar",
    operator.floordiv: "executorch_prim::floordiv.Scalar",
    operator.truediv: "executorch_prim::truediv.Scalar",
    operator.mod: "executorch_prim::mod.Scalar",
    operator.eq: "executorch_prim::eq.Scalar",
    operator.gt: "executorch_prim::gt.Scalar",
    operator.lt: "executorch_prim::lt.Scalar",
    operator.ge: "executorch_prim::ge.Scalar",
    operator.le: "executorch_prim::le.Scalar",
    operator.neg: "executorch_prim::neg.Scalar",
}


def prim_op_name(target) -> Optional[str]:
    """The runtime name of a prim op (size arithmetic), or None for ordinary ops."""
    return _PRIM_OPS.get(target)


def _arg_key(schema) -> tuple:
    return tuple((a.name, str(a.type)) for a in schema.arguments if not a.is_out)


@lru_cache(maxsize=None)
def _find_out(op: torch._ops.OpOverload) -> Optional[tuple[str, str]]:
    schema = op._schema
    want = _arg_key(schema)
    packet = op.overloadpacket
    for name in packet.overloads():
        cand = getattr(packet, name)._schema
        outs = [a for a in cand.arguments if a.is_out]
        if outs and len(outs) == len(schema.returns) and _arg_key(cand) == want:
            return schema.name, cand.overload_name
    return None


def out_variant(op, node: fx.Node, method: str) -> tuple[str, str]:
    """(operator name, overload) of the out variant the runtime runs for `op`."""
    found = _find_out(op) if isinstance(op, torch._ops.OpOverload) else None
    if found is None:
        where = source_line(node)
        name = f"{op._schema.name}.{op._overloadname}" if isinstance(op, torch._ops.OpOverload) else str(op)
        raise ExportError(
            f"method '{method}': operator {name} (node '{node.name}'{', from ' + where if where else ''}) has no "
            "out variant, so no ExecuTorch kernel can run it; rewrite that code with other ops"
        )
    return found
