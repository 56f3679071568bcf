"""Bad input to the exporter gets one clear error (what, why, what to do) and loses nothing."""

from __future__ import annotations

import inspect

import pytest
import torch

from executorch.exir import (EdgeCompileConfig, ExecutorchBackendConfig, ExportError, to_edge,
                             to_edge_transform_and_lower)
from executorch.exir.memory_planning import MemoryPlanningPass


@torch.library.custom_op("exir_test::sine_fold", mutates_args=())
def sine_fold(x: torch.Tensor) -> torch.Tensor:
    return torch.sin(x).clone()


@sine_fold.register_fake
def _(x):
    return torch.empty_like(x)


class UsesCustomOp(torch.nn.Module):
    def forward(self, x):
        y = x + 1
        return sine_fold(y)  # the line the error must point at


def test_unsupported_op_names_op_node_and_source_line():
    ep = torch.export.export(UsesCustomOp(), (torch.randn(3),))
    with pytest.raises(ExportError) as err:
        to_edge(ep)
    msg = str(err.value)
    line = inspect.getsource(UsesCustomOp).splitlines().index(
        "        return sine_fold(y)  # the line the error must point at")
    expected_line = inspect.getsourcelines(UsesCustomOp)[1] + line
    assert "exir_test::sine_fold" in msg
    assert "node 'sine_fold'" in msg
    assert f"test_exir_errors.py:{expected_line}" in msg
    assert "\n" not in msg


def test_unchecked_ir_lets_the_op_through_to_out_variant_lookup():
    ep = torch.export.export(UsesCustomOp(), (torch.randn(3),))
    edge = to_edge(ep, compile_config=EdgeCompileConfig(_check_ir_validity=False))
    with pytest.raises(ExportError, match="has no out variant"):
        edge.to_executorch()


def test_unsupported_dtype():
    class Complex(torch.nn.Module):
        def forward(self, x):
            return torch.view_as_complex(x) * 2

    ep = torch.export.export(Complex(), (torch.randn(3, 2),))
    with pytest.raises(ExportError, match="complex64"):
        to_edge_transform_and_lower(ep)


def test_non_tensor_input_is_rejected_clearly():
    class Tagged(torch.nn.Module):
        def forward(self, x, tag: str):
            return x + 1

    ep = torch.export.export(Tagged(), (torch.randn(2), "a"))
    with pytest.raises(ExportError, match="input 'tag' is a str"):
        to_edge(ep).to_executorch()


def test_unbounded_dynamic_dimension_asks_for_a_maximum():
    class Add(torch.nn.Module):
        def forward(self, x):
            return x + 1

    ep = torch.export.export(Add(), (torch.randn(3, 4),), dynamic_shapes=({0: torch.export.Dim("b")},))
    with pytest.raises(ExportError, match=r"max="):
        to_edge(ep).to_executorch()


@pytest.mark.parametrize("make", [
    lambda: ExecutorchBackendConfig(segment_alignment=3),
    lambda: ExecutorchBackendConfig(constant_tensor_alignment=0),
    lambda: ExecutorchBackendConfig(memory_planning_pass="greedy"),
    lambda: MemoryPlanningPass(memory_planning_algo="fancy"),
    lambda: MemoryPlanningPass(alignment=12),
    lambda: EdgeCompileConfig(_check_ir_validity="yes"),
])
def test_bad_config_values(make):
    with pytest.raises(ExportError) as err:
        make()
    assert "\n" not in str(err.value)


def test_partitioner_bookkeeping_is_declared_and_not_an_option():
    # to_edge_transform_and_lower fills these on the config it derives; users cannot pass them.
    config = EdgeCompileConfig()
    assert config._preserve_filters == {} and config._for_partitioner == frozenset()
    with pytest.raises(TypeError, match="_preserve_filters"):
        EdgeCompileConfig(_preserve_filters={})
    assert "_for_partitioner" not in repr(config)


def test_bad_programs_argument():
    with pytest.raises(ExportError, match="torch.export.export"):
        to_edge(torch.nn.Linear(2, 2))
    ep = torch.export.export(torch.nn.ReLU(), (torch.randn(2),))
    with pytest.raises(ExportError, match="EdgeCompileConfig"):
        to_edge(ep, compile_config={"_check_ir_validity": False})
    with pytest.raises(ExportError, match="ExecutorchBackendConfig"):
        to_edge(ep).to_executorch(config={"segment_alignment": 64})


def test_failed_write_leaves_no_partial_file(tmp_path, monkeypatch):
    ep = torch.export.export(torch.nn.Linear(4, 4), (torch.randn(1, 4),))
    pte = to_edge(ep).to_executorch()
    good = list(pte._chunks())
    monkeypatch.setattr(type(pte), "_chunks", lambda self: good[:1] + [object()])  # second write raises
    target = tmp_path / "model.pte"
    with pytest.raises(TypeError):
        pte.write_to_file(target)
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    pte.write_to_file(target)
    assert target.read_bytes() == pte.buffer
    assert [p.name for p in tmp_path.iterdir()] == ["model.pte"]


def test_existing_file_survives_a_failed_write(tmp_path, monkeypatch):
    ep = torch.export.export(torch.nn.Linear(4, 4), (torch.randn(1, 4),))
    pte = to_edge(ep).to_executorch()
    target = tmp_path / "model.pte"
    target.write_bytes(b"previous contents")
    monkeypatch.setattr(type(pte), "_chunks", lambda self: [b"x", object()])
    with pytest.raises(TypeError):
        pte.write_to_file(str(target))
    assert target.read_bytes() == b"previous contents"
