"""Lowers a program with dynamic shapes with the published XnnpackPartitioner.

Run with the reference python (ET_REFERENCE_PYTHON), never imported by the project:
    python reference_lower_xnnpack_pt2.py IN.pt2|FILE.py:FACTORY OUT.pte [--optimum]
IN.pt2 is a `torch.export.save`d ExportedProgram; FILE.py:FACTORY is exported with the dynamic
shapes its sibling FACTORY_dynamic_shapes() returns. `--optimum` lowers with the options
optimum-executorch 1.1.0's `--recipe xnnpack` passes (no IR validity check, no dim order,
constant propagation, delegate segments, inputs not planned).
"""

import importlib.util
import sys

import torch

from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge_transform_and_lower
from executorch.exir.passes import MemoryPlanningPass

source, out = sys.argv[1], sys.argv[2]
if "--optimum" in sys.argv[3:]:
    # An optimum export may call ExecuTorch's LLM ops and hold torchao's quantization ops: both
    # libraries define them when imported, which loading the program needs.
    import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401
    import executorch.kernels.quantized  # noqa: F401

    if importlib.util.find_spec("torchao") is not None:
        import torchao  # noqa: F401
if source.endswith(".pt2"):
    ep = torch.export.load(source)
else:
    path, _, name = source.rpartition(":")
    spec = importlib.util.spec_from_file_location("factory_module", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model, inputs = getattr(module, name)()
    ep = torch.export.export(model, inputs, dynamic_shapes=getattr(module, f"{name}_dynamic_shapes")())
edge, backend = {}, {}
if "--optimum" in sys.argv[3:]:
    edge = {"compile_config": EdgeCompileConfig(_check_ir_validity=False, _skip_dim_order=True)}
    backend = {"config": ExecutorchBackendConfig(extract_delegate_segments=True, do_quant_fusion_and_const_prop=True,
                                                 memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False))}
with torch.no_grad():  # a loaded program's buffers come back as leaves that require grad
    program = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()], **edge).to_executorch(**backend)
with open(out, "wb") as f:
    program.write_to_file(f)
