"""Size arithmetic in the forms ExecuTorch's prim kernels take (`a != b` as `not (a == b)`, `round(a)`)."""

from __future__ import annotations

import builtins
import operator

import torch
from torch import fx

from executorch.exir.error import ExportError
from executorch.exir.passes._graph import source_line


def _val(a):
    return a.meta.get("val") if isinstance(a, fx.Node) else a


def ne_as_not_eq(gm: fx.GraphModule) -> None:
    """`operator.ne` on sizes becomes `sym_not(eq)`: ExecuTorch runtimes (the published one too) have
    `executorch_prim::eq` and `sym_not` kernels but no `ne`."""
    changed = False
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target is not operator.ne:
            continue
        with gm.graph.inserting_before(node):
            eq = gm.graph.call_function(operator.eq, node.args)
            eq.meta = dict(node.meta)
            eq.meta["val"] = operator.eq(*(_val(a) for a in node.args))
            negated = gm.graph.call_function(torch.sym_not, (eq,))
            negated.meta = dict(node.meta)
        node.replace_all_uses_with(negated)
        gm.graph.erase_node(node)
        changed = True
    if changed:
        gm.recompile()


def round_to_int(gm: fx.GraphModule, method: str) -> None:
    """`round(a, None)` (how torch records `round(a)`) becomes `round(a)`, the prim kernel's one
    argument; rounding to digits has no prim kernel."""
    changed = False
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is not builtins.round or len(node.args) < 2:
            continue
        if node.args[1] is not None:
            where = source_line(node)
            raise ExportError(
                f"method '{method}': round(..., {node.args[1]!r}) on a size (node '{node.name}'"
                f"{', from ' + where if where else ''}) has no ExecuTorch prim kernel; round to an integer, "
                "or compute it on a tensor")
        node.args = node.args[:1]
        changed = True
    if changed:
        gm.recompile()
