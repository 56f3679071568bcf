"""Native linear layers: constant weights read transposed in place, the few-row product path, linear.out."""

from __future__ import annotations

import inspect
import re

import pytest
import torch

pytest.importorskip("executorch.extension.pybindings._portable_lib",
                    reason="native runtime not built (bash tools/run_tests.sh builds it; needs a C++ compiler)")

from executorch.devtools.compare import compare_outputs, tolerance  # noqa: E402
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower  # noqa: E402
from executorch.extension.pybindings import portable_lib  # noqa: E402
from executorch.runtime import _native  # noqa: E402
from executorch.runtime._backend import Verification  # noqa: E402

from native_fn import load_logged  # noqa: E402
from linear_models import (InputWeight, LinearStack, RowMajorWeight, SharedTranspose,  # noqa: E402
                           make_linear_3d, make_linear_stack)

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# compare's row for float32 (sums in another order); 16-bit results: two units in the last place
# (one rounding of the result plus the reference's own).
ULPS = 2
ELIDED = re.compile(r"(\d+) weight transposes read in place")


def _pte(model, inputs, config: EdgeCompileConfig | None = None) -> bytes:
    exported = torch.export.export(model, inputs)
    return to_edge_transform_and_lower(exported, compile_config=config).to_executorch().buffer


def _load(data: bytes, capfd) -> tuple[object, int]:
    """The native forward method, and how many weight transposes its load read in place."""
    method, log = load_logged(data, capfd)
    found = ELIDED.findall(log)
    return method, sum(int(n) for n in found)


def _reference(model, inputs):
    """Eager in float64 on the same (already rounded) weights and inputs."""
    wide = [x.double() for x in inputs]
    with torch.no_grad():
        out = model.double()(*wide)
    model.to(inputs[0].dtype)
    return out


def _close(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> bool:
    """`actual` (in `dtype`) against the float64 reference, at the tolerance of `dtype`."""
    return compare_outputs([actual.double()], [expected], **tolerance(dtype, ULPS)).ok


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("rows", [1, 2, 3, 5, 8, 13])
def test_linear_stack_elides_both_transposes_and_matches(rows, dtype, capfd):
    torch.manual_seed(rows)
    model = LinearStack().eval().to(dtype)
    x = torch.randn(rows, 67).to(dtype)
    method, elided = _load(_pte(model, (x,)), capfd)
    assert elided == 2
    out = method.execute([x])[0]
    assert out.dtype == dtype and _close(out, _reference(model, (x,)), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("rows", [1, 4, 8, 9])
def test_row_major_weight_matches(rows, dtype, capfd):
    torch.manual_seed(10 + rows)
    model = RowMajorWeight().eval().to(dtype)
    x = torch.randn(rows, 67).to(dtype)
    method, elided = _load(_pte(model, (x,)), capfd)
    assert elided == 0
    assert _close(method.execute([x])[0], _reference(model, (x,)), dtype)


def test_gate_rejects_a_wrong_answer():
    torch.manual_seed(0)
    model = LinearStack().eval()
    x = torch.randn(3, 67)
    expected = _reference(model, (x,))
    for dtype in DTYPES:
        wrong = expected.clone()
        wrong[1, 7] += 3 * max(tolerance(dtype, ULPS).values()) * expected.abs().max()
        assert _close(expected, expected, dtype) and not _close(wrong, expected, dtype)
    assert not _close(model.second(model.first(x)), expected, torch.float32)  # relu dropped


def test_transpose_with_another_reader_is_copied(capfd):
    torch.manual_seed(2)
    model = SharedTranspose().eval()
    x = torch.randn(4, 67)
    method, elided = _load(_pte(model, (x,)), capfd)
    assert elided == 0
    got = method.execute([x])
    expected = _reference(model, (x,))
    assert all(_close(g, e, torch.float32) for g, e in zip(got, expected))


def test_transpose_of_an_input_weight_is_copied(capfd):
    torch.manual_seed(3)
    x, w = torch.randn(2, 67), torch.randn(19, 67)
    method, elided = _load(_pte(InputWeight(), (x, w)), capfd)
    assert elided == 0
    assert _close(method.execute([x, w])[0], x.double() @ w.double().T, torch.float32)
    w2 = torch.randn(19, 67)  # a new weight each run is read, not a stale copy
    assert _close(method.execute([x, w2])[0], x.double() @ w2.double().T, torch.float32)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_few_row_products_are_bit_identical_for_1_2_and_3_threads(dtype, restore_pool_size, capfd):
    torch.manual_seed(4)
    # Wide enough that the columns split into several chunks.
    models = [LinearStack(k=1000, hidden=301, n=700).eval().to(dtype), RowMajorWeight(k=1000, n=777).eval().to(dtype)]
    for model in models:
        for rows in (1, 5, 8):
            x = torch.randn(rows, 1000).to(dtype)
            method, _ = _load(_pte(model, (x,)), capfd)
            outputs = []
            for threads in (1, 2, 3):
                portable_lib._unsafe_reset_threadpool(threads)
                outputs.append(method.execute([x])[0])
            assert torch.equal(outputs[0], outputs[1]) and torch.equal(outputs[0], outputs[2])
            assert _close(outputs[0], _reference(model, (x,)), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(1, 40), (7, 40), (2, 3, 40), (20, 40)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_out_kernel_matches(shape, bias, dtype):
    torch.manual_seed(5)
    model = torch.nn.Linear(40, 29, bias=bias).eval().to(dtype)
    x = torch.randn(*shape).to(dtype)
    config = EdgeCompileConfig(preserve_ops=[torch.ops.aten.linear.default])
    data = _pte(model, (x,), config)
    assert b"aten::linear" in data and b"aten::permute_copy" not in data
    out = _native.load_program(data, Verification.InternalConsistency).load_method("forward").execute([x])[0]
    assert _close(out, _reference(model, (x,)), dtype)


@pytest.mark.parametrize("factory", [make_linear_stack, make_linear_3d])
def test_published_exporter_files_elide_and_match(factory, reference_runtime, tmp_path, capfd):
    pte = reference_runtime.export(f"{inspect.getsourcefile(factory)}:{factory.__name__}", tmp_path / "m.pte")
    model, inputs = factory()
    method, elided = _load(pte.read_bytes(), capfd)
    assert elided == (2 if factory is make_linear_stack else 1)
    out = method.execute(list(inputs))[0]
    assert _close(out, _reference(model, inputs), torch.float32)
