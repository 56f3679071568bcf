"""Run with the reference python: FILE.py:FACTORY OUT.pte -> an 8da4w XNNPACK .pte from the published exporter.

torchao's Int8DynamicActivationIntxWeightConfig (int8 per-token dynamic activations, int4 weights in
groups of 32) quantizes the model's linear layers (those with whole groups); the published XnnpackPartitioner
lowers them. The quantized eager model's outputs on the factory's inputs are saved as OUT.ref.pt.
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

from torchao.quantization import Int8DynamicActivationIntxWeightConfig, quantize_  # noqa: E402
from torchao.quantization.granularity import PerGroup  # noqa: E402

from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner  # noqa: E402
from executorch.exir import to_edge_transform_and_lower  # noqa: E402

# Groups of 32 need whole groups: linear layers whose input width is not a multiple of 32 stay float.
quantize_(model, Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int4, weight_granularity=PerGroup(32)),
          filter_fn=lambda m, _fqn: isinstance(m, torch.nn.Linear) and m.in_features % 32 == 0)
with torch.no_grad():
    ref = model(*inputs)
torch.save(list(ref) if isinstance(ref, tuple) else [ref], out[:-4] + ".ref.pt")
ep = torch.export.export(model, inputs)
program = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch()
with open(out, "wb") as f:
    program.write_to_file(f)
