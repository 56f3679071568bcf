"""`python -m executorch.exir export` (executorch.cli): zoo names and FILE.py:FACTORY, verification against
eager (and that it fails on a corrupted output), options, and one-line errors for bad model specs."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from executorch.cli.main import main
from executorch.devtools.compare import assert_outputs_close
from executorch.runtime import Runtime

FACTORIES = '''
import torch


class Affine(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 3)

    def forward(self, x):
        return torch.tanh(self.fc(x))


def make_affine():
    return Affine().eval(), (torch.randn(2, 6),)


def make_affine_dynamic_shapes():
    return ({0: torch.export.Dim("batch", max=32)},)


class Drifting(torch.nn.Module):
    """Adds 0.5 only while being exported: eager and the exported program disagree."""

    def forward(self, x):
        return x + 0.5 if torch.compiler.is_exporting() else x * 1.0


def make_drifting():
    return Drifting(), (torch.ones(3),)


def make_not_a_pair():
    return Affine()


def make_raises():
    raise ValueError("weights are missing")
'''


@pytest.fixture
def factories(tmp_path) -> Path:
    path = tmp_path / "factories.py"
    path.write_text(textwrap.dedent(FACTORIES))
    return path


def _export(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["export", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def _run(pte: Path, inputs, method: str = "forward") -> list:
    return Runtime.get().load_program(pte).load_method(method).execute(list(inputs))


def test_zoo_model_exports_verifies_and_prints_summary(tmp_path, capsys):
    pte = tmp_path / "multi_io.pte"
    code, out, err = _export(capsys, "multi_io", "-o", str(pte))
    assert code == 0, err
    assert pte.is_file() and out.startswith(f"{pte}: {pte.stat().st_size:,} bytes")
    assert "inputs (2):" in out and "outputs (4):" in out
    assert re.search(r"time: torch\.export [\d.]+s, lower [\d.]+s, write [\d.]+s, verify [\d.]+s", out)
    assert re.search(rf"\nOK: {re.escape(str(pte))} \([\d.]+ KiB\) matches eager \(4 outputs, max rel err [\d.e+-]+ "
                     r"on the \w+ runtime\)\n$", out)


def test_file_factory_exports_and_runs_like_eager(factories, tmp_path, capsys):
    pte = tmp_path / "affine.pte"
    code, _, err = _export(capsys, f"{factories}:make_affine", "-o", str(pte), "--seed", "7")
    assert code == 0, err
    torch.manual_seed(7)
    model = torch.nn.Linear(6, 3)
    x = torch.randn(2, 6)
    assert_outputs_close(_run(pte, [x]), [torch.tanh(model(x))])


def test_seed_decides_the_weights(factories, tmp_path, capsys):
    files = {}
    for name, seed in (("a", "1"), ("b", "1"), ("c", "2")):
        files[name] = tmp_path / f"{name}.pte"
        assert _export(capsys, f"{factories}:make_affine", "-o", str(files[name]), "--seed", seed,
                       "--no-verify")[0] == 0
    assert files["a"].read_bytes() == files["b"].read_bytes() != files["c"].read_bytes()


def test_method_name_and_no_verify(factories, tmp_path, capsys):
    pte = tmp_path / "m.pte"
    code, out, _ = _export(capsys, f"{factories}:make_affine", "-o", str(pte), "--method-name", "predict",
                           "--no-verify")
    assert code == 0 and "OK:" not in out and "method 'predict'" in out
    assert re.search(rf"\nwrote {re.escape(str(pte))} \([\d.]+ (bytes|KiB)\); not checked against eager "
                     r"\(--no-verify\)\n$", out)
    assert Runtime.get().load_program(pte).method_names == {"predict"}
    assert _run(pte, [torch.randn(2, 6)], "predict")[0].shape == (2, 3)


def test_bundled_writes_a_bpte_whose_case_is_eager(factories, tmp_path, capsys):
    from executorch.devtools.bundled_program.run import run_bundled_program, to_torch
    from executorch.devtools.bundled_program.serialize import deserialize_from_flatbuffer_to_bundled_program

    pte, bpte = tmp_path / "m.pte", tmp_path / "m.bpte"
    code, _, err = _export(capsys, f"{factories}:make_affine", "-o", str(pte), "--seed", "3", "--bundled", str(bpte))
    assert code == 0, err
    torch.manual_seed(3)
    model = torch.nn.Linear(6, 3)
    x = torch.randn(2, 6)
    bundle = deserialize_from_flatbuffer_to_bundled_program(bpte.read_bytes())
    assert bytes(bundle.program) == pte.read_bytes()
    (suite,) = bundle.method_test_suites
    (case,) = suite.test_cases
    assert suite.method_name == "forward"
    assert torch.equal(to_torch(case.inputs[0]), x)
    with torch.no_grad():
        assert_outputs_close([to_torch(case.expected_outputs[0])], [torch.tanh(model(x))])
    assert [r.ok for r in run_bundled_program(bpte)] == [True]
    assert main(["bundled", str(bpte)]) == 0
    assert "OK: 1/1 test cases passed" in capsys.readouterr().out


def test_dynamic_uses_the_factory_sibling(factories, tmp_path, capsys):
    pte = tmp_path / "dyn.pte"
    code, out, err = _export(capsys, f"{factories}:make_affine", "-o", str(pte), "--dynamic")
    assert code == 0, err
    assert "float32[32, 6] (dynamic; sizes are upper bounds)" in out
    assert _run(pte, [torch.randn(19, 6)])[0].shape == (19, 3)


def test_dynamic_zoo_model_runs_other_sequence_lengths(tmp_path, capsys):
    from executorch.examples.models import MODELS

    pte = tmp_path / "encoder.pte"
    code, out, err = _export(capsys, "transformer_encoder", "--dynamic", "-o", str(pte))
    assert code == 0, err
    assert "float32[2, 128, 64] (dynamic; sizes are upper bounds)" in out
    model, _ = MODELS["transformer_encoder"]()
    x = torch.randn(2, 37, 64)
    with torch.no_grad():
        assert_outputs_close(_run(pte, [x]), [model(x)])


def test_mismatch_with_eager_exits_1(factories, tmp_path, capsys):
    pte = tmp_path / "drift.pte"
    code, _, err = _export(capsys, f"{factories}:make_drifting", "-o", str(pte))
    assert code == 1
    assert re.match(rf"FAIL: {re.escape(str(pte))} \([\d.]+ (bytes|KiB)\) was written but does not match eager "
                    r"\(1 output, max rel err ", err)
    assert "output 0: 3 of 3 values beyond tolerance" in err


class _CorruptingRuntime:
    """Runtime.get() stand-in that runs the real runtime, then corrupts what it returns."""

    def __init__(self, real, corrupt):
        self.backend, self._real, self._corrupt = real.backend, real, corrupt

    def load_program(self, path):
        program, corrupt = self._real.load_program(path), self._corrupt

        class _Program:
            def load_method(self, name):
                method = program.load_method(name)

                class _Method:
                    def execute(self, inputs):
                        return corrupt(list(method.execute(inputs)))
                return _Method()
        return _Program()


@pytest.mark.parametrize(("corrupt", "message"), [
    (lambda outs: [torch.zeros_like(o) for o in outs], "values beyond tolerance"),
    (lambda outs: [-o for o in outs], "values beyond tolerance"),
    (lambda outs: [o.flip(-1) for o in outs], "values beyond tolerance"),
    (lambda outs: [outs[0].double()] + outs[1:], "output 0: got float64[4, 8], expected float32[4, 8]"),
    (lambda outs: [outs[0].reshape(8, 4)] + outs[1:], "output 0: got float32[8, 4], expected float32[4, 8]"),
    (lambda outs: outs[:-1], "3 outputs, expected 4"),
], ids=["zeros", "flipped-sign", "permuted", "dtype", "shape", "count"])
def test_verify_gate_fails_on_a_corrupted_output(monkeypatch, tmp_path, capsys, corrupt, message):
    real = Runtime.get()
    monkeypatch.setattr(Runtime, "get", staticmethod(lambda: _CorruptingRuntime(real, corrupt)))
    pte = tmp_path / "multi_io.pte"
    code, out, err = _export(capsys, "multi_io", "-o", str(pte))
    assert code == 1 and "OK:" not in out
    assert err.startswith(f"FAIL: {pte} ") and message in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_such_model", "unknown model 'no_such_model'; available: llama_decoder, mobilenet_v2, multi_io, "
                          "resnet18, resnet50, transformer_encoder, vit_tiny"),
        ("missing.py:make", "bad model 'missing.py:make': no file missing.py"),
        ("{f}:make_nothing", "has no function 'make_nothing'; it defines: Affine, Drifting, make_affine"),
        ("{f}:make_not_a_pair", "returned a Affine; it must return (torch.nn.Module, tuple_of_example_inputs)"),
        ("{f}:make_raises", "raised ValueError: weights are missing"),
        ("{f}:1bad", "'1bad' is not a function name"),
        ("resnet:18", "expected a zoo name or FILE.py:FACTORY"),
        ("resnet18", None),
    ],
)
def test_bad_model_spec_exits_2_in_one_line(factories, tmp_path, capsys, spec, message):
    spec = spec.format(f=factories)
    out = tmp_path / "never.pte"
    args = [spec, "-o", str(out)] + (["--dynamic"] if spec == "resnet18" else [])
    code, _, err = _export(capsys, *args)
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1
    assert message is None or message in err
    assert not out.exists()


def test_zoo_name_without_the_zoo_says_how_to_proceed(monkeypatch, tmp_path, capsys):
    # A None entry in sys.modules makes the import fail, as in a wheel without the zoo.
    monkeypatch.setitem(sys.modules, "executorch.examples.models", None)
    code, _, err = _export(capsys, "resnet18", "-o", str(tmp_path / "x.pte"))
    assert code == 2 and err.count("\n") == 1
    assert "model zoo (executorch.examples.models) is not installed" in err and "FILE.py:FACTORY" in err


def test_module_entry_point_error_has_no_traceback(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "executorch.exir", "export", "nope", "-o", str(tmp_path / "x.pte")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "error: unknown model 'nope'" in proc.stderr


@pytest.mark.parametrize("name", ["multi_io", "transformer_encoder"])
def test_cli_output_runs_on_published_runtime(name, reference_runtime, tmp_path, capsys):
    from executorch.examples.models import MODELS

    pte = tmp_path / f"{name}.pte"
    code, _, err = _export(capsys, name, "-o", str(pte), "--no-verify")
    assert code == 0, err
    model, inputs = MODELS[name]()
    outputs = reference_runtime.run(pte, inputs, tmp_path)
    with torch.no_grad():
        assert_outputs_close(outputs, model(*inputs))
