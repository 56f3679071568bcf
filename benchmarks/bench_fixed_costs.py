"""The runtime's fixed costs against the published runtime's, on the same files: one `execute` of a tiny
program, `load_program` + `load_method`, and the resident memory a loaded program adds; prints a table.

    python benchmarks/bench_fixed_costs.py --published REFPY [--calls 2000] [--loads 50] [--keep DIR]

This package's exporter writes each file once (x + y on 1x4 tensors; a 16-16-4 MLP delegated to XNNPACK;
MobileNetV2 portable and XNNPACK); each runtime then runs every file in a fresh process of its own python
(this one, and REFPY: the python of an environment with the published executorch 1.5.1), one thread (torch's
and the runtime's pools pinned). Per file and runtime: the median of `--calls` single `execute` calls (after
20 warm-up calls), the median of `--loads` `load_program` + `load_method` of the file (read from disk each
time), and the growth of resident memory (VmRSS) from before the first load to after one call. Only
`executorch.runtime` and `portable_lib._unsafe_reset_threadpool` are used in the workers, which both
packages provide; the published one is run as a separate process, never imported here.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_WORKER = "--worker"


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _worker(path: str, inputs_path: str, calls: int, loads: int) -> None:
    """Measures one file on the runtime of this process's executorch; prints one JSON line."""
    import torch

    torch.set_num_threads(1)
    from executorch.extension.pybindings.portable_lib import _unsafe_reset_threadpool
    from executorch.runtime import Runtime

    _unsafe_reset_threadpool(1)
    inputs = torch.load(inputs_path)
    runtime = Runtime.get()
    before = _rss_kib()
    program = runtime.load_program(Path(path))
    method = program.load_method("forward")
    method.execute(inputs)
    added = _rss_kib() - before
    for _ in range(20):
        method.execute(inputs)
    times = []
    for _ in range(calls):
        start = time.perf_counter_ns()
        method.execute(inputs)
        times.append(time.perf_counter_ns() - start)
    load_times = []
    for _ in range(loads):
        start = time.perf_counter_ns()
        p = runtime.load_program(Path(path))
        p.load_method("forward")
        load_times.append(time.perf_counter_ns() - start)
        del p
    print(json.dumps({"execute_us": statistics.median(times) / 1e3, "load_ms": statistics.median(load_times) / 1e6,
                      "rss_mib": added / 1024}))


def _files(root: Path) -> dict:
    """name -> (pte path, inputs path), exported by this package."""
    import torch

    sys.path.insert(0, str(Path(__file__).parent))
    from _zoo import load_models
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge, to_edge_transform_and_lower

    class Add(torch.nn.Module):
        def forward(self, x, y):
            return x + y

    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    mv2_model, mv2_inputs = load_models()["mobilenet_v2"]()
    cases = {
        "x + y (1x4), portable": (Add(), (torch.ones(1, 4), torch.ones(1, 4)), None),
        "16-16-4 MLP, XNNPACK": (mlp, (torch.randn(1, 16),), XnnpackPartitioner),
        "MobileNetV2, portable": (mv2_model, mv2_inputs, None),
        "MobileNetV2, XNNPACK": (mv2_model, mv2_inputs, XnnpackPartitioner),
    }
    out = {}
    for i, (name, (model, inputs, partitioner)) in enumerate(cases.items()):
        ep = torch.export.export(model.eval(), inputs)
        edge = to_edge_transform_and_lower(ep, partitioner=[partitioner()]) if partitioner else to_edge(ep)
        pte, inp = root / f"m{i}.pte", root / f"m{i}.inputs.pt"
        pte.write_bytes(edge.to_executorch().buffer)
        torch.save(list(inputs), inp)
        out[name] = (pte, inp)
    return out


def _measure(python: str, pte: Path, inputs: Path, calls: int, loads: int) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([python, __file__, _WORKER, str(pte), str(inputs), str(calls), str(loads)],
                          capture_output=True, text=True, env=env, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"{python} failed on {pte.name}:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--published", required=True, help="python of an environment with the published executorch")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--loads", type=int, default=50)
    parser.add_argument("--keep", type=Path, help="write the exported files here (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        files = _files(root)
        print(f"{datetime.datetime.now():%Y-%m-%d %H:%M}, one thread, load average {os.getloadavg()[0]:.2f}")
        print("| file | measure | ours | published | ratio |\n|---|---|---|---|---|")
        for name, (pte, inputs) in files.items():
            ours = _measure(sys.executable, pte, inputs, args.calls, args.loads)
            ref = _measure(args.published, pte, inputs, args.calls, args.loads)
            for key, label, unit in (("execute_us", "one execute", "us"), ("load_ms", "load_program + load_method",
                                                                            "ms"), ("rss_mib", "resident memory added",
                                                                                    "MiB")):
                ratio = ours[key] / ref[key] if ref[key] else float("nan")
                print(f"| {name} | {label} | {ours[key]:.2f} {unit} | {ref[key]:.2f} {unit} | {ratio:.2f}x |")
        print(f"load average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == _WORKER:
        _worker(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    else:
        main()
