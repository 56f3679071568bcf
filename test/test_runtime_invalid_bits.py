"""File bytes that are no valid value of their type (bool bytes, enums) on both project runtimes."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from executorch.exir import schema as s
from executorch.exir._serialize import serialize_pte_binary
from executorch.exir.error import SerializeError
from executorch.runtime import ExecuTorchError, InvalidProgramError

from conftest import project_runtimes  # noqa: E402
from runtime_programs import PlanBuilder  # noqa: E402

RUNTIMES = project_runtimes()
BACKENDS = [pytest.param(name, marks=pytest.mark.skipif(
    name not in RUNTIMES, reason="native runtime not built (bash tools/run_tests.sh builds it; needs a C++ compiler)"))
    for name in ("python", "native")]
BOOL_FIXTURE = Path(__file__).parent / "fixtures" / "malformed" / "fuzz-853c6184f669.pte"


def _logical_not_of_constant(raw: bytes) -> bytes:
    """forward(x) = x + logical_not(C) for a constant bool tensor C of 4 elements holding `raw`."""
    b = PlanBuilder()
    x = b.tensor([4], 0)
    c = b.constant(torch.zeros(4, dtype=torch.bool))
    b.constants[-1] = s.Buffer(raw)
    mask = b.tensor([4], 16, torch.bool)
    out = b.tensor([4], 32)
    b.kernel("aten::logical_not", "out", c, mask, mask)
    b.kernel("aten::add", "out", x, mask, b.int_(1), out, out)
    b.inputs, b.outputs = [x], [out]
    return serialize_pte_binary(b.program())


@pytest.mark.parametrize("backend", BACKENDS)
def test_constant_bool_bytes_other_than_0_and_1_are_refused_at_load(backend):
    runtime = RUNTIMES[backend]
    good = runtime.load_program(_logical_not_of_constant(bytes([0, 1, 1, 0]))).load_method("forward")
    assert torch.equal(good.execute([torch.zeros(4)])[0], torch.tensor([1.0, 0.0, 0.0, 1.0]))
    with pytest.raises(InvalidProgramError, match="bool"):
        runtime.load_program(_logical_not_of_constant(bytes([0, 1, 255, 0]))).load_method("forward")


@pytest.mark.parametrize("backend", BACKENDS)
def test_bool_inputs_holding_other_bytes_are_refused(backend):
    b = PlanBuilder()
    x = b.tensor([3], 0, torch.bool)
    out = b.tensor([3], 16, torch.bool)
    b.kernel("aten::logical_not", "out", x, out, out)
    b.inputs, b.outputs = [x], [out]
    method = RUNTIMES[backend].load_program(serialize_pte_binary(b.program())).load_method("forward")
    assert torch.equal(method.execute([torch.tensor([True, False, True])])[0], torch.tensor([False, True, False]))
    with pytest.raises(ExecuTorchError, match="input 0"):
        method.execute([torch.tensor([1, 2, 0], dtype=torch.uint8).view(torch.bool)])


@pytest.mark.parametrize("backend", BACKENDS)
def test_unknown_shape_dynamism_is_refused(backend):
    b = PlanBuilder()
    x = b.tensor([2], 0)
    b.values[x].val.shape_dynamism = 7
    b.inputs, b.outputs = [x], [x]
    # The Python reader refuses the enum while parsing; the native runtime when loading the method.
    with pytest.raises((ExecuTorchError, SerializeError), match="dynamism"):
        RUNTIMES[backend].load_program(serialize_pte_binary(b.program())).load_method("forward")


@pytest.mark.parametrize("backend", BACKENDS)
def test_fuzzer_bool_byte_file_runs_or_fails_cleanly(backend):
    """The fuzzer's file (a bool tensor read as C++ bool was undefined behaviour): an error or a result.

    Undefined behaviour itself is caught by test/cpp/fuzz/run_fuzz.sh, which replays every fixture
    under UBSan before fuzzing."""
    program = RUNTIMES[backend].load_program(BOOL_FIXTURE.read_bytes())
    (name,) = program.method_names
    try:
        (out,) = program.load_method(name).execute([torch.ones(2, 3, 2, 2, dtype=torch.bool)])
    except ExecuTorchError as e:
        assert "mul" in str(e)
    else:
        assert out.dtype == torch.int64 and out.shape == (2, 3, 2, 2)
