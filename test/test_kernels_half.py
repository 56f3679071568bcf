"""The portable kernels on float16 and bfloat16: conversions bit-exact with torch, every single-op case and the
transformer zoo models cast to 16 bits match eager natively, and the published runtime runs the same files."""

from __future__ import annotations

import pytest
import torch

from executorch.devtools.compare import assert_outputs_close, compare_outputs, tolerance
from executorch.exir import to_edge_transform_and_lower

from conftest import load_zoo, project_runtimes  # noqa: E402
from single_op_models import CASES, Fn  # noqa: E402

NATIVE = project_runtimes().get("native")
pytestmark = pytest.mark.skipif(
    NATIVE is None, reason="native runtime not built (bash tools/run_tests.sh builds it; needs a C++ compiler)")

DTYPES = [torch.float16, torch.bfloat16]
ZOO = load_zoo()
# Models chain dozens of ops, each rounding once to 16 bits in an order that may differ from eager's:
# allow 4 units in the last place of the dtype, relative to each output's largest value and to each element.
MODEL_ULPS = 4


def _model_tol(dtype: torch.dtype) -> dict:
    return tolerance(dtype, MODEL_ULPS)


def _cast(value, dtype):
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(dtype)
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, dtype) for v in value)
    return value


def _pte(model, inputs) -> bytes:
    return bytes(to_edge_transform_and_lower(torch.export.export(model, inputs)).to_executorch().buffer)


def _run_native(pte: bytes, inputs) -> list:
    return NATIVE.load_program(pte).load_method("forward").execute(list(inputs))


def _float32_values() -> torch.Tensor:
    """Every finite float16 value, the midpoints between neighbours (the ties), points just off them,
    bfloat16's neighbourhoods, overflow and underflow edges, infinities and NaN."""
    halves = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(torch.float16).float()
    halves = halves[torch.isfinite(halves)].sort().values
    mids = (halves[1:].double() + halves[:-1].double()) / 2
    near = torch.cat([mids, torch.nextafter(mids, torch.tensor(0.0, dtype=torch.float64)),
                      torch.nextafter(mids, torch.tensor(1e30, dtype=torch.float64))]).float()
    torch.manual_seed(0)
    spread = torch.randn(200_000) * torch.exp2(torch.randint(-140, 120, (200_000,)).float())
    edges = torch.tensor([65504.0, 65519.99, 65520.0, 65536.0, 1e30, 3.4e38, 2**-24, 2**-25, 2**-25 * 1.0001,
                          2**-26, 1e-45, 0.0, -0.0, float("inf"), float("-inf"), float("nan")])
    return torch.cat([halves, near, spread, -spread, edges])


def _same_bits(actual: torch.Tensor, expected: torch.Tensor) -> bool:
    """Equal bit patterns, except that any NaN matches any NaN (torch's own kernels disagree on the payload)."""
    nan = torch.isnan(expected.float())
    if not torch.equal(nan, torch.isnan(actual.float())):
        return False
    width = torch.int16 if expected.element_size() == 2 else torch.int32
    return torch.equal(actual[~nan].view(width), expected[~nan].view(width))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_float32_to_16bit_rounds_as_torch_does(dtype):
    x = _float32_values()
    out = _run_native(_pte(Fn(lambda t: t.to(dtype)), (x,)), [x])[0]
    assert out.dtype == dtype and _same_bits(out, x.to(dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_16bit_value_widens_as_torch_does(dtype):
    x = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(dtype)
    out = _run_native(_pte(Fn(lambda t: t.float()), (x,)), [x])[0]
    assert _same_bits(out, x.float())


def test_bit_check_sees_one_wrong_rounding():
    # The conversion gate: a single value rounded the other way (truncated) is a mismatch.
    x = _float32_values()
    good = x.to(torch.bfloat16)
    bad = good.clone()
    i = int(torch.nonzero((x - good.float()).abs() > 0)[0])
    bad.view(torch.int16)[i] ^= 1
    assert _same_bits(good, x.to(torch.bfloat16)) and not _same_bits(bad, x.to(torch.bfloat16))


def _eager_supports(model, inputs) -> bool:
    try:
        with torch.no_grad():
            model(*inputs)
    except RuntimeError:
        return False
    return True


def _float_case(case) -> bool:
    _, inputs = case.factory()
    return any(isinstance(t, torch.Tensor) and t.is_floating_point() for t in inputs)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", [c for c in CASES if _float_case(c)], ids=lambda c: c.name)
def test_single_op_in_16bit_matches_eager(case, dtype):
    model, inputs = case.factory()
    model, inputs = model.to(dtype), _cast(inputs, dtype)
    if not _eager_supports(model, inputs):
        pytest.skip(f"eager torch has no {dtype} CPU kernel for {case.name}")
    ds = case.dynamic_shapes() if case.dynamic_shapes else None
    ep = torch.export.export(model, inputs, dynamic_shapes=ds)
    pte = bytes(to_edge_transform_and_lower(ep).to_executorch().buffer)
    with torch.no_grad():
        expected = model(*inputs)
    # One op rounds once: the per-dtype defaults of executorch.devtools.compare apply.
    assert_outputs_close(_run_native(pte, inputs), expected)


def _zoo_16bit(name: str, dtype: torch.dtype):
    model, inputs = ZOO.MODELS[name]()
    return model.to(dtype), _cast(inputs, dtype)


@pytest.fixture(scope="module")
def zoo_files(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("half_zoo")
    files = {}
    for name in ("transformer_encoder", "llama_decoder"):
        for dtype in DTYPES:
            model, inputs = _zoo_16bit(name, dtype)
            path = root / f"{name}_{str(dtype)[6:]}.pte"
            path.write_bytes(_pte(model, inputs))
            files[name, dtype] = path
    return files


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", ["transformer_encoder", "llama_decoder"])
def test_zoo_transformer_in_16bit_matches_eager_natively(name, dtype, zoo_files):
    model, inputs = _zoo_16bit(name, dtype)
    with torch.no_grad():
        expected = model(*inputs)
    outputs = _run_native(zoo_files[name, dtype].read_bytes(), inputs)
    assert outputs[0].dtype == dtype
    assert_outputs_close(outputs, expected, **_model_tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_model_gate_rejects_a_wrong_answer(dtype, zoo_files):
    # The model gate at its tolerance: one element off by 5% of the output's range, or every
    # element scaled by 4 more units in the last place than allowed, fails it.
    model, inputs = _zoo_16bit("llama_decoder", dtype)
    with torch.no_grad():
        expected = model(*inputs)
    out = _run_native(zoo_files["llama_decoder", dtype].read_bytes(), inputs)[0]
    spike = out.clone()
    spike.view(-1)[7] += 0.05 * expected.abs().max()
    scaled = (out.float() * (1 + 2 * _model_tol(dtype)["rtol"] * 4)).to(dtype)
    assert compare_outputs([out], [expected], **_model_tol(dtype)).ok
    assert not compare_outputs([spike], [expected], **_model_tol(dtype)).ok
    assert not compare_outputs([scaled], [expected], **_model_tol(dtype)).ok


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", ["transformer_encoder", "llama_decoder"])
def test_published_runtime_runs_the_16bit_files(name, dtype, zoo_files, reference_runtime, tmp_path):
    model, inputs = _zoo_16bit(name, dtype)
    with torch.no_grad():
        expected = model(*inputs)
    outputs = reference_runtime.run(zoo_files[name, dtype], inputs, tmp_path)
    assert_outputs_close(outputs, expected, **_model_tol(dtype))
