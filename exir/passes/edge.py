"""Edge-dialect passes: functional `*_copy` view ops, dim-order copies, and the op check."""

from __future__ import annotations

import torch
from torch import fx

from executorch.exir._dtypes import exportable_names, is_exportable
from executorch.exir.dialects._edge_ops import (VIEW_TO_COPY, find_out_variant, functionalized_op, is_edge_op,
                                                why_not_edge_op)
from executorch.exir.dialects import _quantized_ops  # noqa: F401  (pt2e q/dq out variants, so q/dq are edge ops)
from executorch.exir.dialects._ops import dim_order_for
from executorch.exir.dialects.edge._ops import aten_op
from executorch.exir.error import ExportError
from executorch.exir.passes._graph import fake_mode_of, source_line

aten = torch.ops.aten


def to_functional_copies(gm: fx.GraphModule) -> None:
    """Replace view ops by their functional `*_copy` twins, which the runtime implements.
    A copy's result is dense, unlike the view's, so its metadata is computed anew."""
    fake_mode = None
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in VIEW_TO_COPY:
            node.target = VIEW_TO_COPY[node.target]
            fake_mode = fake_mode or fake_mode_of(gm.graph)
            view = node.meta.get("val")
            if isinstance(view, torch.Tensor):
                with fake_mode:
                    node.meta["val"] = view.clone(memory_format=torch.contiguous_format)
            elif isinstance(view, (list, tuple)):  # split, unbind: a list of views
                with fake_mode:
                    node.meta["val"] = type(view)(v.clone(memory_format=torch.contiguous_format) for v in view)


def to_dim_order_ops(gm: fx.GraphModule) -> None:
    """`clone` and `_to_copy` become `dim_order_ops::*` carrying the output's dim order."""
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target not in (aten.clone.default, aten._to_copy.default):
            continue
        kwargs = dict(node.kwargs)
        fmt = kwargs.pop("memory_format", None)
        out = node.meta["val"]
        kwargs["dim_order"] = dim_order_for(out, fmt if fmt not in (None, torch.preserve_format) else None)
        if node.target is aten.clone.default:
            node.target = torch.ops.dim_order_ops._clone_dim_order.default
            kwargs.pop("non_blocking", None)
        else:
            node.target = torch.ops.dim_order_ops._to_dim_order_copy.default
            for k in ("layout", "device", "pin_memory"):
                kwargs.pop(k, None)
        node.kwargs = kwargs


def graph_modules(gm: fx.GraphModule) -> list[fx.GraphModule]:
    """The graph module and those of its control-flow branches, outermost first."""
    found = [gm]
    for node in gm.graph.nodes:
        if node.op == "get_attr" and isinstance(getattr(gm, node.target, None), fx.GraphModule):
            found += graph_modules(getattr(gm, node.target))
    return found


def check_edge_ops(gm: fx.GraphModule, method: str, preserved: frozenset = frozenset()) -> None:
    """Every op must be in the edge op set or kept whole on purpose (`preserved`, checked by
    `check_preserve_ops`); name the first that isn't, where the user wrote it."""
    for sub in graph_modules(gm)[1:]:
        check_edge_ops(sub, method, preserved)
    for node in gm.graph.nodes:
        if node.op == "call_function" and not is_edge_op(node.target) and aten_op(node.target) not in preserved:
            where = source_line(node)
            raise ExportError(
                f"method '{method}': operator {_op_name(node.target)} (node '{node.name}'"
                f"{', from ' + where if where else ''}) {why_not_edge_op(node.target)}"
            )
        wrapped = functionalized_op(node)
        if wrapped is not None and find_out_variant(wrapped) is None:
            where = source_line(node)
            raise ExportError(
                f"method '{method}': operator {_op_name(wrapped)} (node '{node.name}'"
                f"{', from ' + where if where else ''}) writes its inputs and has no out variant, so no ExecuTorch "
                "kernel can run it; define an .out overload with the same arguments plus Tensor(a!) out with "
                "torch.library, and register a kernel for it")


def check_preserve_ops(ops) -> None:
    """`EdgeCompileConfig.preserve_ops` may name only functional operators that have an out
    variant, for which a runtime kernel can exist; refuse any other, naming it."""
    for op in ops:
        if not isinstance(op, torch._ops.OpOverload):
            raise ExportError(
                f"EdgeCompileConfig.preserve_ops holds {op!r}, which is not an operator overload; name one like "
                "torch.ops.aten.linear.default"
            )
        name = _op_name(op)
        if op._schema.is_mutable:
            raise ExportError(
                f"EdgeCompileConfig.preserve_ops: {name} writes its inputs, so it cannot be kept whole in an edge "
                "graph; preserve its functional form instead"
            )
        if find_out_variant(op) is None:
            raise ExportError(
                f"EdgeCompileConfig.preserve_ops: {name} has no out variant, so no ExecuTorch kernel can run it "
                "whole; remove it from preserve_ops (it is then decomposed), or lower it to a backend"
            )


def check_values(gm: fx.GraphModule, method: str) -> None:
    """Every tensor must have a dtype the runtime knows."""
    for node in gm.graph.nodes:
        v = node.meta.get("val")
        for t in v if isinstance(v, (list, tuple)) else [v]:
            if isinstance(t, torch.Tensor) and not is_exportable(t.dtype):
                where = source_line(node)
                raise ExportError(
                    f"method '{method}': node '{node.name}'{' (' + where + ')' if where else ''} produces a "
                    f"{t.dtype} tensor, which .pte programs cannot hold; convert it to a supported dtype "
                    f"({', '.join(exportable_names())})"
                )


def _op_name(target) -> str:
    if isinstance(target, torch._ops.OpOverload):
        return f"{target._schema.name}.{target._overloadname}"
    return getattr(target, "__name__", str(target))
