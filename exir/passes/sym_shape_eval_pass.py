"""Symbolic shapes in `TensorSpec`s made concrete: at their upper bounds (the planning here) or at the traced hints."""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch import fx
from torch.fx.passes.infra.pass_base import PassBase, PassResult
from torch.utils import _pytree as pytree

from executorch.exir.error import ExportError
from executorch.exir.tensor import TensorSpec, shape_upper_bound


def _concretize(graph_module: fx.GraphModule, evaluate: Callable[[Any, fx.Node], int]) -> PassResult:
    for gm in graph_module.modules():
        if not isinstance(gm, fx.GraphModule):
            continue
        for node in gm.graph.nodes:
            for spec in pytree.tree_leaves(node.meta.get("spec")):
                if isinstance(spec, TensorSpec):
                    spec.shape = [evaluate(s, node) for s in spec.shape]
                    spec.stride = tuple(evaluate(s, node) for s in spec.stride)
    return PassResult(graph_module, True)


def _upper(s: Any, node: fx.Node) -> int:
    if isinstance(s, int):
        return s
    bound = shape_upper_bound(s)
    if bound is None:
        raise ExportError(
            f"node '{node.name}' has a dimension {s} with no upper bound; memory is planned for the largest shape, "
            "so give each dynamic dimension a maximum, e.g. torch.export.Dim('n', max=1024)")
    return bound


def _hint(s: Any, node: fx.Node) -> int:
    if isinstance(s, int):
        return s
    hint = s.node.hint if isinstance(s, torch.SymInt) else None
    if hint is None:
        raise ExportError(f"node '{node.name}' has a dimension {s} with no traced value (a data-dependent size); "
                          "use ConstraintBasedSymShapeEvalPass, which plans it at its upper bound")
    return int(hint)


class ConstraintBasedSymShapeEvalPass(PassBase):
    """Each symbolic size and stride in `node.meta["spec"]` becomes its upper bound from the export
    constraints (the shapes memory is planned for); an unbounded size is an error. This is what
    `to_executorch` does, so `ExecutorchBackendConfig(sym_shape_eval_pass=...)` accepts it."""

    def call(self, graph_module: fx.GraphModule) -> PassResult:
        return _concretize(graph_module, _upper)


class HintBasedSymShapeEvalPass(PassBase):
    """Each symbolic size and stride in `node.meta["spec"]` becomes the value it had while tracing
    (ExecuTorch deprecates this: the plan is then too small for larger inputs)."""

    def call(self, graph_module: fx.GraphModule) -> PassResult:
        return _concretize(graph_module, _hint)
