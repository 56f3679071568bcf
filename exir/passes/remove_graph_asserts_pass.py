"""`RemoveGraphAssertsPass`: drops the trace-time checks torch.export leaves in a graph (asserts and
range constraints), which no ExecuTorch kernel runs. Names as ExecuTorch's module of that name."""

from __future__ import annotations

import torch
from torch import fx
from torch.fx.passes.infra.pass_base import PassBase, PassResult

__all__ = ["RemoveGraphAssertsPass", "RemoveNonCoreAtenOpGraphAssertsPass"]

_aten = torch.ops.aten


def _drop(graph_module: fx.GraphModule, targets: tuple) -> PassResult:
    from executorch.exir.dialects.edge._ops import aten_op

    changed = False
    for module in graph_module.modules():
        if not isinstance(module, fx.GraphModule):
            continue
        for node in list(module.graph.nodes):
            if node.op == "call_function" and aten_op(node.target) in targets:
                module.graph.erase_node(node)
                changed = True
        module.graph.eliminate_dead_code()
        module.recompile()
    return PassResult(graph_module, changed)


class RemoveGraphAssertsPass(PassBase):
    """Every assert and size-range constraint node, in the graph and its control-flow branches."""

    def call(self, graph_module: fx.GraphModule) -> PassResult:
        return _drop(graph_module, (_aten._assert_async.msg, _aten._assert_scalar.default,
                                    _aten.sym_constrain_range_for_size.default, _aten.sym_constrain_range.default,
                                    _aten._assert_tensor_metadata.default))


class RemoveNonCoreAtenOpGraphAssertsPass(PassBase):
    """Only the metadata asserts, which are not core ATen."""

    def call(self, graph_module: fx.GraphModule) -> PassResult:
        return _drop(graph_module, (_aten._assert_tensor_metadata.default,))
