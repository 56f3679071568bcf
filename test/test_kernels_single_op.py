"""The portable kernels on the native runtime: every single-op case and zoo model matches eager
torch (executorch.devtools.compare's tolerances), from files written by this package's exporter and, when
ET_REFERENCE_PYTHON is set, by the published exporter (whose programs pass arguments exactly as upstream does)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch

from executorch.devtools.compare import assert_outputs_close
from executorch.exir import to_edge_transform_and_lower

from conftest import load_zoo, project_runtimes  # noqa: E402
from single_op_models import CASES, CASES_BY_NAME  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
NATIVE = project_runtimes().get("native")
pytestmark = pytest.mark.skipif(
    NATIVE is None, reason="native runtime not built (bash tools/run_tests.sh builds it; needs a C++ compiler)")


ZOO = load_zoo()


def _assert_matches_eager(outputs: list, expected) -> None:
    assert_outputs_close(outputs, expected)


def _run_and_check(pte: bytes, model, runs) -> None:
    method = NATIVE.load_program(pte).load_method("forward")
    for inputs in runs:
        with torch.no_grad():
            expected = model(*inputs)
        _assert_matches_eager(method.execute(list(inputs)), expected)


def _runs(case) -> list:
    _, inputs = case.factory()
    return [inputs] + ([case.resized_inputs()] if case.resized_inputs else [])


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_single_op_from_this_exporter(case):
    model, inputs = case.factory()
    ds = case.dynamic_shapes() if case.dynamic_shapes else None
    pte = to_edge_transform_and_lower(torch.export.export(model, inputs, dynamic_shapes=ds)).to_executorch().buffer
    _run_and_check(bytes(pte), model, _runs(case))


@pytest.mark.parametrize("name", sorted(ZOO.MODELS))
def test_zoo_model_from_this_exporter(name):
    model, inputs = ZOO.MODELS[name]()
    ds = ZOO.DYNAMIC_SHAPES[name]() if name in ZOO.DYNAMIC_SHAPES else None
    pte = to_edge_transform_and_lower(torch.export.export(model, inputs, dynamic_shapes=ds)).to_executorch().buffer
    _run_and_check(bytes(pte), model, [inputs])


# Runs in the reference python: writes every single-op case and zoo model as DIR/NAME.pte.
_PUBLISHED_EXPORT = """
import importlib.util, sys, warnings
from pathlib import Path
warnings.filterwarnings("ignore")
import torch
from executorch.exir import to_edge_transform_and_lower
test_dir, repo, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
sys.path.insert(0, str(test_dir))
from single_op_models import CASES
spec = importlib.util.spec_from_file_location("zoo", repo / "examples/models/__init__.py",
                                              submodule_search_locations=[str(repo / "examples/models")])
zoo = importlib.util.module_from_spec(spec); sys.modules["zoo"] = zoo; spec.loader.exec_module(zoo)
jobs = [(c.name, c.factory, c.dynamic_shapes) for c in CASES]
jobs += [("zoo_" + n, f, zoo.DYNAMIC_SHAPES.get(n)) for n, f in zoo.MODELS.items()]
for name, factory, dynamic in jobs:
    model, inputs = factory()
    ep = torch.export.export(model, inputs, dynamic_shapes=dynamic() if dynamic else None)
    (out / (name + ".pte")).write_bytes(to_edge_transform_and_lower(ep).to_executorch().buffer)
"""


@pytest.fixture(scope="module")
def published_files(tmp_path_factory, reference_runtime) -> Path:
    root = tmp_path_factory.mktemp("published")
    script = root / "export_all.py"
    script.write_text(_PUBLISHED_EXPORT)
    proc = subprocess.run([reference_runtime.python, str(script), str(Path(__file__).parent), str(REPO), str(root)],
                          capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return root


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_single_op_from_published_exporter(case, published_files):
    model, _ = case.factory()
    _run_and_check((published_files / f"{case.name}.pte").read_bytes(), model, _runs(case))


@pytest.mark.parametrize("name", sorted(ZOO.MODELS))
def test_zoo_model_from_published_exporter(name, published_files):
    model, inputs = ZOO.MODELS[name]()
    _run_and_check((published_files / f"zoo_{name}.pte").read_bytes(), model, [inputs])


def test_case_names_are_known():
    assert set(CASES_BY_NAME) == {c.name for c in CASES}
