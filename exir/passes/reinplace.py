"""Mutating custom ops back in place: `auto_functionalized(_v2)` nodes become the op writing its tensor."""

from __future__ import annotations

import torch
from torch import fx
from torch.export import ExportedProgram

from executorch.exir.dialects._edge_ops import functionalized_op
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
