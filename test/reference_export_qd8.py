"""Run with the reference python: FILE.py:FACTORY OUT.pte -> a dynamically quantized (QD8) XNNPACK .pte
from the published exporter: its XNNPACKQuantizer with int8 per-row dynamic activations and int8
per-channel weights (pt2e), lowered with its XnnpackPartitioner. The converted module's outputs on
the factory's inputs are saved as OUT.ref.pt.
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

from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e  # noqa: E402

from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner  # noqa: E402
from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (  # noqa: E402
    XNNPACKQuantizer, get_symmetric_quantization_config)
from executorch.exir import to_edge_transform_and_lower  # noqa: E402

config = get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True)
graph = prepare_pt2e(torch.export.export(model, inputs).module(), XNNPACKQuantizer().set_global(config))
graph(*inputs)
graph = convert_pt2e(graph)
with torch.no_grad():
    ref = graph(*inputs)
torch.save(list(ref) if isinstance(ref, tuple) else [ref], out[:-4] + ".ref.pt")
ep = torch.export.export(graph, inputs)
program = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch()
with open(out, "wb") as f:
    program.write_to_file(f)
