"""Run by test_xnnpack_wheel.py with the minimal wheel first on sys.path: lower a model with
XnnpackPartitioner and write OUT.pte; prints where executorch was imported from.

    python -S xnnpack_wheel_export.py FILE.py:FACTORY OUT.pte
"""

import importlib.util
import sys

import torch

import executorch
from executorch.backends.xnnpack import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower

path, _, name = sys.argv[1].rpartition(":")
spec = importlib.util.spec_from_file_location("factory_module", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
model, inputs = getattr(module, name)()
ep = torch.export.export(model, inputs)
program = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch()
with open(sys.argv[2], "wb") as f:
    program.write_to_file(f)
print(executorch.__file__)
