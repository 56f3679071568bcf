"""Run with the reference python: FILE.py:FACTORY OUT.pte -> the factory's model lowered by the published
exporter with its own ExecutorBackendPartitioner (the whole program in ExecutorBackend delegates).
"""
import importlib.util
import sys

import torch

factory, out = sys.argv[1], sys.argv[2]
path, _, name = factory.rpartition(":")
spec = importlib.util.spec_from_file_location("factory_module", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
model, inputs = getattr(module, name)()

from executorch.exir import to_edge_transform_and_lower  # noqa: E402
from executorch.exir.backend.test.demos.rpc.executor_backend_partitioner import (  # noqa: E402
    ExecutorBackendPartitioner)

ep = torch.export.export(model, inputs)
with torch.no_grad():  # the loaded buffers are leaves; lowering runs the graph's in-place writes
    program = to_edge_transform_and_lower(ep, partitioner=[ExecutorBackendPartitioner()]).to_executorch()
with open(out, "wb") as f:
    program.write_to_file(f)
