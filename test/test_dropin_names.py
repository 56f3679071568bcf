"""ExecuTorch's public names at their module paths, called the way ExecuTorch code calls them."""

from __future__ import annotations

import torch

from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge
from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary
from executorch.exir.dialects._ops import ops as exir_ops
from executorch.exir.pass_base import ExportPass, PassResult
from executorch.exir.passes import MemoryPlanningPass
from executorch.runtime import Runtime


class _AddMul(torch.nn.Module):
    def forward(self, x, y):
        return (x + y) * 2.0


def _edge(model=None, inputs=None):
    model = model or _AddMul()
    inputs = inputs or (torch.randn(2, 3), torch.randn(2, 3))
    return to_edge(torch.export.export(model, inputs)), inputs


def _run(pte_bytes: bytes, inputs):
    method = Runtime.get().load_program(pte_bytes).load_method("forward")
    return method.execute(list(inputs))


def test_exir_ops_edge_names_the_targets_edge_graphs_hold():
    edge, _ = _edge()
    targets = {n.target for n in edge.exported_program().graph.nodes if n.op == "call_function"}
    assert exir_ops.edge.aten.add.Tensor in targets
    assert exir_ops.edge.aten.mul.Tensor in targets
    assert exir_ops.edge.aten.sub.Tensor not in targets
    x = torch.randn(3)
    torch.testing.assert_close(exir_ops.edge.aten.add.Tensor(x, x), x * 2)


def test_user_pass_subclassing_export_pass_in_transform():
    class AddToSub(ExportPass):
        def call_operator(self, op, args, kwargs, meta):
            if op == exir_ops.edge.aten.add.Tensor:
                return super().call_operator(exir_ops.edge.aten.sub.Tensor, args, kwargs, meta)
            return super().call_operator(op, args, kwargs, meta)

    edge, (x, y) = _edge()
    result = AddToSub()(edge.exported_program().graph_module)
    assert isinstance(result, PassResult) and result.modified
    changed = edge.transform([AddToSub()])
    targets = {n.target for n in changed.exported_program().graph.nodes if n.op == "call_function"}
    assert exir_ops.edge.aten.sub.Tensor in targets and exir_ops.edge.aten.add.Tensor not in targets
    (out,) = _run(changed.to_executorch().buffer, (x, y))
    torch.testing.assert_close(out, (x - y) * 2.0)
    (unchanged,) = _run(edge.to_executorch().buffer, (x, y))
    assert not torch.allclose(unchanged, out)


def test_export_pass_recomputes_metadata_of_a_replacement():
    class SumInsteadOfMul(ExportPass):
        def call_operator(self, op, args, kwargs, meta):
            if op == exir_ops.edge.aten.mul.Tensor:
                return super().call_operator(exir_ops.edge.aten.add.Tensor, (args[0], args[0]), {}, meta)
            return super().call_operator(op, args, kwargs, meta)

    edge, (x, y) = _edge()
    (out,) = _run(edge.transform([SumInsteadOfMul()]).to_executorch().buffer, (x, y))
    torch.testing.assert_close(out, (x + y) * 2.0)


def test_deserialize_pte_binary_gives_program_and_segments():
    edge, _ = _edge(torch.nn.Linear(4, 2), (torch.randn(1, 4),))
    data = edge.to_executorch().buffer
    pte = deserialize_pte_binary(data)
    plan = pte.program.execution_plan[0]
    assert plan.name == "forward"
    assert plan.delegates == []
    assert pte.segment_data is pte.program.segment_data
    assert pte.mutable_data is None and pte.named_data is None
    assert bytes(serialize_pte_binary(pte)) == data


def test_memory_planning_pass_importable_from_passes():
    edge, (x, y) = _edge()
    config = ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(memory_planning_algo="greedy"))
    (out,) = _run(edge.to_executorch(config).buffer, (x, y))
    torch.testing.assert_close(out, (x + y) * 2.0)


def test_edge_compile_config_importable():
    assert EdgeCompileConfig()._check_ir_validity
