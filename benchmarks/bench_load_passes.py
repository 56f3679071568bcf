"""Portable programs on the load passes: method load and run CPU time, fp32 and int8, against the published XNNPACK.

    python benchmarks/bench_load_passes.py [--models mobilenet_v2,resnet18] [--runs 15] [--dir DIR]
                                           [--xnnpack REFPY]

Each model is exported twice with this package's exporter (`ExportRecipe()` and
`PortableRecipeType.INT8` calibrated on 4 samples, as bench_quantized.py does) into DIR (a
temporary folder unless given; files already there are reused). Times are CPU time
(`time.process_time()`), so other processes on a shared machine slow them less than wall clock:
`load_method` on a freshly loaded program (median of --runs), then one run per sample after a
warm-up (median of --runs), one thread. With --xnnpack (the python of an environment with the
published executorch and torchao), each model is also exported by the published exporter with its
XnnpackPartitioner (fp32, and --int8 with its XNNPACKQuantizer) and timed the same way on the
published runtime, in a separate process right after.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

import _bench_models  # this script's folder is on sys.path

_TIMER = """
import json, os, statistics, sys, time, torch
from executorch.runtime import Runtime, Verification
try:
    from executorch.extension.pybindings.portable_lib import _unsafe_reset_threadpool
    _unsafe_reset_threadpool(1)
except ImportError:
    pass
torch.set_num_threads(1)
path, inputs, runs = sys.argv[1], list(torch.load(sys.argv[2])), int(sys.argv[3])
data = open(path, "rb").read()
rt = Runtime.get()
loads = []
for _ in range(runs):
    program = rt.load_program(data, verification=Verification.Minimal)
    start = time.process_time()
    method = program.load_method("forward")
    loads.append((time.process_time() - start) * 1e3)
method.execute(inputs)
times = []
for _ in range(runs):
    start = time.process_time()
    method.execute(inputs)
    times.append((time.process_time() - start) * 1e3)
print("result", json.dumps([statistics.median(loads), statistics.median(times)]), flush=True)
"""


def _time(python: str, pte: Path, inputs: Path, runs: int) -> tuple[float, float]:
    env = dict(os.environ, EXECUTORCH_NUM_THREADS="1", OMP_NUM_THREADS="1")
    proc = subprocess.run([python, "-c", _TIMER, str(pte), str(inputs), str(runs)], capture_output=True, text=True,
                          env=env)
    for line in proc.stdout.splitlines():
        if line.startswith("result "):
            return tuple(json.loads(line[len("result "):]))
    raise SystemExit(f"timing {pte.name} failed: {proc.stderr.strip().splitlines()[-1:] or proc.returncode}")


def _export_ours(name: str, model, inputs, folder: Path) -> dict[str, Path]:
    from executorch.export import ExportRecipe, export
    from executorch.export.portable_recipes import PortableRecipeType

    g = torch.Generator().manual_seed(1)
    samples = [inputs] + [(torch.randn(inputs[0].shape, generator=g),) for _ in range(3)]
    out = {}
    for label, recipe, data in (("fp32", ExportRecipe(), [inputs]),
                                ("int8", ExportRecipe.get_recipe(PortableRecipeType.INT8), samples)):
        path = out[label] = folder / f"{name}_{label}.pte"
        if not path.is_file():
            path.write_bytes(export(model, data, recipe).get_pte_buffer())
    return out


def _export_published(python: str, name: str, folder: Path) -> dict[str, Path]:
    tool = Path(__file__).resolve().parents[2] / "shared" / "tools" / "reference-runtime" / "export_pte.py"
    out = {}
    for label, flags in (("fp32", ["--xnnpack"]), ("int8", ["--xnnpack", "--int8"])):
        path = out[label] = folder / f"xnn_{name}_{label}.pte"
        if not path.is_file():
            subprocess.run([python, str(tool), f"{Path(__file__).parent / '_bench_models.py'}:"
                            f"{_bench_models.MODELS[name].__name__}", str(path), *flags],
                           check=True, capture_output=True, text=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="mobilenet_v2,resnet18")
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--dir", help="keep (and reuse) the exported files here")
    ap.add_argument("--xnnpack", metavar="REFPY", help="also time the published XNNPACK files on the published runtime")
    args = ap.parse_args()
    torch.set_num_threads(1)
    names = args.models.split(",")
    unknown = [n for n in names if n not in _bench_models.MODELS]
    if unknown:
        raise SystemExit(f"--models: unknown {unknown}; choose from {', '.join(_bench_models.MODELS)}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.dir) if args.dir else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        print(f"load average before: {os.getloadavg()}; CPU ms, median of {args.runs}, one thread")
        print("| model | program | load (ms) | run (ms) | run / fp32 | published XNNPACK load | published XNNPACK run "
              "| run / published |")
        print("|---|---|---|---|---|---|---|---|")
        for name in names:
            model, inputs = _bench_models.MODELS[name]()
            saved = folder / f"{name}_inputs.pt"
            torch.save(list(inputs), saved)
            ours = _export_ours(name, model, inputs, folder)
            published = _export_published(args.xnnpack, name, folder) if args.xnnpack else {}
            fp32_run = None
            for label in ("fp32", "int8"):
                load, run = _time(sys.executable, ours[label], saved, args.runs)
                fp32_run = fp32_run or run
                ref = _time(args.xnnpack, published[label], saved, args.runs) if label in published else None
                cells = f"{ref[0]:.1f} | {ref[1]:.2f} | {run / ref[1]:.2f}" if ref else "| |"
                print(f"| {name} | {label} | {load:.1f} | {run:.2f} | {run / fp32_run:.2f} | {cells} |", flush=True)
        print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
