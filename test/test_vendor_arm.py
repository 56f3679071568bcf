"""Arm's backend from the published wheel, laid beside our package: what of it runs here so far (issue 35)."""

from __future__ import annotations

import importlib
import json
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


def test_arm_package_imports_beside_ours(arm_backends):  # noqa: F811  (pytest fixture)
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
    assert delegate.id in ("TOSABackend", "EthosUBackend")
    where = delegate.processed
    return bytes(program.segment_data[where.index] if where.location == 1
                 else program.backend_delegate_data[where.index].data)


def _operators(bpte: Path) -> list[str]:
    """The program's operator table, in order (the order the emitter met them)."""
    from executorch.devtools.bundled_program.serialize import deserialize_from_flatbuffer_to_bundled_program
    from executorch.exir._serialize import read_program

    program = read_program(bytes(deserialize_from_flatbuffer_to_bundled_program(bpte.read_bytes()).program))
    return [f"{op.name}.{op.overload}" for op in program.execution_plan[0].operators]


# Model files Arm's script loads by path (-m FILE.py: ModelUnderTest, ModelInputs), our own definitions.
MODELS = {"mv2": ("mobilenet_v2", "make_mobilenet_v2"), "w2l": ("wav2letter", "make_wav2letter")}


def _model_file(root: Path, name: str) -> Path:
    module, factory = MODELS[name]
    path = root / f"{name}.py"
    path.write_text(f"import sys\nsys.path.insert(0, {str(ROOT / 'examples' / 'models')!r})\n"
                    f"from {module} import {factory}\nModelUnderTest, ModelInputs = {factory}()\n")
    return path


