"""The vectorised transformer kernels (softmax, log-softmax, layer norm, GELU) on the native runtime match
eager torch within a relative tolerance, on odd shapes, strided reductions, masked rows and 16-bit floats."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from executorch.devtools.compare import compare_outputs, tolerance
from executorch.exir import to_edge_transform_and_lower

from conftest import project_runtimes  # noqa: E402

NATIVE = project_runtimes().get("native")
pytestmark = pytest.mark.skipif(
    NATIVE is None, reason="native runtime not built (bash tools/run_tests.sh builds it; needs a C++ compiler)")

# float32: the kernels' exp/erfc are good to a few ulp and their sums run in a different order from torch's,
# which compare's float32 row allows. 16-bit floats: two units in the last place (one rounding each side
# of a float32 computation).
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
ULPS = 2


class Fn(torch.nn.Module):
    def __init__(self, fn, *params: torch.Tensor):
        super().__init__()
        self.fn = fn
        self.params = torch.nn.ParameterList(params)

    def forward(self, x):
        return self.fn(x, *self.params)


def _run(fn, x: torch.Tensor, *params: torch.Tensor):
    model = Fn(fn, *params).eval()
    pte = to_edge_transform_and_lower(torch.export.export(model, (x,))).to_executorch().buffer
    got = NATIVE.load_program(bytes(pte)).load_method("forward").execute([x])[0]
    with torch.no_grad():
        return got, model(x)


def _check(fn, x: torch.Tensor, *params: torch.Tensor) -> None:
    got, expected = _run(fn, x, *params)
    result = compare_outputs([got], [expected], **tolerance(x.dtype, ULPS))
    assert result.ok, str(result)


def _randn(*shape, dtype=torch.float32, scale=1.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * scale).to(dtype)


SOFTMAX_CASES = {
    # (shape, dim): the last dim (contiguous lines, with a tail after the 16-lane body), and inner dims
    # narrower and wider than the 64-line block of the strided path.
    "rows_197": ((6, 197), -1),
    "rows_1": ((4, 1), -1),
    "rows_odd": ((3, 5, 37), 2),
    "strided_33": ((2, 5, 33), 1),
    "strided_130": ((2, 70, 130), 1),
    "outer_dim": ((9, 4, 3), 0),
}


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("case", sorted(SOFTMAX_CASES))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_softmax_matches_torch(case, log, dtype):
    shape, dim = SOFTMAX_CASES[case]
    op = torch.log_softmax if log else torch.softmax
    _check(lambda x: op(x, dim), _randn(*shape, dtype=dtype, scale=4.0))


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_softmax_of_masked_and_extreme_rows(log):
    x = _randn(5, 40, scale=30.0)
    x[0, 3:] = float("-inf")  # a causal-mask row: what is masked out must be exactly 0 (or -inf)
    x[1] = x[1] * 100  # entries far below the max underflow (torch keeps denormals, these kernels give 0)
    x[2, 7] = 80.0  # one dominant entry
    op = torch.log_softmax if log else torch.softmax
    got, expected = _run(lambda t: op(t, -1), x)
    masked = torch.isinf(x)
    assert torch.equal(torch.isinf(got), torch.isinf(expected))
    assert (got[masked] == (float("-inf") if log else 0.0)).all()
    result = compare_outputs([got], [expected], rtol=1e-5, atol=1e-5)
    assert result.ok, str(result)


def test_softmax_of_an_all_masked_row_is_nan_like_torch():
    x = _randn(2, 9)
    x[1] = float("-inf")
    got, expected = _run(lambda t: torch.softmax(t, -1), x)
    assert torch.isnan(expected[1]).all() and torch.isnan(got[1]).all()
    assert not torch.isnan(got[0]).any()


LAYER_NORM_CASES = {"n7": (4, 7), "n384": (3, 5, 384), "n1000": (2, 1000), "n1": (6, 1)}


@pytest.mark.parametrize("affine", ["weight_bias", "weight", "none"])
@pytest.mark.parametrize("case", sorted(LAYER_NORM_CASES))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_layer_norm_matches_torch(case, affine, dtype):
    if case == "n1" and dtype != torch.float32:
        pytest.skip("torch's 16-bit layer norm of one element returns rounding noise (~3e-4), not the exact 0")
    shape = LAYER_NORM_CASES[case]
    n = shape[-1]
    # Rows centred away from 0, so a one-pass variance would lose digits.
    x = (_randn(*shape) + 8.0).to(dtype)
    params = []
    if affine != "none":
        params.append(_randn(n, seed=1, dtype=dtype))
    if affine == "weight_bias":
        params.append(_randn(n, seed=2, dtype=dtype))
    _check(lambda t, *p: F.layer_norm(t, (n,), *p, eps=1e-6), x, *params)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("shape", [(1000,), (3, 37, 5), (2, 4096 * 5 + 3)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gelu_matches_torch(shape, approximate, dtype):
    _check(lambda t: F.gelu(t, approximate=approximate), _randn(*shape, dtype=dtype, scale=4.0))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_keeps_precision_far_out(approximate):
    # Where torch's own 1 + erf(x) cancels (x < -4), compare with a float64 reference instead.
    x = torch.linspace(-9.0, 9.0, 4001)
    got, _ = _run(lambda t: F.gelu(t, approximate=approximate), x)
    xd = x.double()
    # Written without 1 + erf and 1 + tanh, which cancel even in float64 out here.
    expected = 0.5 * xd * torch.special.erfc(-xd / 2**0.5)
    if approximate == "tanh":
        expected = xd * torch.sigmoid(2 * 0.7978845608028654 * (xd + 0.044715 * xd**3))
    rel = ((got.double() - expected).abs() / expected.abs().clamp_min(1e-30))[expected.abs() > 1e-30]
    assert rel.max().item() < 2e-5


def test_a_corrupted_result_fails_the_gate():
    x = _randn(6, 197, scale=4.0)
    got, expected = _run(lambda t: torch.softmax(t, -1), x)
    assert compare_outputs([got], [expected], **tolerance(torch.float32, ULPS)).ok
    worst = expected.argmax()
    bad = got.clone()
    bad.view(-1)[worst] *= 1 + 1e-3
    assert not compare_outputs([bad], [expected], **tolerance(torch.float32, ULPS)).ok
