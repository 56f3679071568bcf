"""TestDevicePartitioner: one partition per engine node, each naming its engine's device in a
`target_device` compile spec, as Torch-TensorRT's TensorRTPartitioner does."""

from __future__ import annotations

import operator

import torch
from torch.export import ExportedProgram

from executorch.exir.backend.compile_spec_schema import CompileSpec
from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
from executorch.exir.backend.utils import tag_constant_data
from executorch.exir.passes.propagate_device_pass import TARGET_DEVICE_COMPILE_SPEC_KEY

from device_backend import engine  # noqa: F401  (defines the op)

BACKEND_ID = "TestDeviceBackend"


def is_engine(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and getattr(node.target, "_schema", None) is not None and \
        node.target._schema.name == "test_device::execute_engine"


class TestDevicePartitioner(Partitioner):
    __test__ = False  # not a pytest class

    def __init__(self, compile_specs: list[CompileSpec] | None = None) -> None:
        super().__init__()
        self.compile_specs = list(compile_specs or [])
        self.delegation_spec = DelegationSpec(BACKEND_ID, self.compile_specs)

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        tags = {}
        engines = [n for n in exported_program.graph.nodes if is_engine(n)]
        for i, node in enumerate(engines):
            tag = f"test_device_{i}"
            node.meta["delegation_tag"] = tag
            for user in node.users:
                if user.target is operator.getitem:
                    user.meta["delegation_tag"] = tag
            device = str(node.args[2]).encode()
            tags[tag] = DelegationSpec(BACKEND_ID,
                                       self.compile_specs + [CompileSpec(TARGET_DEVICE_COMPILE_SPEC_KEY, device)])
        tag_constant_data(exported_program)
        return PartitionResult(tagged_exported_program=exported_program, partition_tags=tags)
