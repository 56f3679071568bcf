"""Time and extra peak memory to write and read `.pte`+`.ptd` and `.bpte`, here and with the published 1.5.1.

    python benchmarks/bench_ptd_bpte.py [--models mobilenet_v2,resnet50,mlp_512mb] [--reference PYTHON]
                                        [--workdir /tmp/bench_ptd_bpte] [--ram-dir /dev/shm/bench_ptd_bpte]

Every measurement runs in a fresh process (this file with --worker), with the project's python and
with the published ExecuTorch's (--reference, default $ET_REFERENCE_PYTHON), through the same public
API. Writing is timed from the edge program: `to_executorch(ExecutorchBackendConfig(external_constants=
True))` + `write_to_file` + `write_tensor_data_to_file`, or `to_executorch()` + `BundledProgram` +
serializing to a file (the published manager serializes inside `to_executorch`, so both include it).
Reading: `Runtime.get().load_program(pte, data_path=ptd)` + `load_method`; a `.bpte` read back with
`deserialize_from_flatbuffer_to_bundled_program`. torch.export, edge lowering and the eager reference
outputs run before the clock starts. Extra peak memory is the
process's peak resident size during the step (reset just before it, /proc/self/clear_refs) minus
its resident size just before it, so the loaded model and exported program are not counted.

Two tables: every step with the files in --workdir (on disk), then the write steps again with the files
in --ram-dir (a RAM-backed tmpfs, so the time is the writers' own plus the kernel's copy into memory,
without the disk). Each write row also times `dd` writing as many bytes to the same directory in the
same run: no writer can beat that floor. Files a step writes are removed before it starts, on both
sides, so neither pays for freeing the previous run's file.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODELS = ("mobilenet_v2", "resnet50", "mlp_512mb")
STEPS = ("write_pte_ptd", "read_pte_ptd", "write_bpte", "read_bpte")


def _make(name: str):
    sys.path.insert(0, str(HERE))
    if name == "mlp_512mb":
        from _large_models import make_mlp_512mb

        return make_mlp_512mb()
    from _zoo import load_models

    return load_models()[name]()


def _status(field: str) -> int:
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _measure(step) -> dict:
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current resident size
    before = _status("VmRSS")
    start = time.perf_counter()
    step()
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "extra_peak": _status("VmHWM") - before}


def _clear(*paths: Path) -> None:
    for p in paths:
        if p.exists():
            p.unlink()


def _edge(model, inputs):
    import torch
    from executorch.exir import to_edge_transform_and_lower

    return to_edge_transform_and_lower(torch.export.export(model, inputs))


def _config(external: bool):
    from executorch.exir import ExecutorchBackendConfig

    return ExecutorchBackendConfig(external_constants=True) if external else ExecutorchBackendConfig()


def worker(step: str, name: str, out: Path) -> dict:
    import torch

    out.mkdir(parents=True, exist_ok=True)
    pte, ptd, bpte = out / "m.pte", out / "_default_external_constant.ptd", out / "m.bpte"
    if step == "write_pte_ptd":
        edge = _edge(*_make(name))
        _clear(pte, ptd)

        def run():
            # The published manager serializes in to_executorch, this project's when writing: time both.
            program = edge.to_executorch(_config(external=True))
            with open(pte, "wb") as f:
                program.write_to_file(f)
            program.write_tensor_data_to_file(str(out))

        result = _measure(run)
        result["artifact"] = pte.stat().st_size + ptd.stat().st_size
        return result
    if step == "read_pte_ptd":
        from executorch.runtime import Runtime

        runtime = Runtime.get()
        held = []
        result = _measure(
            lambda: held.append(runtime.load_program(str(pte), data_path=str(ptd)).load_method("forward")))
        result["artifact"] = pte.stat().st_size + ptd.stat().st_size
        return result
    from executorch.devtools import BundledProgram
    from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
    from executorch.devtools.bundled_program import serialize as bps

    if step == "write_bpte":
        model, inputs = _make(name)
        edge = _edge(model, inputs)
        with torch.no_grad():
            cases = [MethodTestCase(list(inputs), [model(*inputs)]) for _ in range(2)]
        suites = [MethodTestSuite("forward", cases)]
        _clear(bpte)

        def run():
            bundle = BundledProgram(edge.to_executorch(_config(external=False)), suites)
            if hasattr(bps, "write_bundled_program"):  # this project: streams the Builder's buffer to the file
                bps.write_bundled_program(bundle, str(bpte))
            else:
                with open(bpte, "wb") as f:
                    f.write(bps.serialize_from_bundled_program_to_flatbuffer(bundle))

        result = _measure(run)
        result["artifact"] = bpte.stat().st_size
        return result
    if step == "read_bpte":
        held = []

        def run():
            if hasattr(bps, "write_bundled_program"):  # this project: reads a memory map in place
                import mmap

                with open(bpte, "rb") as f:
                    data = memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
            else:
                data = bpte.read_bytes()
            bundle = bps.deserialize_from_flatbuffer_to_bundled_program(data)
            held.append((bundle, sum(len(s.test_cases) for s in bundle.method_test_suites)))

        result = _measure(run)
        result["artifact"] = bpte.stat().st_size
        return result
    raise SystemExit(f"unknown step {step!r}; steps: {', '.join(STEPS)}")


def _run(python: str, step: str, name: str, out: Path, timeout: float) -> dict:
    try:
        proc = subprocess.run([python, str(Path(__file__).resolve()), "--worker", step, name, str(out)],
                              capture_output=True, text=True, timeout=timeout, cwd=str(HERE.parent.parent))
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout:.0f}s"}
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["exit %d" % proc.returncode])[-1][:120]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _cell(r: dict) -> str:
    if "error" in r:
        return f"n/a ({r['error']})"
    return f"{r['seconds']:.3f} s, +{r['extra_peak'] / 2**20:.0f} MiB ({r['extra_peak'] / r['artifact']:.2f}x)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--steps", default=",".join(STEPS))
    ap.add_argument("--reference", default=os.environ.get("ET_REFERENCE_PYTHON"),
                    help="the published ExecuTorch's python (default: $ET_REFERENCE_PYTHON)")
    ap.add_argument("--skip-reference", default="mlp_512mb:read_bpte",
                    help="MODEL:STEP pairs the published side skips (its .bpte reader goes through JSON, "
                         "tens of GB for the 512 MiB model on this shared machine)")
    ap.add_argument("--workdir", default="/tmp/bench_ptd_bpte", help="the on-disk table's directory")
    ap.add_argument("--ram-dir", default="/dev/shm/bench_ptd_bpte",
                    help="a RAM-backed directory for the write steps' second table ('' for none)")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--worker", nargs=3, metavar=("STEP", "MODEL", "DIR"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        print(json.dumps(worker(a.worker[0], a.worker[1], Path(a.worker[2]))))
        return
    skip = set(a.skip_reference.split(",")) if a.skip_reference else set()
    sides = [("this project", sys.executable)] + ([("published 1.5.1", a.reference)] if a.reference else [])
    steps = a.steps.split(",")
    tables = [(Path(a.workdir), steps)]
    if a.ram_dir:
        tables.append((Path(a.ram_dir), [s for s in steps if s.startswith("write")]))
    for workdir, table_steps in tables:
        if table_steps:
            _table(workdir, a.models.split(","), table_steps, sides, skip, a.timeout)
    if a.ram_dir:
        shutil.rmtree(a.ram_dir, ignore_errors=True)  # give the tmpfs memory back


def _dd_seconds(directory: Path, size: int) -> float:
    """Seconds for dd to write `size` bytes of zeros to a new file in `directory` (as the writers
    do: through the page cache, no sync)."""
    target = directory / "dd.bin"
    directory.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    subprocess.run(["dd", "if=/dev/zero", f"of={target}", "bs=1M", f"count={-(-size // 2**20)}"],
                   check=True, capture_output=True)
    seconds = time.perf_counter() - start
    target.unlink()
    return seconds


def _table(workdir: Path, names, steps, sides, skip, timeout) -> None:
    print(f"\n# files in {workdir}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
          f"{open('/proc/loadavg').read().split()[0]}; time, extra peak RSS (x the artifact's size)")
    print("| model | step | artifact | " + " | ".join(s for s, _ in sides) + " | speedup | dd, same bytes |")
    print("|---|---|---|" + "---|" * len(sides) + "---|---|")
    for name in names:
        for step in steps:
            results = []
            for side, python in sides:
                if side != "this project" and f"{name}:{step}" in skip:
                    results.append({"error": "skipped, see --skip-reference"})
                    continue
                # Each side writes its own files and reads back those it wrote.
                results.append(_run(python, step, name, workdir / side.split()[0] / name, timeout))
            size = next((r["artifact"] for r in results if "artifact" in r), 0)
            speed = ""
            if len(results) == 2 and all("seconds" in r for r in results):
                speed = f"{results[1]['seconds'] / results[0]['seconds']:.0f}x"
            floor = f"{_dd_seconds(workdir, size):.3f} s" if step.startswith("write") and size else ""
            print(f"| {name} | {step} | {size / 2**20:.1f} MiB | " + " | ".join(_cell(r) for r in results)
                  + f" | {speed} | {floor} |", flush=True)

if __name__ == "__main__":
    main()
