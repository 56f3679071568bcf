"""Dim orders in the files we write: layouts re-derived once views are dense copies, constants
stored contiguous, and a check that refuses layouts the runtime's kernels cannot hold."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from executorch.exir import ExportError, to_edge
from executorch.exir import schema as s
from executorch.exir.passes.dim_order import check_plan
from executorch.runtime import Runtime

from _serialize_programs import plan, tensor  # noqa: E402


def _lower(model, inputs, passes=()):
    edge = to_edge(torch.export.export(model, inputs))
    if passes:
        edge = edge.transform(list(passes))
    return edge.to_executorch()


def _orders(manager) -> list[list[int]]:
    values = manager.executorch_program.execution_plan[0].values
    return [list(v.val.dim_order) for v in values if isinstance(v.val, s.Tensor)]


def _run(manager, inputs) -> list:
    return Runtime.get().load_program(manager.buffer).load_method("forward").execute(list(inputs))


def _contiguous(order) -> bool:
    return order == list(range(len(order)))


class _PermuteThenScale(nn.Module):
    def forward(self, x):
        y = x.view(2, 3, 4, 2).permute(2, 0, 3, 1) * 0.5  # mul of a permuted view keeps its strides in torch
        return y.clone() + 1


def test_ops_after_a_permuted_view_are_written_contiguous():
    x = torch.randn(2, 3, 8)
    manager = _lower(_PermuteThenScale(), (x,))
    orders = _orders(manager)
    assert orders and all(_contiguous(o) for o in orders), orders
    torch.testing.assert_close(_run(manager, [x])[0], _PermuteThenScale()(x), rtol=1e-6, atol=0)


class _TransposedWeight(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.arange(12.0).reshape(4, 3).t())  # strides (1, 3)

    def forward(self, x):
        return x + self.w


def test_non_contiguous_constant_is_stored_with_the_order_of_its_bytes():
    model, x = _TransposedWeight().eval(), torch.zeros(3, 4)
    manager = _lower(model, (x,))
    assert all(_contiguous(o) for o in _orders(manager))
    assert torch.equal(_run(manager, [x])[0], model(x).detach())


def test_channels_last_input_keeps_its_order():
    class Relu(nn.Module):
        def forward(self, x):
            return torch.relu(x)

    x = torch.randn(1, 3, 4, 5).to(memory_format=torch.channels_last)
    manager = _lower(Relu(), (x,))
    assert _orders(manager) == [[0, 2, 3, 1], [0, 2, 3, 1]]
    assert torch.equal(_run(manager, [x])[0], torch.relu(x))


def test_channels_last_times_a_scalar_is_refused_as_the_published_runtime_refuses_it():
    # The scalar becomes a 0-dim tensor, which counts as contiguous: the published mul.out kernel
    # fails such a call with error 0x12 (the published exporter writes it all the same).
    class Scale(nn.Module):
        def forward(self, x):
            return x * 2.0

    x = torch.randn(1, 3, 4, 5).to(memory_format=torch.channels_last)
    with pytest.raises(ExportError, match=r"aten::mul.out\) gets tensors in different dim orders .* x.contiguous\(\)"):
        _lower(Scale(), (x,))


def test_transposed_example_input_becomes_contiguous():
    class Double(nn.Module):
        def forward(self, x):
            return x + x

    x = torch.randn(4, 3).t()
    manager = _lower(Double(), (x,))
    assert all(_contiguous(o) for o in _orders(manager))
    assert torch.equal(_run(manager, [x.contiguous()])[0], x + x)


def test_views_inside_a_cond_branch_are_written_contiguous():
    class Branchy(nn.Module):
        def forward(self, x):
            return torch.cond(x.sum() > 0, lambda t: t.permute(1, 0) * 2, lambda t: t.permute(1, 0) - 1, (x,))

    model = Branchy()
    manager = _lower(model, (torch.randn(2, 3),))
    assert all(_contiguous(o) for o in _orders(manager))
    for sign in (1.0, -1.0):
        x = torch.randn(2, 3).abs() * sign
        torch.testing.assert_close(_run(manager, [x])[0], model(x), rtol=1e-6, atol=0)


def _stale_layout(gm):
    """A user pass that gives a node a permuted fake value and recomputes nothing after it."""
    node = next(n for n in gm.graph.nodes if n.op == "call_function")
    node.meta["val"] = node.meta["val"].permute(1, 0).contiguous().permute(1, 0)
    return gm


def test_a_stale_layout_left_by_a_pass_is_refused():
    class Affine(nn.Module):
        def forward(self, x):
            return x * 3.0 + 1.0

    with pytest.raises(ExportError, match=r"dim order \[1, 0\]; ExecuTorch kernels hold only contiguous"):
        _lower(Affine(), (torch.randn(3, 4),), passes=[_stale_layout])


def _t(sizes, order):
    v = tensor(sizes, alloc=s.AllocationDetails(1, 0))
    v.val.dim_order = list(order)
    return v


def _one_call(op: str, overload: str, values: list) -> s.ExecutionPlan:
    call = s.Instruction(s.KernelCall(0, list(range(len(values)))))
    return plan(values=values, instructions=[call], operators=[s.Operator(op, overload)])


def test_check_refuses_a_call_mixing_contiguous_and_channels_last():
    values = [_t([1, 3, 4, 4], [0, 2, 3, 1]), _t([1, 3, 4, 4], [0, 1, 2, 3]), s.EValue(s.Int(1)),
              _t([1, 3, 4, 4], [0, 2, 3, 1])]
    with pytest.raises(ExportError, match=r"instruction 0 \(aten::add.out\) gets tensors in different dim orders"):
        check_plan(_one_call("aten::add", "out", values))
    values[1] = _t([1, 3, 4, 4], [0, 2, 3, 1])
    check_plan(_one_call("aten::add", "out", values))


def test_check_refuses_channels_last_into_a_contiguous_only_kernel():
    values = [_t([1, 3, 4, 4], [0, 2, 3, 1]), s.EValue(s.IntList([])), _t([1, 3, 4, 4], [0, 2, 3, 1])]
    with pytest.raises(ExportError, match=r"aten::view_copy.out.*needs all of its tensors contiguous"):
        check_plan(_one_call("aten::view_copy", "out", values))


def test_check_lets_a_convolution_weight_keep_its_own_order():
    values = [_t([1, 3, 8, 8], [0, 2, 3, 1]), _t([4, 3, 3, 3], [0, 1, 2, 3]), _t([4], [0]),
              _t([1, 4, 6, 6], [0, 2, 3, 1])]
    check_plan(_one_call("aten::convolution", "out", values))
    values[3] = _t([1, 4, 6, 6], [0, 1, 2, 3])
    with pytest.raises(ExportError, match="aten::convolution.out"):
        check_plan(_one_call("aten::convolution", "out", values))


def test_check_lets_dim_order_copies_change_the_order():
    values = [_t([1, 3, 4, 4], [0, 1, 2, 3]), s.EValue(s.Bool(False)), s.EValue(s.IntList([])),
              _t([1, 3, 4, 4], [0, 2, 3, 1])]
    check_plan(_one_call("dim_order_ops::_clone_dim_order", "out", values))
