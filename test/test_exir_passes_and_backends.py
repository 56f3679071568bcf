"""User passes (`transform`, `ExecutorchBackendConfig.passes`) and the partitioner hook."""

from __future__ import annotations

import pytest
import torch

from executorch.devtools.compare import assert_outputs_close
from executorch.exir import ExecutorchBackendConfig, ExportError, to_edge, to_edge_transform_and_lower
from executorch.exir.backend import DelegationSpec, Partitioner, PartitionResult
from executorch.exir.dialects._ops import ops as exir_ops
from executorch.runtime import Runtime


class ReluNet(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) + 1.0


def _relu_to_sigmoid(gm: torch.fx.GraphModule) -> None:
    # edge graphs call edge ops, as in ExecuTorch
    for node in gm.graph.nodes:
        if node.target == exir_ops.edge.aten.relu.default:
            node.target = exir_ops.edge.aten.sigmoid.default


def _run(pte, x):
    return Runtime.get().load_program(pte.buffer).load_method("forward").execute([x])[0]


def test_transform_pass_changes_the_program():
    x = torch.randn(4)
    ep = torch.export.export(ReluNet(), (x,))
    pte = to_edge_transform_and_lower(ep, transform_passes=[_relu_to_sigmoid]).to_executorch()
    assert_outputs_close(_run(pte, x), torch.sigmoid(x) + 1.0)
    # the original program is untouched
    assert_outputs_close(_run(to_edge(ep).to_executorch(), x), torch.relu(x) + 1.0)


def test_backend_config_passes_run_before_emission():
    x = torch.randn(4)
    ep = torch.export.export(ReluNet(), (x,))
    pte = to_edge(ep).to_executorch(ExecutorchBackendConfig(passes=[_relu_to_sigmoid]))
    assert_outputs_close(_run(pte, x), torch.sigmoid(x) + 1.0)


def test_a_pass_that_breaks_the_edge_dialect_is_caught():
    def to_inplace(gm):
        for node in gm.graph.nodes:
            if node.target == exir_ops.edge.aten.relu.default:
                node.target = exir_ops.edge.aten.relu_.default

    ep = torch.export.export(ReluNet(), (torch.randn(4),))
    with pytest.raises(ExportError, match="relu_"):
        to_edge(ep).transform([to_inplace])


def test_a_pass_returning_garbage_is_named():
    ep = torch.export.export(ReluNet(), (torch.randn(4),))
    with pytest.raises(ExportError, match="returned int"):
        to_edge(ep).transform([lambda gm: 3])


class ClaimsNothing(Partitioner):
    def partition(self, ep):
        return PartitionResult(ep, {})


class ClaimsRelu(Partitioner):
    def partition(self, ep):
        for node in ep.graph.nodes:
            if node.target == exir_ops.edge.aten.relu.default:
                node.meta["delegation_tag"] = "tag0"
        return PartitionResult(ep, {"tag0": DelegationSpec("FancyNPU")})


def test_partitioner_that_claims_nothing_keeps_portable_ops():
    x = torch.randn(4)
    ep = torch.export.export(ReluNet(), (x,))
    pte = to_edge_transform_and_lower(ep, partitioner=[ClaimsNothing()]).to_executorch()
    assert_outputs_close(_run(pte, x), torch.relu(x) + 1.0)


def test_partitioner_for_a_missing_backend_is_an_error():
    ep = torch.export.export(ReluNet(), (torch.randn(4),))
    with pytest.raises(ExportError, match="FancyNPU"):
        to_edge_transform_and_lower(ep, partitioner=[ClaimsRelu()])
    with pytest.raises(ExportError, match="partition"):
        to_edge_transform_and_lower(ep, partitioner=[object()])
