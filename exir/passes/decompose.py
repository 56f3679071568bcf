"""Core-ATen decomposition: direct rewrites for the common ops, torch's decomposer for the rest.

`ExportedProgram.run_decompositions()` retraces the whole graph and costs seconds on a
MobileNet-sized model. Most exported graphs only hold a handful of composite ops (conv2d,
linear, batch_norm, in-place activations, ...) whose core-ATen form is a fixed local
rewrite, so those are rewritten in place, producing the same nodes torch's decomposer
would. The nodes left over go to torch's decomposer (exir/passes/torch_decompose.py).
"""

from __future__ import annotations

import functools
import math
import operator
from typing import Callable, Optional

import torch
from torch import fx
from torch.fx.experimental.symbolic_shapes import statically_known_true

from executorch.exir.dialects._edge_ops import CORE_VIEWS, TRACE_ASSERTS, is_final
from executorch.exir.passes._graph import fake_mode_of, insert_call, val

aten = torch.ops.aten

def _ints(v, n: int) -> list[int]:
    if not isinstance(v, (list, tuple)):
        return [v] * n
    return list(v) * n if len(v) == 1 else list(v)


def _all_args(node: fx.Node) -> list:
    """Every schema argument of the node's op, from its args, its kwargs, or the default."""
    out = []
    for i, a in enumerate(node.target._schema.arguments):
        if i < len(node.args):
            out.append(node.args[i])
        elif a.name in node.kwargs:
            out.append(node.kwargs[a.name])
        else:
            out.append(a.default_value if a.has_default_value() else None)
    return out


def _conv(nd: int):
    def rewrite(g, fm, node):
        x, w, b, stride, padding, dilation, groups = _all_args(node)
        if isinstance(padding, str):
            return None
        return insert_call(g, fm, aten.convolution.default,
                           (x, w, b, _ints(stride, nd), _ints(padding, nd), _ints(dilation, nd), False, [0] * nd,
                            groups),
                           like=node)
    return rewrite


def _linear(g, fm, node):
    x, w, b = _all_args(node)
    xv = x.meta["val"]
    if xv.dim() < 2 or not isinstance(xv.shape[-1], int):
        return None
    if xv.dim() == 2:
        wt = insert_call(g, fm, aten.permute.default, (w, [1, 0]), like=node)
        return insert_call(g, fm, aten.addmm.default if b is not None else aten.mm.default,
                           (b, x, wt) if b is not None else (x, wt), like=node)
    if not statically_known_true(xv.is_contiguous()):
        return None  # torch flattens only a contiguous input; a strided one goes through matmul
    # torch's order: with a bias the input is flattened, then the weight transposed (addmm); without,
    # the weight first (matmul's mm). Leading sizes that are symbolic are read from the input at run time.
    static = all(isinstance(s, int) for s in xv.shape)
    if b is None and static:
        return None  # torch's decomposer takes it alone (matmul's view, mm, view)
    rows = math.prod(xv.shape[:-1]) if static else -1
    if b is None:
        wt = insert_call(g, fm, aten.permute.default, (w, [1, 0]), like=node)
    flat = insert_call(g, fm, aten.view.default, (x, [rows, xv.shape[-1]]), like=node)
    if b is not None:
        wt = insert_call(g, fm, aten.permute.default, (w, [1, 0]), like=node)
    mm = insert_call(g, fm, aten.addmm.default if b is not None else aten.mm.default,
                     (b, flat, wt) if b is not None else (flat, wt), like=node)
    sizes = [s if isinstance(s, int) else insert_call(g, fm, aten.sym_size.int, (x, d), like=node)
             for d, s in enumerate(xv.shape[:-1])]
    return insert_call(g, fm, aten.view.default, (mm, [*sizes, node.meta["val"].shape[-1]]), like=node)


def _batch_norm(g, fm, node):
    x, w, b, mean, var, training, momentum, eps = _all_args(node)[:8]
    if training or mean is None or var is None:
        return None
    bn = insert_call(g, fm, aten._native_batch_norm_legit_no_training.default, (x, w, b, mean, var, momentum, eps),
                     like=node)
    return insert_call(g, fm, operator.getitem, (bn, 0), like=node)


def _layer_norm(g, fm, node):
    x, shape, w, b, eps = _all_args(node)[:5]
    ln = insert_call(g, fm, aten.native_layer_norm.default, (x, shape, w, b, eps), like=node)
    return insert_call(g, fm, operator.getitem, (ln, 0), like=node)


