"""Lowering node by node gives the graph torch's whole-graph decomposition gives.

`to_edge` decomposes only the nodes its direct rewrites leave, each alone with torch's decomposer
(exir/passes/torch_decompose.py). The reference is the same `to_edge` with core ATen produced by
`ExportedProgram.run_decompositions` over the whole graph. The edge graphs must agree node for
node: operator, arguments, order, and each value's shape, strides, storage offset and dtype; and
`requires_grad` too wherever torch's decomposer is involved (graphs the direct rewrites cover
alone keep torch.export's flags, as they always have)."""

from __future__ import annotations

import operator
import warnings

import pytest
import torch
from torch import fx

import executorch.exir.program._program as program
from executorch.exir import to_edge
from executorch.exir.passes import decompose

import single_op_models  # noqa: E402
import transformer_models  # noqa: E402
from conftest import load_zoo  # noqa: E402

MODELS = {**{f"zoo_{k}": v for k, v in load_zoo().MODELS.items()}, **transformer_models.FACTORIES}
# Single-op cases whose graph holds an op without a direct rewrite (the node-by-node path).
SINGLE = {case.name: case.factory for case in single_op_models.CASES if case.dynamic_shapes is None}


# A user's mark in each exported node's "custom" metadata (as vendor quantizers leave): every node a
# node decomposes into carries it, as torch's decomposer carries it. (Not compared on a getitem: torch
# rebuilds it while tracing the tuple-valued node it reads, with that node's mark.)
TAG = "user_tag"


def _value(v, grad: bool):
    if isinstance(v, torch.Tensor):
        return (tuple(v.shape), v.stride(), v.storage_offset(), v.dtype) + ((v.requires_grad,) if grad else ())
    if isinstance(v, (list, tuple)):
        return tuple(_value(t, grad) for t in v)
    return repr(v)


def canonical(gm: fx.GraphModule, grad: bool = True) -> list:
    """The graph as a list of (op, target, arguments by node position, value layout, user's mark)."""
    index: dict[fx.Node, int] = {}
    rows = []
    for i, n in enumerate(gm.graph.nodes):
        index[n] = i
        args = fx.node.map_arg((n.args, dict(n.kwargs)), lambda a: f"%{index[a]}")
        rows.append((n.op, "" if n.op == "placeholder" else str(n.target), repr(args), _value(n.meta.get("val"), grad),
                     None if n.target is operator.getitem else (n.meta.get("custom") or {}).get(TAG)))
    return rows


def _whole_graph(ep) -> fx.GraphModule:
    original = program._to_core_aten
    program._to_core_aten = lambda ep, config: program._whole_graph_core_aten(ep, config)
    try:
        return to_edge(ep).exported_program().graph_module
    finally:
        program._to_core_aten = original


def _needs_torch(ep) -> bool:
    return any(n.op == "call_function" and not decompose.has_rewrite(n) for n in ep.graph.nodes)


def _check(factory) -> bool:
    model, inputs = factory()
    ep = torch.export.export(model, inputs)
    for n in ep.graph.nodes:
        if n.op == "call_function":
            n.meta.setdefault("custom", {})[TAG] = n.name
    torch_involved = _needs_torch(ep)
    fast = to_edge(ep).exported_program().graph_module
    reference = _whole_graph(ep)
    assert canonical(fast, torch_involved) == canonical(reference, torch_involved)
    return torch_involved


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_lowers_to_the_whole_graph_decomposition(name):
    _check(MODELS[name])


def test_single_op_models_lower_to_the_whole_graph_decomposition():
    involved = [name for name, factory in SINGLE.items() if _check(factory)]
    assert len(involved) >= 10, involved  # the node-by-node path was exercised, not only the rewrites


def test_the_comparison_sees_a_changed_layout():
    model, inputs = transformer_models.FACTORIES["llama_decoder"]()
    gm = to_edge(torch.export.export(model, inputs)).exported_program().graph_module
    rows = canonical(gm)
    node = next(n for n in gm.graph.nodes if n.op == "call_function" and n.meta["val"].dim() == 3)
    node.meta["val"] = node.meta["val"].transpose(1, 2).contiguous().transpose(1, 2)
    assert canonical(gm) != rows


def test_node_by_node_decomposition_warns_the_caller_of_nothing_it_cannot_act_on():
    # torch 2.13's decomposer deep-copies its own tree specs and raises a FutureWarning about its
    # own deprecated check; a Linear over a transposed 3-D input takes that path.
    class LinearOverTranspose(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(8, 4)

        def forward(self, x):
            return self.linear(x.transpose(1, 2))

    ep = torch.export.export(LinearOverTranspose().eval(), (torch.randn(2, 8, 3),))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        to_edge(ep)
