"""Selective build of executor_runner for MobileNetV2: stripped sizes of the all-ops, MV2-only and
MV2-only-with-dtype-selection runners, each checked against eager PyTorch on the same input.

    python benchmarks/bench_selective_build.py [--build-root DIR] [--jobs 2]

Configures and builds (incrementally) DIR/build-all, DIR/build-mv2 and DIR/build-mv2-dtype.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from _zoo import export_bytes, load_models  # this script's folder is on sys.path

REPO = Path(__file__).resolve().parents[1]
RTOL = 1e-4  # of the eager output's largest magnitude


def _build(build: Path, jobs: int, options: list[str]) -> Path:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    subprocess.run(["cmake", "-S", str(REPO), "-B", str(build), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                    f"-DPython3_EXECUTABLE={sys.executable}", "-DEXECUTORCH_BUILD_EXECUTOR_RUNNER=ON", *options],
                   check=True, env=env, stdout=subprocess.DEVNULL)
    subprocess.run(["nice", "cmake", "--build", str(build), "-j", str(jobs), "--target", "executor_runner"],
                   check=True, env=env, stdout=subprocess.DEVNULL)
    return build / "examples" / "executor_runner" / "executor_runner"


def _stripped_size(binary: Path, work: Path) -> int:
    copy = work / f"{binary.parent.parent.parent.name}.stripped"
    shutil.copyfile(binary, copy)
    subprocess.run(["strip", "--strip-all", str(copy)], check=True)
    return copy.stat().st_size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-root", default=str(REPO))
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    root = Path(args.build_root).resolve()
    model, inputs = load_models()["mobilenet_v2"]()
    model.eval()
    with torch.no_grad():
        eager = model(*inputs).flatten()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        pte = root / "build-mv2" / "mv2.pte"
        pte.parent.mkdir(parents=True, exist_ok=True)
        pte.write_bytes(export_bytes(model, inputs))
        (work / "in0.bin").write_bytes(bytes(inputs[0].contiguous().untyped_storage()))
        configs = {
            "all ops": ("build-all", []),
            "MobileNetV2 ops": ("build-mv2", [f"-DEXECUTORCH_SELECT_OPS_MODEL={pte}"]),
            "MobileNetV2 ops + dtypes": ("build-mv2-dtype", [f"-DEXECUTORCH_SELECT_OPS_MODEL={pte}",
                                                             "-DEXECUTORCH_DTYPE_SELECTIVE_BUILD=ON"]),
        }
        print(f"{'executor_runner':26} {'stripped bytes':>14} {'vs all ops':>10} {'max rel err':>12}")
        base = None
        failed = False
        for name, (subdir, options) in configs.items():
            runner = _build(root / subdir, args.jobs, options)
            size = _stripped_size(runner, work)
            base = base or size
            out = work / subdir
            out.mkdir()
            subprocess.run([str(runner), "--model_path", str(pte), "--inputs", str(work / "in0.bin"),
                            "--output_dir", str(out)], check=True, stdout=subprocess.DEVNULL)
            got = torch.frombuffer(bytearray((out / "output_0.bin").read_bytes()), dtype=torch.float32)
            err = float((got - eager).abs().max() / eager.abs().max())
            failed |= err > RTOL
            print(f"{name:26} {size:14,} {size / base:10.2f} {err:12.2e}")
    print(f"outputs compared with eager PyTorch, relative to its largest magnitude; limit {RTOL:g}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