def _dropout(g, fm, node):
    if _all_args(node)[2]:
        return None
    return insert_call(g, fm, aten.clone.default, (node.args[0],), like=node)


def _static_shape(node: fx.Node) -> Optional[list[int]]:
    shape = list(node.meta["val"].shape)
    return shape if all(isinstance(s, int) for s in shape) else None


def _flatten(g, fm, node):
    shape = _static_shape(node)
    if shape is None or not node.args[0].meta["val"].is_contiguous():
        return None
    return insert_call(g, fm, aten.view.default, (node.args[0], shape), like=node)


def _reshape(g, fm, node):
    if not node.args[0].meta["val"].is_contiguous():
        return None
    # torch's decomposition spells a static shape out (no -1)
    shape = _static_shape(node) or list(node.args[1])
    return insert_call(g, fm, aten.view.default, (node.args[0], shape), like=node)


def _t(g, fm, node):
    if node.args[0].meta["val"].dim() != 2:
        return None
    return insert_call(g, fm, aten.permute.default, (node.args[0], [1, 0]), like=node)


def _transpose(g, fm, node):
    x, a, b = node.args
    n = x.meta["val"].dim()
    perm = list(range(n))
    perm[a % n], perm[b % n] = perm[b % n], perm[a % n]
    return insert_call(g, fm, aten.permute.default, (x, perm), like=node)


def _contiguous(g, fm, node):
    x = node.args[0]
    fmt = node.kwargs.get("memory_format", torch.contiguous_format)
    if fmt != torch.contiguous_format:
        return None
    if x.meta["val"].is_contiguous():
        return x
    return insert_call(g, fm, aten.clone.default, (x,), {"memory_format": torch.contiguous_format}, like=node)


def _adaptive_avg_pool2d(g, fm, node):
    x, size = node.args
    if list(size) == [1, 1]:
        return insert_call(g, fm, aten.mean.dim, (x, [-1, -2], True), like=node)
    return insert_call(g, fm, aten._adaptive_avg_pool2d.default, (x, list(size)), like=node)


def _to_dtype(g, fm, node):
    x, dtype = node.args[:2]
    if (len(node.args) > 2 or any(k not in ("non_blocking", "copy") for k in node.kwargs)
            or node.kwargs.get("non_blocking")):
        return None
    if x.meta["val"].dtype == dtype and not node.kwargs.get("copy", False):
        return x
    return insert_call(g, fm, aten._to_copy.default, (x,), {"dtype": dtype}, like=node)


_REWRITES: dict[object, Callable] = {
    aten.conv1d.default: _conv(1),
    aten.conv2d.default: _conv(2),
    aten.conv3d.default: _conv(3),
    aten.linear.default: _linear,
    aten.batch_norm.default: _batch_norm,
    aten.layer_norm.default: _layer_norm,
    aten.dropout.default: _dropout,
    aten.flatten.using_ints: _flatten,
    aten.reshape.default: _reshape,
    aten.t.default: _t,
    aten.transpose.int: _transpose,
    aten.contiguous.default: _contiguous,
    aten.adaptive_avg_pool2d.default: _adaptive_avg_pool2d,
    aten.to.dtype: _to_dtype,
}

def _inplace_functional(target):
    """The functional twin of an in-place aten op (`relu_` -> `relu`), or None."""
    if not isinstance(target, torch._ops.OpOverload) or target.namespace != "aten":
        return None
    name = target._schema.name.split("::")[1]
    if not name.endswith("_") or name.endswith("__"):
        return None
    packet = getattr(aten, name[:-1], None)
    functional = getattr(packet, target._overloadname, None) if packet is not None else None
    if functional is None or functional._schema.is_mutable or not is_final(functional):
        return None
    return functional


def _unsafe_inplace(node: fx.Node) -> bool:
    """An in-place op whose rewrite to its functional twin could be observed: rewriting
    `y = x.relu_()` as `y = relu(x)` is sound only when x is an intermediate, not an input, a
    buffer or a view of another tensor."""
    if node.op != "call_function" or _inplace_functional(node.target) is None:
        return False
    x = node.args[0]
    return not (isinstance(x, fx.Node) and x.op == "call_function" and x.target not in CORE_VIEWS)


def inplace_rewrites_sound(gm: fx.GraphModule) -> bool:
    """Whether every in-place op of the graph may be rewritten to its functional twin."""
    return not any(_unsafe_inplace(n) for n in gm.graph.nodes)