class ArmFlows:
    """`aot_arm_compiler --delegate --bundleio` runs, each once per session: on this package (the source
    tree, or the minimal wheel ET_MINIMAL_WHEEL names, installed apart with its dependency as the vendor's
    tools pin it) with Arm's folders beside it, and on the published stack (ET_REFERENCE_ARM_PYTHON,
    `setup.sh --arm`) for the same model file. Quantized targets (`-q`) quantize with Arm's quantizer
    first: its passes retrace the model through our ExportPass."""

    def __init__(self, backends: Path, root: Path):
        self.backends, self.root, self.python = backends, root, _arm_python()
        self.package = root / "pkg"
        wheel = os.environ.get("ET_MINIMAL_WHEEL")
        if wheel:  # the minimal wheel as a vendor bundles it, in place of the source tree
            subprocess.run([self.python, "-m", "pip", "install", "-q", "--no-deps", "--target", str(self.package),
                            wheel], check=True)
        else:
            self.package.mkdir()
            (self.package / "executorch").symlink_to(ROOT)
        self._done: dict = {}

    def args(self, model: str, target: str) -> list[str]:
        quantized = "INT" in target or target.startswith("ethos")
        return ["-m", str(_model_file(self.root, model)), "-t", target, *(["-q"] if quantized else []),
                "--delegate", "--bundleio"]

    def ours(self, model: str, target: str) -> Path:
        key = ("ours", model, target)
        if key not in self._done:
            out = self.root / f"ours-{model}-{target}"
            proc = subprocess.run(vendor_python_command(self.backends,
                                                        "executorch.backends.arm.scripts.aot_arm_compiler",
                                                        *self.args(model, target), "--output", str(out),
                                                        python=self.python),
                                  capture_output=True, text=True, timeout=900, cwd=self.root,
                                  env={**os.environ, "PYTHONPATH": str(self.package)})
            assert proc.returncode == 0, proc.stderr[-3000:]
            self._done[key] = out / f"{model}_arm_delegate_{target}.bpte"
        return self._done[key]

    def theirs(self, model: str, target: str) -> Path:
        published = os.environ.get("ET_REFERENCE_ARM_PYTHON")
        if not published:
            pytest.skip("ET_REFERENCE_ARM_PYTHON is not set (see ../shared/tools/reference-runtime, setup.sh --arm): "
                        "the files are not compared with the published stack's")
        key = ("theirs", model, target)
        if key not in self._done:
            out = self.root / f"theirs-{model}-{target}"
            proc = subprocess.run([published, "-m", "executorch.backends.arm.scripts.aot_arm_compiler",
                                   *self.args(model, target), "--output", str(out)], capture_output=True, text=True,
                                  timeout=900, cwd=self.root,
                                  env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
            assert proc.returncode == 0, proc.stderr[-3000:]
            self._done[key] = out / f"{model}_arm_delegate_{target}.bpte"
        return self._done[key]


@pytest.fixture(scope="module")
def arm_flows(arm_backends, tmp_path_factory) -> ArmFlows:  # noqa: F811  (pytest fixture)
    return ArmFlows(arm_backends, tmp_path_factory.mktemp("arm"))


# MobileNetV2 on each target (Ethos-U55: Vela compiles the command stream), and Wav2Letter on the
# Ethos-U55, where its first convolution stays outside the delegate on portable kernels.
FLOWS = [("mv2", "TOSA-1.0+FP"), ("mv2", "TOSA-1.0+INT"), ("mv2", "ethos-u55-128"), ("w2l", "ethos-u55-128")]


@pytest.mark.parametrize("model,target", FLOWS, ids=[f"{m}-{t}" for m, t in FLOWS])
def test_aot_arm_compiler_writes_the_published_stacks_delegate(arm_flows, model, target):
    ours = arm_flows.ours(model, target)
    payload = _delegate_payload(ours)
    # The weights in the delegate: MobileNetV2's 3.5 M float or int8 parameters; Wav2Letter's int8 ones
    # but its first convolution's.
    assert len(payload) > {"mv2": 13_000_000 if "FP" in target else 3_400_000, "w2l": 26_000_000}[model]
    theirs = arm_flows.theirs(model, target)
    assert payload == _delegate_payload(theirs)
    # What stays outside the delegate is emitted in the published exporter's order.
    assert _operators(ours) == _operators(theirs)


@pytest.mark.parametrize("target", ["TOSA-1.0+FP", "TOSA-1.0+INT"])
def test_the_tosa_payload_runs_on_the_tosa_reference_model_like_the_model(arm_flows, target):
    """Float: the reference model's output within 1e-4 of the bundled expected output (eager's). Quantized:
    within the quantized module's own quantization error (how far its expected output is from the float
    model's)."""
    bpte = arm_flows.ours("mv2", target)
    proc = subprocess.run([arm_flows.python, str(ROOT / "test" / "vendor_tosa_check.py"), str(bpte),
                           str(_model_file(arm_flows.root, "mv2"))], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(arm_flows.package)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    if "FP" in target:
        assert got["expected_from_float"] == 0.0
        assert got["max_abs_diff"] <= 1e-4 * got["max_abs_expected"], got
    else:
        assert 0 < got["step"] < got["expected_from_float"], got
        assert got["max_abs_diff"] <= got["expected_from_float"], got


def test_the_published_reader_reads_our_bundled_program_as_the_published_one(arm_flows):
    """The published stack's bundled-program and program readers decode our `.bpte` into what they decode
    from its own (test cases, and the program field for field)."""
    ours, theirs = arm_flows.ours("mv2", "TOSA-1.0+INT"), arm_flows.theirs("mv2", "TOSA-1.0+INT")
    script = ("import sys\n"
              "from executorch.devtools.bundled_program.serialize import "
              "deserialize_from_flatbuffer_to_bundled_program\n"
              "from executorch.exir._serialize._program import deserialize_pte_binary\n"
              "def read(p):\n"
              "    b = deserialize_from_flatbuffer_to_bundled_program(open(p, 'rb').read())\n"
              "    return b.method_test_suites, deserialize_pte_binary(bytes(b.program))\n"
              "ours, theirs = read(sys.argv[1]), read(sys.argv[2])\n"
              "assert ours[0] == theirs[0], 'test cases differ'\n"
              "assert ours[1].program == theirs[1].program, 'programs differ'\n"
              "print('same')\n")
    proc = subprocess.run([os.environ["ET_REFERENCE_ARM_PYTHON"], "-c", script, str(ours), str(theirs)],
                          capture_output=True, text=True, timeout=600,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert proc.returncode == 0 and proc.stdout.strip() == "same", proc.stderr[-3000:]
