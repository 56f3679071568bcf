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


# Tensor options of factory-like ops: an out variant has none, the out tensor carries them.
_TENSOR_OPTIONS = {"dtype", "layout", "device", "pin_memory", "memory_format"}


def _arg_key(schema, drop_options: bool) -> tuple:
    return tuple((a.name, str(a.type)) for a in schema.arguments
                 if not a.is_out and not (drop_options and a.name in _TENSOR_OPTIONS))


@lru_cache(maxsize=None)
def _find_out(op: torch._ops.OpOverload) -> Optional[torch._ops.OpOverload]:
    schema = op._schema
    packet = op.overloadpacket
    candidates = [getattr(packet, name) for name in packet.overloads()]
    candidates = [c for c in candidates if any(a.is_out for a in c._schema.arguments)]
    # Exact argument match first; then the same arguments less the tensor options.
    for drop in (False, True):
        want = _arg_key(schema, drop)
        for cand in candidates:
            outs = [a for a in cand._schema.arguments if a.is_out]
            n_out = len(outs) if not str(outs[0].type).startswith("List") else len(schema.returns)
            if n_out == len(schema.returns) and _arg_key(cand._schema, drop) == want:
                return cand
    return None


def out_variant(op, node: fx.Node, method: str) -> torch._ops.OpOverload:
    """The out-variant overload the runtime runs for `op`."""
    found = _find_out(op) if isinstance(op, torch._ops.OpOverload) else None
    if found is None:
        where = source_line(node)
        name = f"{op._schema.name}.{op._overloadname}" if isinstance(op, torch._ops.OpOverload) else str(op)
        raise ExportError(
            f"method '{method}': operator {name} (node '{node.name}'{', from ' + where if where else ''}) has no "
            "out variant, so no ExecuTorch kernel can run it; rewrite that code with other ops"
        )
    return found
