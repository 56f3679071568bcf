"""The model zoo for benchmark scripts, loaded by path: it is in the source tree, in no wheel."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def load_models() -> dict:
    models = Path(__file__).resolve().parents[1] / "examples" / "models"
    spec = importlib.util.spec_from_file_location("bench_zoo", models / "__init__.py",
                                                  submodule_search_locations=[str(models)])
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_zoo"] = module
    spec.loader.exec_module(module)
    return module.MODELS