@functools.lru_cache(maxsize=None)
def _redone_by_torch() -> frozenset:
    """Edge ops torch's default decomposition still rewrites (`squeeze.dim` -> `squeeze.dims`, a
    `*_copy` view through its view): a node of one is decomposed like a composite op, as the
    whole-graph run would. Tensor-returning ops only (size queries stay prim ops)."""
    return frozenset(op for op in torch.export.default_decompositions().keys() if is_final(op)
                     and all(isinstance(r.type, torch.TensorType) for r in op._schema.returns))


def _kept_as_is(target) -> bool:
    return is_final(target) and target not in _redone_by_torch()


def has_rewrite(node: fx.Node) -> bool:
    """Whether the direct rewrites leave the node as it is or have a rewrite for it."""
    return (node.target in TRACE_ASSERTS or _kept_as_is(node.target) or node.target in _REWRITES
            or _inplace_functional(node.target) is not None)


class CannotRewrite(Exception):
    """The graph cannot be lowered node by node; torch's decomposer must retrace it whole."""


def _layout(v):
    if isinstance(v, torch.Tensor):
        return tuple(v.shape), v.stride(), v.storage_offset(), v.dtype
    if isinstance(v, (list, tuple)):
        return tuple(_layout(t) for t in v)
    return v


def _refresh(node: fx.Node, changed: set, fm) -> None:
    """Recompute the node's value when an input's layout changed (a decomposition may lay its
    result out otherwise than the composite op did), as a retrace of the graph would."""
    if not any(a in changed for a in node.all_input_nodes):
        return
    if node.target is operator.getitem:
        new = val(node.args[0])[node.args[1]]
    elif isinstance(node.target, torch._ops.OpOverload):
        try:
            with fm, torch.no_grad():
                new = node.target(*val(node.args), **val(node.kwargs))
        except RuntimeError as e:
            raise CannotRewrite(f"{node.name}: {e}") from e
    else:
        raise CannotRewrite(f"{node.target} after a decomposition that changed its input's layout")
    if _layout(new) != _layout(node.meta.get("val")):
        changed.add(node)
    node.meta["val"] = new


def rewrite_to_core_aten(gm: fx.GraphModule, keep: Optional[Callable[[fx.Node], bool]] = None,
                         decompose_node: Optional[Callable[[fx.Node], object]] = None) -> list[fx.Node]:
    """Apply the direct rewrites in place, leaving nodes `keep` accepts whole; `decompose_node`
    (when given) replaces a node no rewrite covers, returning what stands for its value (a node,
    or a list for a tuple result), or None. Returns the nodes left for torch's decomposer.
    Values downstream of a result laid out anew are recomputed, as a retrace would."""
    left = []
    g = gm.graph
    fm = fake_mode_of(g)
    order = {n: i for i, n in enumerate(g.nodes)}
    changed: set[fx.Node] = set()
    erased: set[fx.Node] = set()
    for node in list(g.nodes):
        if node.op != "call_function" or node in erased:
            continue
        if node.target in TRACE_ASSERTS:
            g.erase_node(node)
            continue
        if changed:
            _refresh(node, changed, fm)
        if _kept_as_is(node.target) or (keep is not None and keep(node)):
            continue
        fn = _inplace_functional(node.target)
        with g.inserting_before(node):
            if fn is not None:
                new = g.call_function(fn, node.args, node.kwargs)
                new.meta = dict(node.meta)
                x = node.args[0]
                for use in list(x.users):
                    if use is not node and order.get(use, -1) > order[node]:
                        use.replace_input_with(x, new)
            else:
                rewrite = _REWRITES.get(node.target)
                new = rewrite(g, fm, node) if rewrite else None
                if new is None and decompose_node is not None:
                    new = decompose_node(node)
                if new is node:
                    continue
                if new is None:
                    left.append(node)
                    continue
        if isinstance(new, list):  # a tuple result: its readers index it (getitem)
            for use in list(node.users):
                _replace(use, new[use.args[1]], changed)
                erased.add(use)
                g.erase_node(use)
        else:
            _replace(node, new, changed)
        g.erase_node(node)
    return left


def _replace(node: fx.Node, new, changed: set) -> None:
    if isinstance(new, fx.Node) and _layout(new.meta.get("val")) != _layout(node.meta.get("val")):
        changed.add(new)
    node.replace_all_uses_with(new)
