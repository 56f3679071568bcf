"""Edge-dialect passes: functional `*_copy` view ops, dim-order copies, and the op check."""

from __future__ import annotations

import operator

import torch
from torch import fx

from ..dialects import _ops as _dim_order_ops  # noqa: F401  (registers dim_order_ops::*)
from ..dialects._ops import dim_order_for
from ..error import ExportError
from ._graph import fake_mode_of, source_line

aten = torch.ops.aten

_VIEW_TO_COPY = {
    aten.view.default: aten.view_copy.default,
    aten.permute.default: aten.permute_copy.default,
    aten.expand.default: aten.expand_copy.default,
    aten.unsqueeze.default: aten.unsqueeze_copy.default,
    aten.squeeze.dim: aten.squeeze_copy.dim,
    aten.squeeze.dims: aten.squeeze_copy.dims,
    aten.squeeze.default: aten.squeeze_copy.default,
    aten.slice.Tensor: aten.slice_copy.Tensor,
    aten.select.int: aten.select_copy.int,
    aten.alias.default: aten.alias_copy.default,
    aten.t.default: aten.t_copy.default,
    aten.transpose.int: aten.transpose_copy.int,
    aten.split.Tensor: aten.split_copy.Tensor,
    aten.split_with_sizes.default: aten.split_with_sizes_copy.default,
    aten.unbind.int: aten.unbind_copy.int,
    aten.diagonal.default: aten.diagonal_copy.default,
    aten.unfold.default: aten.unfold_copy.default,
    aten._unsafe_view.default: aten.view_copy.default,
    aten.as_strided.default: aten.as_strided_copy.default,
}

# sym ops the runtime evaluates as prim ops
_SYM_OPS = {aten.sym_size.int, aten.sym_numel.default, aten.sym_storage_offset.default, aten.sym_stride.int,
            operator.add, operator.sub, operator.mul, operator.floordiv, operator.truediv, operator.mod,
            operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge, operator.neg}

_SUPPORTED_DTYPES = {torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
                     torch.int16, torch.int32, torch.int64, torch.bool, torch.uint16, torch.uint32, torch.uint64}


def to_functional_copies(gm: fx.GraphModule) -> None:
    """Replace view ops by their functional `*_copy` twins, which the runtime implements.
    A copy's result is dense, unlike the view's, so its metadata is computed anew."""
    fake_mode = None
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in _VIEW_TO_COPY:
            node.target = _VIEW_TO_COPY[node.target]
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


def is_edge_op(target) -> bool:
    if target is operator.getitem or target in _SYM_OPS or target is torch.ops.higher_order.cond:
        return True
    if getattr(target, "__name__", None) == "executorch_call_delegate":
        return True
    if not isinstance(target, torch._ops.OpOverload):
        return False
    if target.namespace == "dim_order_ops":
        return True
    return (torch.Tag.core in target.tags or torch.Tag.view_copy in target.tags) and not target._schema.is_mutable


def graph_modules(gm: fx.GraphModule) -> list[fx.GraphModule]:
    """The graph module and those of its control-flow branches, outermost first."""
    found = [gm]
    for node in gm.graph.nodes:
        if node.op == "get_attr" and isinstance(getattr(gm, node.target, None), fx.GraphModule):
            found += graph_modules(getattr(gm, node.target))
    return found


def check_edge_ops(gm: fx.GraphModule, method: str) -> None:
    """Every op must be in the edge op set; name the first that isn't, where the user wrote it."""
    for sub in graph_modules(gm)[1:]:
        check_edge_ops(sub, method)
    for node in gm.graph.nodes:
        if node.op == "call_function" and not is_edge_op(node.target):
            where = source_line(node)
            raise ExportError(
                f"method '{method}': operator {_op_name(node.target)} (node '{node.name}'"
                f"{', from ' + where if where else ''}) is not in the supported edge op set (core ATen); "
                "rewrite that code with core ATen ops, or pass EdgeCompileConfig(_check_ir_validity=False) "
                "to skip this check at your own risk"
            )


def check_values(gm: fx.GraphModule, method: str) -> None:
    """Every tensor must have a dtype the runtime knows."""
    for node in gm.graph.nodes:
        v = node.meta.get("val")
        for t in v if isinstance(v, (list, tuple)) else [v]:
            if isinstance(t, torch.Tensor) and t.dtype not in _SUPPORTED_DTYPES:
                where = source_line(node)
                raise ExportError(
                    f"method '{method}': node '{node.name}'{' (' + where + ')' if where else ''} produces a "
                    f"{t.dtype} tensor, which .pte programs cannot hold; convert it to a supported dtype "
                    f"({', '.join(sorted(str(d).removeprefix('torch.') for d in _SUPPORTED_DTYPES))})"
                )


def _op_name(target) -> str:
    if isinstance(target, torch._ops.OpOverload):
        return f"{target._schema.name}.{target._overloadname}"
    return getattr(target, "__name__", str(target))
