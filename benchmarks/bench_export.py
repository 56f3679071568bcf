"""Export benchmarks: lowering time, `import executorch.exir` time, peak memory, per model.

Runs the same public API under any Python that has an `executorch` package, so the project
and the published ExecuTorch are measured by one script, in the same run:

    python benchmarks/bench_export.py                      # this project (source tree)
    python benchmarks/bench_export.py --compare REF_PYTHON # and the published exporter beside it
    python benchmarks/bench_export.py --model resnet50,vit_tiny,mlp_512mb --runs 3 --compare REF_PYTHON
    python benchmarks/bench_export.py --model mobilenet_v2,llama_100m --xnnpack --runs 3 --compare REF_PYTHON

Figures: lowering = to_edge_transform_and_lower + to_executorch + .buffer after torch.export
(median of --runs in one process, after a warm-up); import = `import executorch.exir` after
torch in a fresh process (median of --runs processes); extra peak memory = peak RSS during
lowering above RSS before it (with `.buffer`, and written straight to a file), against the
model's weight bytes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _model(name: str):
    """A zoo model (loaded by path, so the published package's python can run it too), or one of
    benchmarks/_large_models.py (mlp_512mb, vit_b16)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    if name in ("mlp_512mb", "vit_b16", "llama_100m"):
        import _large_models

        return getattr(_large_models, f"make_{name}")()
    from _zoo import load_models

    return load_models()[name]()


def _partitioners(xnnpack: bool) -> list:
    if not xnnpack:
        return []
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    return [XnnpackPartitioner()]


def measure_lowering(runs: int, name: str = "mobilenet_v2", xnnpack: bool = False) -> dict:
    import torch

    model, inputs = _model(name)
    ep = torch.export.export(model, inputs)
    from executorch.exir import to_edge_transform_and_lower

    import tempfile

    weight_bytes = sum(t.numel() * t.element_size() for t in ep.state_dict.values())
    times, size, extra, extra_file = [], 0, 0, 0
    out = Path(tempfile.mkdtemp()) / f"{name}.pte"
    for i in range(runs + 1):
        Path("/proc/self/clear_refs").write_text("5")  # reset the peak-RSS mark
        before = _rss_kib("VmRSS")
        t0 = time.perf_counter()
        buf = to_edge_transform_and_lower(ep, partitioner=_partitioners(xnnpack)).to_executorch().buffer
        elapsed = time.perf_counter() - t0
        peak = _rss_kib("VmHWM")
        size = len(buf)
        del buf
        # the same lowering written straight to a file, as `export` CLIs do
        Path("/proc/self/clear_refs").write_text("5")
        before_file = _rss_kib("VmRSS")
        with open(out, "wb") as f:
            to_edge_transform_and_lower(ep, partitioner=_partitioners(xnnpack)).to_executorch().write_to_file(f)
        peak_file = _rss_kib("VmHWM")
        if i:  # the first run warms up caches (op lookups, imports)
            times.append(elapsed)
            extra = max(extra, (peak - before) * 1024)
            extra_file = max(extra_file, (peak_file - before_file) * 1024)
    out.unlink()
    return {"lowering_s": statistics.median(times), "pte_bytes": size, "extra_peak_bytes": extra,
            "extra_peak_file_bytes": extra_file, "weight_bytes": weight_bytes,
            "bytes_floor_s": _bytes_floor(ep, runs)}


def _bytes_floor(ep, runs: int) -> float:
    import torch

    views = [memoryview(t.detach().contiguous().reshape(-1).view(torch.uint8).numpy())
             for t in ep.state_dict.values()]
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        joined = b"".join(views)
        times.append(time.perf_counter() - t0)
        del joined
    return statistics.median(times)


def measure_import(python: str, runs: int, first_use: bool) -> float:
    """`import executorch.exir` after torch; with first_use, also until the lowering entry point is
    loaded (this project loads it lazily on first use)."""
    stmt = "import executorch.exir" + ("; executorch.exir.to_edge_transform_and_lower" if first_use else "")
    code = f"import time, torch; t = time.perf_counter(); {stmt}; print(time.perf_counter() - t)"
    out = []
    for _ in range(runs):
        proc = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True, cwd="/")
        out.append(float(proc.stdout.strip().splitlines()[-1]))
    return statistics.median(out)


def run(python: str, runs: int, name: str = "mobilenet_v2", imports: bool = True, xnnpack: bool = False) -> dict:
    proc = subprocess.run([python, __file__, "--child", "--runs", str(runs), "--model", name]
                          + (["--xnnpack"] if xnnpack else []),
                          capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"{python} failed:\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if imports:
        result["import_s"] = measure_import(python, runs, first_use=False)
        result["first_use_s"] = measure_import(python, runs, first_use=True)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--model", default="mobilenet_v2",
                    help="comma-separated zoo names, mlp_512mb, vit_b16 and/or llama_100m (default: mobilenet_v2)")
    ap.add_argument("--xnnpack", action="store_true", help="lower with XnnpackPartitioner (both exporters)")
    ap.add_argument("--compare", metavar="REF_PYTHON", help="a python with the published executorch installed")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(measure_lowering(a.runs, a.model, a.xnnpack)))
        return
    names = a.model.split(",")
    for i, name in enumerate(names):
        imports = i == 0  # import time does not depend on the model
        rows = {"this project": run(sys.executable, a.runs, name, imports, a.xnnpack)}
        if a.compare:
            rows["published 1.5.1"] = run(a.compare, a.runs, name, imports, a.xnnpack)
        print(f"{name} export{' lowered to XNNPACK' if a.xnnpack else ''}, median of {a.runs} runs")
        print(f"{'':16}{'lowering s':>11}{'import s':>9}{'+first use s':>13}{'.pte bytes':>14}"
              f"{'peak+ .buffer MB':>17}{'peak+ to file MB':>17}{'weights MB':>11}{'bytes floor s':>14}")
        for label, r in rows.items():
            imp = f"{r['import_s']:9.3f}{r['first_use_s']:13.3f}" if imports else f"{'':9}{'':13}"
            print(f"{label:16}{r['lowering_s']:11.3f}{imp}{r['pte_bytes']:14,}"
                  f"{r['extra_peak_bytes'] / 1e6:17.1f}{r['extra_peak_file_bytes'] / 1e6:17.1f}"
                  f"{r['weight_bytes'] / 1e6:11.1f}{r['bytes_floor_s']:14.3f}")
        if a.compare:
            ours, ref = rows["this project"], rows["published 1.5.1"]
            line = f"lowering speed-up: {ref['lowering_s'] / ours['lowering_s']:.1f}x"
            if imports:
                line += f"; import to first use speed-up: {ref['first_use_s'] / ours['first_use_s']:.1f}x"
            print(line)


if __name__ == "__main__":
    main()
