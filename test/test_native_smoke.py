"""The wheel's native extension in another CPython (ET_SMOKE_PYTHON): each of the wheel matrix's interpreters."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import torch

from executorch.devtools.compare import assert_outputs_close

SMOKE_SCRIPT = Path(__file__).with_name("native_smoke.py")
SMOKE_PYTHON = os.environ.get("ET_SMOKE_PYTHON")


class _Small(torch.nn.Module):
    """Convolution, depthwise convolution (stride 2) and a linear layer: the GEMM and depthwise kernels."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.dw = torch.nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=8)
        self.fc = torch.nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.dw(torch.relu(self.conv(x)))).flatten(1))


def smoke_case(tmp_path: Path) -> tuple[Path, Path, dict]:
    """The small model exported here (MODEL.pte), its input as raw float32 (x.bin), eager's output."""
    from executorch.exir import to_edge_transform_and_lower

    torch.manual_seed(0)
    model, x = _Small().eval(), torch.randn(1, 3, 16, 16)
    pte = tmp_path / "small.pte"
    pte.write_bytes(to_edge_transform_and_lower(torch.export.export(model, (x,))).to_executorch().buffer)
    (tmp_path / "x.bin").write_bytes(x.numpy().tobytes())
    return pte, tmp_path / "x.bin", {"input_shape": list(x.shape), "output": model(x)}


@pytest.mark.skipif(not SMOKE_PYTHON,
                    reason="set ET_SMOKE_PYTHON to a Python with the full wheel installed (tools/build_wheels.sh does)")
def test_installed_extension_runs_a_model_like_eager(tmp_path):
    pte, x, expected = smoke_case(tmp_path)
    out = tmp_path / "y.bin"
    # From tmp_path, isolated (-I): the installed wheel, not this source tree, must be imported.
    proc = subprocess.run([SMOKE_PYTHON, "-I", str(SMOKE_SCRIPT), str(pte), str(x), str(out),
                           ",".join(map(str, expected["input_shape"]))],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-1000:] + proc.stderr[-3000:]
    print(proc.stdout)
    got = torch.frombuffer(bytearray(out.read_bytes()), dtype=torch.float32)
    assert_outputs_close([got.reshape(expected["output"].shape)], [expected["output"]])
