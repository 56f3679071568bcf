"""Lower a model of models.py with the exporter of whichever executorch this Python imports.

    python export_reference.py one_engine out.pte

Tests run it with the published exporter's Python (ET_REFERENCE_PYTHON) to get its file for the
same program; it imports nothing from this project but the test backend itself.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower  # noqa: E402
from device_backend import models  # noqa: E402
from device_backend.partitioner import TestDevicePartitioner  # noqa: E402
from device_backend.preprocess import TestDeviceBackend  # noqa: E402, F401  (the backend must be loaded)


def lower(name: str):
    model, inputs = models.FACTORIES[name]()
    ep = torch.export.export(model, inputs)
    edge = to_edge_transform_and_lower(ep, partitioner=[TestDevicePartitioner()],
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))
    return edge.to_executorch()


if __name__ == "__main__":
    program = lower(sys.argv[1])
    with open(sys.argv[2], "wb") as f:
        program.write_to_file(f)
