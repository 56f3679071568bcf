"""VendorNpuPartitioner: claims float32 add, mul, linear and 2-D convolution nodes."""

from __future__ import annotations

import torch
from torch.export import ExportedProgram
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
from executorch.exir.backend.utils import tag_constant_data

from executorch.exir.dialects._ops import ops as exir_ops

aten = torch.ops.aten  # ops_to_not_decompose names torch operators: it sees the program before to_edge
edge = exir_ops.edge.aten  # edge graphs call edge ops


def _static_float(v) -> bool:
    return (isinstance(v, torch.Tensor) and v.dtype == torch.float32
            and all(isinstance(d, int) for d in v.shape) and v.dim() <= 4)


class _Supported(OperatorSupportBase):
    def is_node_supported(self, submodules, node: torch.fx.Node) -> bool:
        if node.op != "call_function" or not _static_float(node.meta.get("val")):
            return False
        tensors = [a for a in node.args if isinstance(a, torch.fx.Node)]
        if not all(_static_float(a.meta.get("val")) for a in tensors):
            return False
        if node.target in (edge.add.Tensor, edge.mul.Tensor):
            return len(tensors) == 2 and len(node.args) == 2 and node.kwargs.get("alpha", 1) == 1
        if node.target is edge.linear.default:
            return True
        if node.target is edge.convolution.default:
            transposed = node.args[6]
            return not transposed and node.args[0].meta["val"].dim() == 4
        return False


class VendorNpuPartitioner(Partitioner):
    def __init__(self) -> None:
        super().__init__()
        self.delegation_spec = DelegationSpec("VendorNpuBackend", [])

    def ops_to_not_decompose(self, ep: ExportedProgram):
        return [aten.linear.default], None

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        gm = exported_program.graph_module
        groups = CapabilityBasedPartitioner(gm, _Supported(), allows_single_node_partition=True).propose_partitions()
        tags = {}
        for i, group in enumerate(groups):
            for node in group.nodes:
                node.meta["delegation_tag"] = f"npu{i}"
            tags[f"npu{i}"] = self.delegation_spec
        tag_constant_data(exported_program)
        return PartitionResult(tagged_exported_program=exported_program, partition_tags=tags)
