"""The model zoo for benchmark scripts, loaded by path: it is in the source tree, in no wheel."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


_MODELS_DIR = Path(__file__).resolve().parents[1] / "examples" / "models"


def load_models() -> dict:
    models = _MODELS_DIR
    spec = importlib.util.spec_from_file_location("bench_zoo", models / "__init__.py",
                                                  submodule_search_locations=[str(models)])
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_zoo"] = module
    spec.loader.exec_module(module)
    return module.MODELS


def zoo_file(name: str):
    """One zoo file, examples/models/NAME.py, loaded by path without the package (each file is
    self-contained), so a foreign venv without this project can build the model too."""
    spec = importlib.util.spec_from_file_location(f"bench_zoo_{name}", _MODELS_DIR / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # strict torch.export imports the model's module by name
    spec.loader.exec_module(module)
    return module


def export_bytes(model, inputs) -> bytes:
    """`model` exported to `.pte` bytes with this project's exporter."""
    import torch
    from executorch.exir import to_edge_transform_and_lower

    return to_edge_transform_and_lower(torch.export.export(model, inputs)).to_executorch().buffer


def program_bytes(model, inputs, pte: str | None) -> tuple[bytes, str]:
    """The `.pte` to benchmark: the file `pte` if given, else `model` exported here; and where it came from."""
    if pte:
        return Path(pte).read_bytes(), pte
    import time

    start = time.perf_counter()
    data = export_bytes(model, inputs)
    return data, f"exported here in {time.perf_counter() - start:.1f}s"
