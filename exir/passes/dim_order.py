"""Dim orders the runtime can hold: tensor layouts re-derived once views are dense copies.

A `.pte` tensor's dim order is read from its node's fake-tensor strides. Torch computes those
strides for the exported graph, where `permute` is a view and `mul` of a permuted view keeps
the view's strides; in the edge graph `permute_copy` writes a dense tensor, so every node
downstream of a former view must have its layout computed again, or the stale order ([2, 0, 1, 3])
reaches the file. ExecuTorch kernels hold only contiguous tensors and channels-last 4-D/5-D ones,
and most need all tensors of one call in the same one.
"""

from __future__ import annotations

import operator
from typing import Any, Iterable

import torch
from torch import fx

from executorch.exir import schema as S
from executorch.exir.error import ExportError
from executorch.exir.passes._graph import fake_mode_of, val


def holdable(t: torch.Tensor) -> bool:
    """Whether the runtime's kernels accept `t`'s layout: contiguous, or channels-last."""
    if t.is_contiguous():
        return True
    return (t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last)) or (
        t.dim() == 5 and t.is_contiguous(memory_format=torch.channels_last_3d))


def dense_layouts(gm: fx.GraphModule, constants: Iterable[str] = ()) -> None:
    """Recompute the fake values downstream of every functional view copy, so each node's strides
    are those its kernel will write. Constants (placeholder names in `constants`) become contiguous,
    as their bytes are stored; inputs keep a contiguous or channels-last layout, any other becomes
    contiguous."""
    _propagate(gm, fake_mode_of(gm.graph), set(constants), {})


def _propagate(gm: fx.GraphModule, fake_mode, constants: set[str], inputs: dict[int, Any]) -> list:
    """Walk `gm` in order, re-running every node one of whose inputs changed layout. `inputs` gives
    new values for placeholders by position (a branch's operands). Returns the output values."""
    changed: set[fx.Node] = set()
    position = 0
    for node in gm.graph.nodes:
        old = node.meta.get("val")
        if node.op == "placeholder":
            new = inputs.get(position, old)
            position += 1
            if (isinstance(new, torch.Tensor) and (node.name in constants or not holdable(new))
                    and not new.is_contiguous()):
                with fake_mode:
                    new = new.clone(memory_format=torch.contiguous_format)
        elif node.op == "call_function" and _is_view_copy(node.target):
            changed.add(node)  # its value was made dense when the view became a copy
            continue
        elif node.op == "call_function" and (node.target is torch.ops.higher_order.cond
                                             or any(a in changed for a in node.all_input_nodes)):
            new = _rerun(gm, node, fake_mode)
        elif node.op == "output":
            return [a.meta.get("val") if isinstance(a, fx.Node) else a for a in node.args[0]]
        else:
            continue
        if new is not old and _strides(new) != _strides(old):
            node.meta["val"] = new
            changed.add(node)
    return []


def _is_view_copy(target) -> bool:
    return isinstance(target, torch._ops.OpOverload) and torch.Tag.view_copy in target.tags


def _rerun(gm: fx.GraphModule, node: fx.Node, fake_mode) -> Any:
    old = node.meta.get("val")
    target = node.target
    if target is operator.getitem:
        return val(node.args[0])[node.args[1]]
    if target is torch.ops.higher_order.cond:
        _, true_ref, false_ref, operands = node.args
        new_operands = {i: val(a) for i, a in enumerate(operands)}
        # Branches hold views of their own, and see the operands' new layouts.
        outs = _propagate(getattr(gm, true_ref.target), fake_mode, set(), new_operands)
        _propagate(getattr(gm, false_ref.target), fake_mode, set(), new_operands)
        return type(old)(outs) if isinstance(old, (list, tuple)) and len(outs) == len(old) else old
    if not isinstance(target, torch._ops.OpOverload) or not _holds_tensor(old):
        return old  # size arithmetic: no layout
    try:
        with fake_mode:
            new = target(*val(node.args), **val(node.kwargs))
    except Exception:  # an op fake tensors cannot re-run; its layout is checked after emission
        return old
    return new if _same_shapes(new, old) else old


def _holds_tensor(v: Any) -> bool:
    return isinstance(v, torch.Tensor) or (isinstance(v, (list, tuple)) and any(isinstance(t, torch.Tensor) for t in v))


def _tensors(v: Any) -> list:
    return [t for t in (v if isinstance(v, (list, tuple)) else [v])]


def _strides(v: Any) -> list:
    # Compared as text: comparing symbolic strides would add guards to the shape environment.
    return [[str(s) for s in t.stride()] if isinstance(t, torch.Tensor) else None for t in _tensors(v)]


