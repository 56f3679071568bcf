"""Run with the reference python: FILE.py:FACTORY OUT.pte -> the factory's model exported by the published
exporter with MemoryPlanningPass(alloc_graph_output=False) (outputs in the caller's memory).
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

from executorch.exir import ExecutorchBackendConfig, to_edge  # noqa: E402
from executorch.exir.passes import MemoryPlanningPass  # noqa: E402

config = ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(alloc_graph_output=False))
program = to_edge(torch.export.export(model, inputs)).to_executorch(config)
with open(out, "wb") as f:
    program.write_to_file(f)
