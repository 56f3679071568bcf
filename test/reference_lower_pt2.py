"""Lowers saved pt2e-quantized ExportedPrograms with the published ExecuTorch exporter.

Run with the reference python (ET_REFERENCE_PYTHON), never imported by the project:
    python reference_lower_pt2.py IN.pt2 OUT.pte
It writes OUT.pte with the published to_edge_transform_and_lower(...).to_executorch().
"""

import sys

import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (the functional q/dq ops the graph calls)

import executorch.kernels.quantized  # noqa: F401  (their out variants, from the published wheel)
from executorch.exir import to_edge_transform_and_lower

program = to_edge_transform_and_lower(torch.export.load(sys.argv[1])).to_executorch()
with open(sys.argv[2], "wb") as f:
    program.write_to_file(f)
