"""Arm's backend from the published wheel, laid beside our package: what of it runs here so far (issue 35)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from vendor_backends import arm_backends, vendor_python_command  # noqa: F401 (fixture)

ROOT = Path(__file__).resolve().parents[1]


def test_exir_warnings_decorators_warn_as_pep_702():
    from executorch.exir._warnings import ExperimentalWarning, deprecated, experimental

    @experimental("f is experimental")
    def f(x):
        return x + 1

    @deprecated("C is old")
    class C:
        def __init__(self, a):
            self.a = a

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert f(1) == 2 and C(3).a == 3
    assert [(w.category, str(w.message)) for w in seen] == [(ExperimentalWarning, "f is experimental"),
                                                            (DeprecationWarning, "C is old")]
    assert issubclass(ExperimentalWarning, DeprecationWarning) and C.__deprecated__ == "C is old"


def test_exir_reexports_torch_export_program_types():
    import torch.export

    import executorch.exir as exir

    assert exir.ExportedProgram is torch.export.ExportedProgram
    assert exir.ExportGraphSignature is torch.export.ExportGraphSignature


def test_dunder_named_edge_operators_resolve():
    import torch

    from executorch.exir.dialects._ops import ops as exir_ops

    assert exir_ops.edge.aten.__rshift__.Scalar._op is torch.ops.aten.__rshift__.Scalar
    assert not hasattr(exir_ops.edge.aten, "__deepcopy__")


def test_arm_package_imports_beside_ours(arm_backends):
    arm = importlib.import_module("executorch.backends.arm")
    assert arm.__file__.startswith(str(arm_backends))
    assert "EthosUPartitioner" in dir(arm)
    # Our own backends still come first on the shared namespace path.
    xnnpack = importlib.import_module("executorch.backends.xnnpack")
    assert not xnnpack.__file__.startswith(str(arm_backends))


def _arm_python() -> str:
    """A Python that has Arm's tools (tosa-tools, ml_dtypes) beside torch: ET_ARM_PYTHON, or this one."""
    python = os.environ.get("ET_ARM_PYTHON")
    if python:
        return python
    pytest.importorskip("tosa_serializer", reason="Arm's tools are not installed here; set ET_ARM_PYTHON to a "
                        "Python with torch==2.13.0, torchao, tosa-tools==2026.5.0 and ml_dtypes==0.5.1")
    return sys.executable


def _delegate_payload(bpte: Path) -> bytes:
    from executorch.devtools.bundled_program.serialize import deserialize_from_flatbuffer_to_bundled_program
    from executorch.exir._serialize import read_program

    program = read_program(bytes(deserialize_from_flatbuffer_to_bundled_program(bpte.read_bytes()).program))
    (delegate,) = program.execution_plan[0].delegates
    assert delegate.id == "TOSABackend"
    where = delegate.processed
    return bytes(program.segment_data[where.index] if where.location == 1
                 else program.backend_delegate_data[where.index].data)


@pytest.mark.parametrize("target", ["TOSA-1.0+FP", "TOSA-1.0+INT"])
def test_aot_arm_compiler_lowers_mobilenet_v2_to_the_published_stacks_tosa(arm_backends, tmp_path, target):
    # Arm's own script, unchanged, on this package (the source tree, or the minimal wheel ET_MINIMAL_WHEEL
    # names, installed apart with its dependency as the vendor's tools pin it) with Arm's folders beside it; the
    # published stack (ET_REFERENCE_ARM_PYTHON, `setup.sh --arm`) lowers the same model file. INT
    # quantizes with Arm's quantizer first (`-q`): its passes retrace the model through our ExportPass.
    python = _arm_python()
    model = tmp_path / "mv2.py"
    model.write_text(f"import sys\nsys.path.insert(0, {str(ROOT / 'examples' / 'models')!r})\n"
                     "from mobilenet_v2 import make_mobilenet_v2\n"
                     "ModelUnderTest, ModelInputs = make_mobilenet_v2()\n")
    args = ["-m", str(model), "-t", target, *(["-q"] if "INT" in target else []), "--delegate", "--bundleio"]
    ours = tmp_path / "ours"
    package = tmp_path / "pkg"
    wheel = os.environ.get("ET_MINIMAL_WHEEL")
    if wheel:  # the minimal wheel as a vendor bundles it, in place of the source tree
        subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--target", str(package), wheel], check=True)
    else:
        package.mkdir()
        (package / "executorch").symlink_to(ROOT)
    env = {**os.environ, "PYTHONPATH": str(package)}
    proc = subprocess.run(vendor_python_command(arm_backends, "executorch.backends.arm.scripts.aot_arm_compiler",
                                                *args, "--output", str(ours), python=python),
                          capture_output=True, text=True, timeout=900, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    bpte = ours / f"mv2_arm_delegate_{target}.bpte"
    payload = _delegate_payload(bpte)
    # MobileNetV2's 3.5 M weights in the TOSA flatbuffer: float, or int8 in one delegate.
    assert len(payload) > (13_000_000 if "FP" in target else 3_400_000)
    published = os.environ.get("ET_REFERENCE_ARM_PYTHON")
    if not published:
        pytest.skip("ET_REFERENCE_ARM_PYTHON is not set (see ../shared/tools/reference-runtime, setup.sh --arm): "
                    "the payload is not compared with the published stack's")
    theirs = tmp_path / "theirs"
    proc = subprocess.run([published, "-m", "executorch.backends.arm.scripts.aot_arm_compiler", *args, "--output",
                           str(theirs)], capture_output=True, text=True, timeout=900, cwd=tmp_path,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert payload == _delegate_payload(theirs / f"mv2_arm_delegate_{target}.bpte")
