"""HF static-cache export through the MINIMAL wheel: the wheel is built, installed into a directory
of its own and a Llama exported with it in a process that cannot see the source tree; the file
then decodes token by token on every runtime as eager does."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import torch

from _packaging import REPO, build_wheel, copy_tree, wheel_metadata  # noqa: E402
from conftest import project_runtimes  # noqa: E402

pytest.importorskip("transformers", reason="transformers is not installed (requirements-dev.txt pins it)")
import hf_tiny_models as hf  # noqa: E402
from test_models_llm_hf import _check_steps, _decode  # noqa: E402

ARCH = "llama"


@pytest.fixture(scope="module")
def wheel_export(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("hf_wheel")
    wheel = build_wheel(copy_tree(root / "src"), root / "dist", {"EXECUTORCH_BUILD_MINIMAL": "1"})
    _, _, tags = wheel_metadata(wheel)
    assert tags["Tag"] == "py3-none-any", f"{wheel.name} is not the minimal (pure Python) wheel"
    site = root / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(site),
                    str(wheel)], check=True, capture_output=True, timeout=120)
    # -S: no site-packages hooks, so the source tree's editable install is invisible; torch,
    # transformers and flatbuffers come from this environment's site-packages, after the wheel.
    path = os.pathsep.join([str(site), str(Path(__file__).parent), sysconfig.get_paths()["purelib"]])
    pte = root / f"{ARCH}.pte"
    proc = subprocess.run([sys.executable, "-S", str(Path(__file__).with_name("hf_wheel_export.py")), str(pte), ARCH],
                          env={**os.environ, "PYTHONPATH": path}, cwd=root, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    imported = Path(proc.stdout.strip().splitlines()[-1])
    wrapper = hf.make_wrapper(ARCH)
    hf.export(wrapper)
    torch.save(hf.calls(), root / f"{ARCH}.calls.pt")
    return {"root": root, "pte": pte, "imported": imported, "site": site, "eager": hf.eager_steps(wrapper)}


def test_export_used_the_installed_wheel(wheel_export):
    assert wheel_export["imported"].is_relative_to(wheel_export["site"]), wheel_export["imported"]
    assert not wheel_export["imported"].is_relative_to(REPO)


@pytest.mark.parametrize("engine", ["python", "native"])
def test_wheel_export_decodes_like_eager(wheel_export, engine):
    runtimes = project_runtimes()
    if engine not in runtimes:
        pytest.skip("the native runtime is not built (bash tools/run_tests.sh builds it)")
    steps = _decode(runtimes[engine], wheel_export["pte"])
    _check_steps(steps, wheel_export["eager"], f"{ARCH} exported with the minimal wheel, on the {engine} runtime")


def test_wheel_export_decodes_on_the_published_runtime(wheel_export, reference_runtime):
    root = wheel_export["root"]
    runner = Path(__file__).with_name("reference_stateful.py")
    proc = subprocess.run([reference_runtime.python, str(runner), str(root), ARCH], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0 and not (root / f"{ARCH}.err.txt").exists(), proc.stderr[-2000:]
    steps = [outs[0] for outs in torch.load(root / f"{ARCH}.out.pt")]
    _check_steps(steps, wheel_export["eager"], f"{ARCH} exported with the minimal wheel, on the published runtime")
