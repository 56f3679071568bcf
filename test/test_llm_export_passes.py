"""executorch.extension.llm.export.export_passes.RemoveRedundantTransposes on torch.export and edge graphs."""

from __future__ import annotations

import torch

from executorch.exir.dialects.edge._ops import aten_op
from executorch.devtools.compare import assert_outputs_close
from executorch.exir import to_edge
from executorch.extension.llm.export.export_passes import RemoveRedundantTransposes


class _Layouts(torch.nn.Module):
    def forward(self, x):
        undone = x.transpose(1, 2).transpose(1, 2)  # cancels
        rotated = x.permute(2, 0, 1).permute(1, 2, 0)  # cancels
        kept = x.permute(2, 0, 1).transpose(0, 1)  # does not cancel
        shared = x.transpose(0, 2)
        return undone + 1, rotated * 2, kept, shared.transpose(0, 2) - shared.sum()


def _layout_ops(gm: torch.fx.GraphModule) -> list[str]:
    # "aten.permute.default" for a torch operator and its edge op alike
    names = [str(aten_op(n.target)) for n in gm.graph.nodes if n.op == "call_function"]
    return [name for name in names if "transpose" in name or "permute" in name]


def test_cancelling_chains_go_and_the_rest_stay():
    x = torch.randn(2, 3, 4)
    gm = torch.export.export(_Layouts(), (x,)).module()
    assert len(_layout_ops(gm)) == 8
    result = RemoveRedundantTransposes()(gm)
    assert result.modified
    # Left: the non-cancelling permute + transpose, and the transpose `shared` still needs.
    assert sorted(_layout_ops(result.graph_module)) == ["aten.permute.default", "aten.transpose.int",
                                                        "aten.transpose.int"]
    for got, want in zip(result.graph_module(x), _Layouts()(x)):
        assert torch.equal(got, want)


def test_nothing_to_remove_is_reported_unchanged():
    gm = torch.export.export(torch.nn.Linear(4, 3), (torch.randn(2, 4),)).module()
    assert not RemoveRedundantTransposes()(gm).modified


def test_edge_graph_copies_are_removed_too():
    x = torch.randn(2, 3, 4)
    edge = to_edge(torch.export.export(_Layouts(), (x,)))
    gm = edge.exported_program().graph_module
    assert len(_layout_ops(gm)) == 8
    result = RemoveRedundantTransposes()(gm)
    assert result.modified and _layout_ops(result.graph_module) == ["aten.permute_copy.default"] * 3
    # The edge graph sums a dense copy where eager sums a strided view: equal up to rounding.
    assert_outputs_close(list(result.graph_module(x)), list(_Layouts()(x)))