def _same_shapes(new: Any, old: Any) -> bool:
    # Data-dependent ops re-run get fresh unbacked sizes; keep the graph's own symbols then.
    a, b = _tensors(new), _tensors(old)
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return False
        if isinstance(x, torch.Tensor) and [str(s) for s in x.shape] != [str(s) for s in y.shape]:
            return False
    return True


# Ops whose out variant changes the layout: its dim_order argument names the output's order.
_CONVERTING = {"dim_order_ops::_to_dim_order_copy", "dim_order_ops::_clone_dim_order",
               "dim_order_ops::_empty_dim_order"}
# Arguments (by position) a kernel accepts in either layout, apart from the rest.
_FREE_ARGS = {"aten::convolution": {1, 2}}  # weight, bias
# Kernels that read their tensors in the contiguous order only (the published portable
# kernels check this and refuse channels-last).
_CONTIGUOUS_ONLY = {
    f"aten::{name}" for name in (
        "_adaptive_avg_pool2d", "_cdist_forward", "_pdist_forward", "_to_copy", "addmm", "arange",
        "as_strided_copy", "avg_pool2d", "bmm", "diagonal_copy", "embedding", "expand_copy", "full_like",
        "index", "index_put", "index_select", "mean", "mm", "native_group_norm", "native_layer_norm",
        "pixel_shuffle", "reflection_pad1d", "reflection_pad2d", "reflection_pad3d", "repeat",
        "repeat_interleave", "squeeze_copy", "stack", "sum", "t_copy", "tril", "unbind_copy", "var",
        "view_copy")
}


def is_contiguous_order(order) -> bool:
    return list(order) == list(range(len(order)))


def is_channels_last_order(order) -> bool:
    n = len(order)
    return n in (4, 5) and list(order) == [0, *range(2, n), 1]


def check_plan(plan) -> None:
    """Every tensor value of an emitted plan has a dim order the runtime's kernels hold, and
    every kernel call's tensors share one where the kernel requires it."""
    writer: dict[int, str] = {}
    calls = []
    for i, instr in enumerate(plan.chains[0].instructions if plan.chains else []):
        args = instr.instr_args
        if isinstance(args, S.KernelCall):
            op = plan.operators[args.op_index]
            name = f"{op.name}.{op.overload}" if op.overload else op.name
            for v in args.args:
                writer.setdefault(v, f"instruction {i} ({name})")
            calls.append((i, op.name, name, args.args))
    where = f"method '{plan.name}'"
    for idx, ev in enumerate(plan.values):
        t = ev.val
        if isinstance(t, S.Tensor) and not (is_contiguous_order(t.dim_order) or is_channels_last_order(t.dim_order)):
            used = writer.get(idx, "an input or constant")
            raise ExportError(
                f"{where}: tensor value {idx} (sizes {list(t.sizes)}, used by {used}) has dim order "
                f"{list(t.dim_order)}; ExecuTorch kernels hold only contiguous tensors and channels-last 4-D/5-D "
                "ones; a pass left a stale layout in the node's meta['val']: recompute it, or make the tensor "
                "contiguous with .contiguous()"
            )
    for i, op, name, args in calls:
        if op in _CONVERTING:
            continue
        tensors = _call_tensors(plan, args, _FREE_ARGS.get(op, set()))
        orders = [list(plan.values[v].val.dim_order) for v in tensors]
        if op in _CONTIGUOUS_ONLY:
            ok = all(is_contiguous_order(o) for o in orders)
            need = "all of its tensors contiguous"
        else:
            ok = all(is_contiguous_order(o) for o in orders) or all(is_channels_last_order(o) for o in orders)
            need = "all of its tensors contiguous, or all channels-last"
        if not ok:
            shown = ", ".join(f"value {v}: {o}" for v, o in zip(tensors, orders))
            raise ExportError(
                f"{where}: instruction {i} ({name}) gets tensors in different dim orders ({shown}); its kernel "
                f"needs {need}; convert the odd one first, e.g. x.contiguous() or "
                "x.to(memory_format=torch.channels_last)"
            )


def _call_tensors(plan, args: list[int], free: set[int]) -> list[int]:
    """The tensor values a kernel call reads or writes that must share a layout, in order, once each.
    Index lists (optional tensors) are read by position only and are left out."""
    found: list[int] = []
    for pos, v in enumerate(args):
        if pos in free:
            continue
        val = plan.values[v].val
        items = val.items if isinstance(val, S.TensorList) else [v] if isinstance(val, S.Tensor) else []
        for t in items:
            if t not in found:
                found.append(t)
    return found
