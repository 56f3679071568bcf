"""XNNPACK lowering through the MINIMAL wheel: built, installed into a directory of its own, used
from a process that cannot see the source tree; the file runs on the published runtime like eager."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import torch

from _packaging import REPO, build_wheel, copy_tree, wheel_metadata  # noqa: E402
from conftest import zoo_factory_spec  # noqa: E402
from xnnpack_structure import structure  # noqa: E402

from executorch.devtools.compare import assert_outputs_close  # noqa: E402
from executorch.examples.models import MODELS  # noqa: E402

# Issue 22's budget of 300 KB, raised to 312 KB by issue 34's hardening (safe ETRecord loading, durable
# atomic writes, the runtime's file errors: 310,315 B; 311,675 B with QD8 convolutions), then to 336 KB by
# the exir surface vendor backends import (issue 35, which caps it at 400 KB: edge op objects, sym_util,
# graph_module, the program transforms: 328,593 B), then to 344 KB by the example-model registry those scripts
# import (346,683 B; 349,979 B with Wav2Letter and the ExportPass size helpers), then to 349 KB by what Vulkan's
# backend runs in its preprocess (issue 35: SpecPropPass, the sym-shape passes, the spec-based planners, flatc on
# dataclass JSON, FuseBatchNormPass, the quantized embeddings: 344,263 -> 356,834 B), then to 360 KB by Core ML's
# and OpenVINO's imports (dim_order_utils, DimOrderOpsRevertPass), optimum's recommended command (the custom KV
# caches in examples.models.llama, the quantized-embedding fusion) and the names upstream's own export tests patch
# (365,931 B); KB = 1024 B as in `inspect_wheel.py --max-kb`.
MAX_WHEEL_BYTES = 360 * 1024


@pytest.fixture(scope="module")
def wheel_lowered(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("xnn_wheel")
    wheel = build_wheel(copy_tree(root / "src"), root / "dist", {"EXECUTORCH_BUILD_MINIMAL": "1"})
    site = root / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(site),
                    str(wheel)], check=True, capture_output=True, timeout=120)
    # -S: the source tree's editable install is invisible; torch and flatbuffers come after the wheel.
    path = os.pathsep.join([str(site), sysconfig.get_paths()["purelib"]])
    pte = root / "mobilenet_v2.pte"
    proc = subprocess.run([sys.executable, "-S", str(Path(__file__).with_name("xnnpack_wheel_export.py")),
                           zoo_factory_spec("mobilenet_v2"), str(pte)],
                          env={**os.environ, "PYTHONPATH": path}, cwd=root, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"wheel": wheel, "site": site, "pte": pte, "imported": Path(proc.stdout.strip().splitlines()[-1])}


def test_minimal_wheel_is_pure_python_small_and_carries_the_backend(wheel_lowered):
    wheel = wheel_lowered["wheel"]
    names, _, tags = wheel_metadata(wheel)
    assert tags["Tag"] == "py3-none-any"
    assert not [n for n in names if n.endswith((".so", ".pyd", ".dylib"))]
    for module in ("xnnpack_preprocess.py", "partition/xnnpack_partitioner.py", "operators/op_conv.py"):
        assert f"executorch/backends/xnnpack/{module}" in names
    assert wheel.stat().st_size <= MAX_WHEEL_BYTES, f"{wheel.name}: {wheel.stat().st_size:,} bytes"


def test_lowering_used_the_installed_wheel(wheel_lowered):
    assert wheel_lowered["imported"].is_relative_to(wheel_lowered["site"]), wheel_lowered["imported"]
    assert not wheel_lowered["imported"].is_relative_to(REPO)


def test_wheel_lowered_mobilenet_v2_runs_on_published_xnnpack(wheel_lowered, reference_runtime, tmp_path):
    s = structure(wheel_lowered["pte"])
    assert s.delegates == 1 and not s.kernel_calls, s
    model, inputs = MODELS["mobilenet_v2"]()
    with torch.no_grad():
        expected = model(*inputs)
    assert_outputs_close(reference_runtime.run(wheel_lowered["pte"], inputs, tmp_path), [expected])
