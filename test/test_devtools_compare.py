"""executorch.devtools.compare: the one output gate. Each check is shown failing on a corrupted output."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from executorch.devtools.compare import TOLERANCES, assert_outputs_close, compare_outputs, tolerance
from executorch.exir import to_edge_transform_and_lower


def _ref() -> torch.Tensor:
    torch.manual_seed(0)
    return torch.randn(4, 8)


def test_close_outputs_pass_and_report_relative_error():
    e = _ref()
    a = e * (1 + 1e-7)
    result = assert_outputs_close([a], (e,))
    assert result.ok and result.count == 1
    assert 0 < result.max_rel_err < 1e-6


@pytest.mark.parametrize("corrupt", [
    pytest.param(lambda t: torch.zeros_like(t), id="zeros"),
    pytest.param(lambda t: -t, id="flipped-sign"),
    pytest.param(lambda t: t.flip(0), id="permuted-rows"),
    pytest.param(lambda t: t.reshape(-1)[torch.randperm(t.numel(), generator=torch.Generator().manual_seed(1))]
                 .reshape(t.shape), id="shuffled"),
    pytest.param(lambda t: t * 1.001, id="off-by-0.1%"),
])
def test_corrupted_values_fail(corrupt):
    e = _ref()
    result = compare_outputs([corrupt(e)], [e])
    assert not result.ok, result
    assert result.max_rel_err > 1e-5
    with pytest.raises(AssertionError, match="output 0"):
        assert_outputs_close([corrupt(e)], [e])


@pytest.mark.parametrize("scale", [1e-9, 1.0, 1e6])
def test_zeros_fail_at_any_reference_magnitude(scale):
    # The old gate (absolute 1e-5) let an all-zero output pass for a reference around 1e-9.
    e = _ref() * scale
    assert not compare_outputs([torch.zeros_like(e)], [e]).ok
    assert compare_outputs([e * (1 + 1e-7)], [e]).ok


@pytest.mark.parametrize("actual, expected, needle", [
    ([torch.zeros(4, 8, dtype=torch.float64)], [torch.zeros(4, 8)], "float64[4, 8], expected float32[4, 8]"),
    ([torch.zeros(8, 4)], [torch.zeros(4, 8)], "float32[8, 4], expected float32[4, 8]"),
    ([torch.zeros(4, 8)], [torch.zeros(4, 8), torch.zeros(1)], "1 outputs, expected 2"),
    ([torch.zeros(4, 8), torch.zeros(1)], [torch.zeros(4, 8)], "2 outputs, expected 1"),
    ([1.0], [torch.zeros(1)], "expected a tensor"),
])
def test_dtype_shape_and_count_are_checked(actual, expected, needle):
    result = compare_outputs(actual, expected)
    assert not result.ok and needle in str(result)


def test_integer_and_bool_outputs_are_exact():
    e = torch.arange(10)
    assert compare_outputs([e.clone()], [e]).ok
    off = e.clone()
    off[3] += 1
    assert "1 of 10 values differ" in str(compare_outputs([off], [e]))
    mask = e > 4
    assert not compare_outputs([~mask], [mask]).ok
    assert not compare_outputs([True], [1]).ok, "a bool must not pass for the int 1"
    assert not compare_outputs([3], [4]).ok


def test_nan_and_inf_must_match_in_place():
    e = torch.tensor([1.0, float("nan"), float("inf"), -2.0])
    assert compare_outputs([e.clone()], [e]).ok
    assert not compare_outputs([torch.tensor([1.0, 0.0, float("inf"), -2.0])], [e]).ok
    assert not compare_outputs([torch.tensor([1.0, float("nan"), float("-inf"), -2.0])], [e]).ok
    assert not compare_outputs([torch.tensor([float("nan"), float("nan"), float("inf"), -2.0])], [e]).ok


def test_all_zero_reference_needs_zeros():
    e = torch.zeros(3)
    assert compare_outputs([torch.zeros(3)], [e]).ok
    assert not compare_outputs([torch.tensor([0.0, 1e-12, 0.0])], [e]).ok


def test_tolerance_per_dtype_and_override():
    e = _ref().half()
    assert compare_outputs([e * 1.0002], [e]).ok, "half has a looser default"
    assert not compare_outputs([e.float() * 1.0002], [e.float()]).ok
    assert compare_outputs([e.float() * 1.0002], [e.float()], rtol=1e-3).ok


def test_nested_outputs_are_flattened():
    e = _ref()
    assert compare_outputs([e, e * 2], ((e,), [e * 2])).ok
    assert not compare_outputs([e, e], ((e,), [e * 2])).ok


_FACTORY = '''
import torch


class Drift(torch.nn.Module):
    """Negates its output only while exported: the .pte and eager disagree."""

    def __init__(self, drift):
        super().__init__()
        self.drift = drift

    def forward(self, x):
        return -x * 2 if self.drift and torch.compiler.is_exporting() else x * 2


def make_faithful():
    return Drift(False), (torch.arange(1.0, 7.0).reshape(2, 3),)


def make_drifting():
    return Drift(True), (torch.arange(1.0, 7.0).reshape(2, 3),)
'''


def test_run_check_gate_passes_a_faithful_file_and_fails_a_wrong_one(tmp_path):
    # tools/packaging/run_check.py is the minimal-wheel CI's gate, on our runtime and the published one.
    factories = tmp_path / "factories.py"
    factories.write_text(_FACTORY)
    script = Path(__file__).resolve().parents[1] / "tools" / "packaging" / "run_check.py"
    namespace: dict = {}
    exec(compile(_FACTORY, str(factories), "exec"), namespace)
    for name, code in (("make_faithful", 0), ("make_drifting", 1)):
        model, inputs = namespace[name]()
        pte = tmp_path / f"{name}.pte"
        to_edge_transform_and_lower(torch.export.export(model, inputs)).to_executorch().write_to_file(pte)
        proc = subprocess.run([sys.executable, str(script), f"{factories}:{name}", str(pte)],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == code, proc.stderr
        assert ("FAIL:" in proc.stderr) is bool(code) and "max rel err" in proc.stdout


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_tolerance_in_ulps_widens_the_row_never_narrows_it(dtype):
    rtol, atol = TOLERANCES[dtype]
    assert tolerance(dtype) == {"rtol": rtol, "atol": atol}
    eps = torch.finfo(dtype).eps
    wide = tolerance(dtype, 8)
    assert wide == {"rtol": max(rtol, 8 * eps), "atol": max(atol, 8 * eps)}
    e = _ref().to(dtype)
    off = (e.float() * (1 + 6 * eps)).to(dtype)  # six ulps off everywhere, beyond every default row
    assert not compare_outputs([off], [e]).ok or dtype == torch.float32
    assert compare_outputs([off], [e], **wide).ok
    assert not compare_outputs([off * 2], [e], **wide).ok
