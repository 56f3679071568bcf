"""Mutating custom ops back in place: `auto_functionalized(_v2)` nodes become the op writing its tensor."""

from __future__ import annotations

import torch
from torch import fx
from torch.export import ExportedProgram

from executorch.exir.dialects.edge._ops import EdgeOpOverload, aten_op, wrap_op
from executorch.exir.dialects._edge_ops import functionalized_op, writes_first_argument
from executorch.exir.error import ExportError
from executorch.exir.passes._graph import source_line


def has_functionalized_ops(gm: fx.GraphModule) -> bool:
    return any(functionalized_op(n) is not None for n in gm.graph.nodes)


def restore_mutating_ops(ep: ExportedProgram, method: str) -> ExportedProgram:
    """Each `auto_functionalized(_v2)` node becomes the mutating op itself (whose `.out` kernel writes the
    tensor in place, as ExecuTorch's exporter emits it); edits `ep` in place, so pass a copy.
    Functionalization leaves no read of a written tensor's old value after the write (later readers
    use the op's results, which become the tensor itself), so writing in place keeps the meaning."""
    from torch.export._remove_auto_functionalized_pass import unsafe_remove_auto_functionalized_pass

    ep = unsafe_remove_auto_functionalized_pass(ep)
    for node in ep.graph.nodes:
        if node.op == "call_function" and node.target is torch.ops.aten.as_strided.default:
            where = source_line(node)
            raise ExportError(
                f"method '{method}': an in-place custom op writes into a view of '{node.args[0].name}'"
                f"{' (' + where + ')' if where else ''}, which .pte programs cannot express; pass the whole "
                "tensor (a buffer or an input) to the op")
    return ep


# What `reinplace_pass` rewrites by default, as ExecuTorch's does: index_put (a cache update copies the cache).
DEFAULT_INPLACEABLE_OPS = frozenset({torch.ops.aten.index_put.default})


def _inplace_form(op: torch._ops.OpOverload):
    packet = getattr(getattr(torch.ops, op.namespace), op._schema.name.split("::")[1] + "_", None)
    found = getattr(packet, op._overloadname, None)
    return found if writes_first_argument(found) else None


def _safe_to_write(node: fx.Node, order: dict, signature) -> bool:
    """Nothing reads the first argument after `node`, and it is a computed value or the buffer
    `node`'s result is written back to; never an input, a weight or a buffer that keeps its value."""
    target = node.args[0] if node.args else None
    if not isinstance(target, fx.Node):
        return False
    if target.op == "placeholder":
        buffer = signature.inputs_to_buffers.get(target.name)
        if buffer is None or signature.buffers_to_mutate.get(node.name) != buffer:
            return False
    elif target.op != "call_function":
        return False
    return all(u is node or order[u] < order[node] for u in target.users)


def reinplace_pass(ep: ExportedProgram, ops_to_inplace=None, inplace_overrides=None) -> ExportedProgram:
    """Ops in `ops_to_inplace` (default: index_put) become their in-place form (`name_`, or the op
    `inplace_overrides` maps them to) where that is safe; edits `ep` and returns it."""
    ops = DEFAULT_INPLACEABLE_OPS if ops_to_inplace is None else frozenset(ops_to_inplace)
    overrides = dict(inplace_overrides or {})
    gm = ep.graph_module
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    for node in list(gm.graph.nodes):
        # `ops` may name edge ops or the torch operators they stand for
        op = aten_op(node.target)
        if node.op != "call_function" or (node.target not in ops and op not in ops):
            continue
        inplace = overrides.get(node.target) or overrides.get(op) or _inplace_form(op)
        if inplace is None:
            raise ExportError(f"reinplace_pass: {op} has no in-place form; name one in inplace_overrides "
                              "or drop it from ops_to_inplace")
        if _safe_to_write(node, order, ep.graph_signature):
            # an edge graph gets the in-place form's edge op
            node.target = wrap_op(aten_op(inplace)) if isinstance(node.target, EdgeOpOverload) else inplace
    gm.recompile()
    return ep
