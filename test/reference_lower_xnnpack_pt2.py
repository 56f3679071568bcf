"""Lowers a saved ExportedProgram (dynamic shapes and all) with the published XnnpackPartitioner.

Run with the reference python (ET_REFERENCE_PYTHON), never imported by the project:
    python reference_lower_xnnpack_pt2.py IN.pt2 OUT.pte
"""

import sys

import torch

from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower

ep = torch.export.load(sys.argv[1])
with torch.no_grad():  # a loaded program's buffers come back as leaves that require grad
    program = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch()
with open(sys.argv[2], "wb") as f:
    program.write_to_file(f)
