"""The native kernels' thread pool: its size from the API, the environment and the CLI, and results identical
for any thread count."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("executorch.extension.pybindings._portable_lib",
                    reason="native runtime not built (bash tools/run_tests.sh builds it; needs a C++ compiler)")

from executorch.exir import to_edge_transform_and_lower  # noqa: E402
from executorch.extension.pybindings import portable_lib  # noqa: E402
from executorch.runtime import _native  # noqa: E402
from executorch.runtime._backend import Verification  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
RUNNER = REPO / "cmake-out" / "examples" / "executor_runner" / "executor_runner"
THREADS_ENV = "EXECUTORCH_NUM_THREADS"


class _ConvMatmul(torch.nn.Module):
    """A strided conv (im2col + gemm), a 1x1 conv, a linear and a bmm, at odd sizes big enough to split."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(5, 37, 3, stride=2, padding=1)
        self.point = torch.nn.Conv2d(37, 43, 1)
        self.linear = torch.nn.Linear(43, 301)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.point(torch.relu(self.conv(x)))  # (2, 43, 33, 35)
        t = self.linear(y.flatten(2).transpose(1, 2).contiguous())  # (2, 1155, 301)
        return torch.bmm(t, t.transpose(1, 2)[:, :, :97])  # (2, 1155, 97)


def _python(code: str, env_value: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != THREADS_ENV}
    if env_value is not None:
        env[THREADS_ENV] = env_value
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


def test_results_are_bit_identical_for_1_2_and_3_threads(restore_pool_size):
    torch.manual_seed(0)
    model = _ConvMatmul().eval()
    x = torch.randn(2, 5, 65, 69)
    data = to_edge_transform_and_lower(torch.export.export(model, (x,))).to_executorch().buffer
    method = _native.load_program(data, Verification.InternalConsistency).load_method("forward")
    outputs = {}
    for threads in (1, 2, 3):
        portable_lib._unsafe_reset_threadpool(threads)
        assert portable_lib._threadpool_get_thread_count() == threads
        outputs[threads] = method.execute([x])[0]
    assert torch.equal(outputs[1], outputs[2]) and torch.equal(outputs[1], outputs[3])
    expected = model(x).detach()
    scale = expected.abs().max().item()
    assert (outputs[2] - expected).abs().max().item() <= 1e-5 * scale


def test_reset_refuses_a_bad_size(restore_pool_size):
    for bad in (0, -1, 257):
        with pytest.raises(ValueError, match="num_threads"):
            portable_lib._unsafe_reset_threadpool(bad)


def test_default_size_is_the_available_cpus():
    code = "from executorch.extension.pybindings import portable_lib as p; print(p._threadpool_get_thread_count())"
    proc = _python(code, None)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout.split()[-1]) == len(os.sched_getaffinity(0))


def test_environment_sets_the_size():
    code = "from executorch.extension.pybindings import portable_lib as p; print(p._threadpool_get_thread_count())"
    proc = _python(code, "3")
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout.split()[-1]) == 3


@pytest.mark.parametrize("value", ["abc", "0", "-2", "2.5", "100000"])
def test_environment_bad_value_is_refused(value):
    proc = _python("from executorch.runtime import Runtime; Runtime.get()", value)
    assert proc.returncode != 0
    assert THREADS_ENV in proc.stderr and "not a thread count" in proc.stderr


@pytest.mark.skipif(not RUNNER.exists(), reason="executor_runner is not built (tools/run_tests.sh builds it)")
def test_executor_runner_num_threads(tmp_path):
    pte = tmp_path / "m.pte"
    model = torch.nn.Linear(8, 4).eval()
    pte.write_bytes(
        to_edge_transform_and_lower(torch.export.export(model, (torch.randn(2, 8),))).to_executorch().buffer)
    env = {k: v for k, v in os.environ.items() if k != THREADS_ENV}
    ok = subprocess.run([str(RUNNER), "--model_path", str(pte), "--num_threads", "2"], capture_output=True,
                        text=True, env=env, timeout=120)
    assert ok.returncode == 0, ok.stderr
    for bad in ("0", "x", "300"):
        proc = subprocess.run([str(RUNNER), "--model_path", str(pte), "--num_threads", bad], capture_output=True,
                              text=True, env=env, timeout=120)
        assert proc.returncode == 2 and "--num_threads" in proc.stderr
    proc = subprocess.run([str(RUNNER), "--model_path", str(pte)], capture_output=True, text=True,
                          env={**env, THREADS_ENV: "lots"}, timeout=120)
    assert proc.returncode == 2 and THREADS_ENV in proc.stderr
