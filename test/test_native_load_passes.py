"""Native load passes: constant dequantizes run once at load."""

from __future__ import annotations

import importlib.util
import re

import pytest
import torch

pytest.importorskip("executorch.extension.pybindings._portable_lib",
                    reason="native runtime not built (bash tools/run_tests.sh builds it; needs a C++ compiler)")

from executorch.exir import to_edge_transform_and_lower  # noqa: E402
from executorch.extension.pybindings import _portable_lib  # noqa: E402
from executorch.runtime import _native  # noqa: E402
from executorch.runtime._backend import Verification  # noqa: E402

PASSES = re.compile(r"load passes: (\d+) dequantizes run at load")


def _pte(model, inputs) -> bytes:
    return to_edge_transform_and_lower(torch.export.export(model, inputs)).to_executorch().buffer


def _load(data: bytes, capfd):
    """The native forward method and what its load passes reported (zeros when they did nothing)."""
    capfd.readouterr()
    _portable_lib.set_log_echo(True)
    try:
        method = _native.load_program(data, Verification.InternalConsistency).load_method("forward")
    finally:
        _portable_lib.set_log_echo(False)
    found = PASSES.findall(capfd.readouterr().err)
    return method, {"dequantized": int(found[-1]) if found else 0}


def _rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.double() - ref.double()).abs().max() / max(ref.double().abs().max().item(), 1e-30))


@pytest.mark.skipif(importlib.util.find_spec("torchao") is None,
                    reason="torchao is not installed (pip install torchao==0.18.0)")
def test_int8_weights_are_dequantized_once_at_load(capfd):
    from executorch.export import ExportRecipe, StageType, export
    from executorch.export._torch_threads import one_torch_thread
    from executorch.export.portable_recipes import PortableRecipeType

    class ConvLinear(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(4, 16, 3, padding=1)
            self.point = torch.nn.Conv2d(16, 8, 1)
            self.fc = torch.nn.Linear(8, 5)

        def forward(self, x):
            return self.fc(self.point(torch.relu(self.conv(x))).mean(dim=(2, 3)))

    torch.manual_seed(3)
    model = ConvLinear().eval()
    x = torch.randn(2, 4, 12, 12)
    g = torch.Generator().manual_seed(1)
    with one_torch_thread():
        session = export(model, [(x,)] + [(torch.randn(x.shape, generator=g),) for _ in range(3)],
                         ExportRecipe.get_recipe(PortableRecipeType.INT8))
        converted = session.get_stage_artifacts()[StageType.QUANTIZE].data["forward"]
        with torch.no_grad():
            ref = converted(x)
    plan = session.get_executorch_program().execution_plan[0]
    weights = sum(1 for c in plan.chains[0].instructions
                  if plan.operators[c.instr_args.op_index].name == "quantized_decomposed::dequantize_per_channel")
    assert weights == 3
    method, passes = _load(session.get_pte_buffer(), capfd)
    assert passes["dequantized"] == weights, passes
    out = method.execute([x])[0]
    err = float((out - ref).abs().max() / (ref.max() - ref.min()))
    assert err <= 1e-2, f"native int8 differs from the converted module by {err:.3g} of its range"
