"""Times the native runtime against the pure-Python runtime and eager torch, and the
executor's own cost per instruction; prints the figures.

    python benchmarks/bench_native.py [--model mobilenet_v2] [--pte FILE.pte] [--repeat N] [--published REFPY]
    python benchmarks/bench_native.py --table [--table-models a,b] [--repeat N] [--xnnpack XNNPY]
    python benchmarks/bench_native.py --same-xnnpack-file XNNPY [--table-models a,b] [--int8 | --8da4w] [--repeat N]
        [--chart same_file_speed.png]

Without --pte the model is exported with this package's exporter; with it (e.g. a file from
the published exporter made from the same zoo factory) that file is run. Runs of the three
are interleaved so load from other processes affects them alike. The per-instruction figure
is the slope between chains of 100 and 400 one-element adds, so it includes a trivial kernel.
With --published, the same file also runs on the published ExecuTorch runtime (the python of
an environment that has it), in a separate process right after, one thread.

--table times the thread-scaling table (models from _bench_models.py): native at 1 and all
threads vs eager at 1 and all threads, interleaved in one process, medians; with --xnnpack, the
same model exported by the published exporter with its XNNPACK partitioner and timed on the
published runtime at 1 and all threads, in a separate process right after (the python of an
environment with executorch 1.5.1 and torchao). The load average is printed before and after.

--same-xnnpack-file runs one file on both runtimes: each model is exported once by the published
exporter with its XNNPACK partitioner (--int8: quantized first with its XNNPACKQuantizer), then that
file is timed on this native runtime (its XnnpackBackend, on our kernels) and on the published
runtime (the real XNNPACK), at 1 and 2 threads, runs interleaved between the two processes
(one published process per thread count, its pool sized with _unsafe_reset_threadpool before the
program loads, since its XNNPACK delegate keeps the pool it was loaded with), medians. With --chart,
the table's time ratios (ours / published, one bar per thread count) are also drawn as a PNG
(needs matplotlib; without it the chart is skipped with a note).
"""

from __future__ import annotations

import argparse
import datetime
import io
import math
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import torch

import _bench_models  # this script's folder is on sys.path
from _zoo import export_bytes, load_models, program_bytes
from executorch.devtools.compare import compare_outputs
from executorch.exir._serialize._atomic import write_chunks
from executorch.runtime import _python  # _native is imported where used: the chart helper needs no native build
from executorch.runtime._backend import Verification

MODELS = load_models()


class _Chain(torch.nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n

    def forward(self, x):
        for _ in range(self.n):
            x = x + 1.0
        return x


def _median_ms(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def _per_instruction_ns(repeat: int) -> float:
    from executorch.runtime import _native

    x = torch.ones(1)
    costs = {}
    for n in (100, 400):
        program = _native.load_program(export_bytes(_Chain(n), (x,)), Verification.InternalConsistency)
        method = program.load_method("forward")
        method.execute([x])
        costs[n] = _median_ms(lambda: method.execute([x]), repeat * 20)
    return (costs[400] - costs[100]) / 300 * 1e6


_PUBLISHED_TIMER = """
import statistics, sys, time, torch
from executorch.runtime import Runtime
torch.set_num_threads(1)
method = Runtime.get().load_program(sys.argv[1]).load_method("forward")
inputs = list(torch.load(sys.argv[2]))
method.execute(inputs)
times = []
for _ in range(int(sys.argv[3])):
    start = time.perf_counter()
    method.execute(inputs)
    times.append((time.perf_counter() - start) * 1e3)
print("result-ms", statistics.median(times), min(times))
"""


def _result_ms(stdout: str) -> list[float]:
    """The figures a timer subprocess printed; the published runtime logs its own lines to stdout too."""
    lines = [line.split()[1:] for line in stdout.splitlines() if line.startswith("result-ms ")]
    if not lines:
        raise RuntimeError(f"the timer printed no result line; its output ended: {stdout[-300:]!r}")
    return [float(v) for v in lines[-1]]


def _published_ms(python: str, data: bytes, inputs, runs: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        pte, inp = Path(tmp) / "m.pte", Path(tmp) / "in.pt"
        pte.write_bytes(data)
        torch.save(list(inputs), inp)
        out = subprocess.run([python, "-c", _PUBLISHED_TIMER, str(pte), str(inp), str(runs)],
                             capture_output=True, text=True, check=True).stdout
    median, best = _result_ms(out)
    return median, best


# One process per thread count, the pool sized before the program loads: the published XNNPACK
# delegate keeps the pool it was loaded with. The first process exports the file, the second reuses it.
_XNNPACK_TIMER = """
import os, statistics, sys, time, torch
sys.path.insert(0, sys.argv[1])
from executorch.extension.pybindings.portable_lib import _load_for_executorch, _unsafe_reset_threadpool
import _bench_models
model, inputs = _bench_models.MODELS[sys.argv[2]]()
pte = sys.argv[5]
if not os.path.exists(pte):
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    data = to_edge_transform_and_lower(torch.export.export(model, inputs),
                                       partitioner=[XnnpackPartitioner()]).to_executorch().buffer
    with open(pte + ".part", "wb") as f:
        f.write(data)
    os.replace(pte + ".part", pte)
_unsafe_reset_threadpool(int(sys.argv[4]))
module = _load_for_executorch(pte)
times = []
for _ in range(int(sys.argv[3])):
    module.forward(list(inputs))
    start = time.perf_counter()
    module.forward(list(inputs))
    times.append((time.perf_counter() - start) * 1e3)
print("result-ms", statistics.median(times))
"""


def _xnnpack_ms(python: str, name: str, runs: int, threads: int) -> str:
    """Median ms at 1 and `threads` threads of the published XNNPACK-delegated file, or why not."""
    figures = []
    with tempfile.TemporaryDirectory() as tmp:
        for count in (1, threads):
            proc = subprocess.run([python, "-c", _XNNPACK_TIMER, str(Path(__file__).parent), name, str(runs),
                                   str(count), str(Path(tmp) / "m.pte")], capture_output=True, text=True)
            if proc.returncode < 0:
                return f"failed: the published runtime died of signal {-proc.returncode} | "
            if proc.returncode != 0:
                return f"failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode} | "
            figures.append(_result_ms(proc.stdout)[0])
    return f"{figures[0]:.1f} | {figures[1]:.1f}"


def _table(args) -> None:
    from executorch.extension.pybindings import portable_lib
    from executorch.runtime import _native

    threads = len(os.sched_getaffinity(0))
    names = args.table_models.split(",") if args.table_models else list(_bench_models.MODELS)
    unknown = [n for n in names if n not in _bench_models.MODELS]
    if unknown:
        raise SystemExit(f"--table-models: unknown {unknown}; choose from {', '.join(_bench_models.MODELS)}")
    print(f"load average before: {os.getloadavg()}, {threads} CPUs available, {args.repeat} runs each")
    print(f"| model | native 1T | native {threads}T | eager 1T | eager {threads}T | XNNPACK 1T | XNNPACK {threads}T "
          f"| native {threads}T speedup | native/eager ({threads}T) | check |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in names:
        model, inputs = _bench_models.MODELS[name]()
        data = export_bytes(model, inputs)
        method = _native.load_program(data, Verification.InternalConsistency).load_method("forward")

        def eager():
            with torch.no_grad():
                return model(*inputs)

        check = compare_outputs(method.execute(list(inputs)), eager())
        configs = {("native", 1): lambda: portable_lib._unsafe_reset_threadpool(1),
                   ("native", threads): lambda: portable_lib._unsafe_reset_threadpool(threads),
                   ("eager", 1): lambda: torch.set_num_threads(1),
                   ("eager", threads): lambda: torch.set_num_threads(threads)}
        runs = {"native": lambda: method.execute(list(inputs)), "eager": eager}
        times: dict = {key: [] for key in configs}
        for _ in range(args.repeat):
            for (kind, n), configure in configs.items():
                configure()
                runs[kind]()  # after a resize: one untimed run
                start = time.perf_counter()
                runs[kind]()
                times[(kind, n)].append((time.perf_counter() - start) * 1e3)
        portable_lib._unsafe_reset_threadpool(threads)
        torch.set_num_threads(threads)
        med = {key: statistics.median(ts) for key, ts in times.items()}
        xnn = _xnnpack_ms(args.xnnpack, name, args.repeat, threads) if args.xnnpack else "not run (no --xnnpack) | -"
        print(f"| {name} | {med[('native', 1)]:.1f} | {med[('native', threads)]:.1f} | {med[('eager', 1)]:.1f} | "
              f"{med[('eager', threads)]:.1f} | {xnn} | {med[('native', 1)] / med[('native', threads)]:.2f}x | "
              f"{med[('native', threads)] / med[('eager', threads)]:.2f} | {'OK' if check.ok else 'FAIL'} |",
              flush=True)
    print(f"load average after: {os.getloadavg()}")


# One published process per thread count: its XNNPACK delegate takes the pool's size when the
# program loads (resizing the pool afterwards leaves the delegate's runtime on the old pool), so the
# pool is sized before loading. A request runs once untimed, then N timed runs back to back (steady
# state, as an application calling the model in a loop sees it), and answers their median.
_XNNPACK_STEPPER = """
import statistics, sys, time, torch
from executorch.extension.pybindings.portable_lib import _load_for_executorch, _unsafe_reset_threadpool
_unsafe_reset_threadpool(int(sys.argv[4]))
module = _load_for_executorch(sys.argv[1])
inputs = list(torch.load(sys.argv[2]))
clock = getattr(time, sys.argv[3])
torch.save(list(module.forward(inputs)), sys.argv[5])
print("ready", flush=True)
for line in sys.stdin:
    time.sleep(0.05)  # the other runtime's pool workers stop spinning first
    module.forward(inputs)
    times = []
    for _ in range(int(line)):
        start = clock()
        module.forward(inputs)
        times.append((clock() - start) * 1e3)
    print("result-ms", statistics.median(times), flush=True)
"""


def _check_text(ours, published, quantized: bool) -> str:
    """The table's check column: float files against eager at float32 tolerance; quantized ones
    (whose reference is the converted pt2e or quantized eager module, a quantization step away
    here and there on any runtime) within twice the published runtime's own error on the file."""
    if not quantized:
        return f"vs eager: {'OK' if ours.ok else 'FAIL'}, max rel err {ours.max_rel_err:.3g}"
    ok = ours.max_rel_err <= max(2 * published.max_rel_err, 1e-5)
    return (f"vs the quantized reference: {'OK' if ok else 'FAIL'}, max rel err {ours.max_rel_err:.3g} "
            f"(published runtime: {published.max_rel_err:.3g})")


def draw_ratio_chart(rows: list[dict], path, date: str | None = None) -> bool:
    """Draws the same-file table as a grouped horizontal bar chart of time ours / published per model,
    one bar per thread count, with a line at 1.0, and writes it as a PNG at `path` atomically. Each row is
    {"model": label, "ours": {threads: ms},
    "published": {threads: ms}}, as `_same_xnnpack_file` builds them. Returns False, after one line
    saying so, when matplotlib is not installed."""
    if not rows:
        raise ValueError("draw_ratio_chart: no rows to draw (the table measured no model)")
    counts = sorted({n for row in rows for n in row["ours"] if n in row["published"]})
    if not counts:
        raise ValueError("draw_ratio_chart: no thread count has both an ours and a published time")
    ratios = {}
    for row in rows:
        for n in counts:
            ours, published = row["ours"].get(n), row["published"].get(n)
            if ours is None or published is None:
                continue
            if not (ours > 0 and published > 0 and math.isfinite(ours) and math.isfinite(published)):
                raise ValueError(f"draw_ratio_chart: {row['model']} at {n} threads has times {ours} / {published} ms; "
                                 "both must be positive and finite")
            ratios[row["model"], n] = ours / published
    try:
        from matplotlib.figure import Figure
    except ImportError:
        print(f"bench_native: no chart written to {path}: matplotlib is not installed (pip install matplotlib)")
        return False

    path = Path(path)
    date = date or datetime.date.today().isoformat()
    height = 0.8 / len(counts)
    fig = Figure(figsize=(7.5, 1.2 + 0.55 * len(rows) * len(counts)), layout="constrained")
    ax = fig.add_subplot()
    for i, n in enumerate(counts):
        ys = [len(rows) - 1 - r + 0.4 - height * (i + 0.5) for r in range(len(rows))]  # first count on top
        values = [ratios.get((row["model"], n), math.nan) for row in rows]
        bars = ax.barh(ys, values, height=height, label=f"{n} thread{'s' if n > 1 else ''}")
        ax.bar_label(bars, labels=["" if math.isnan(v) else f"{v:.2f}" for v in values], padding=3, fontsize=8)
    ax.axvline(1.0, color="black", linestyle="--", linewidth=1)
    ax.set_yticks(range(len(rows)), [row["model"] for row in reversed(rows)])
    ax.set_xlim(0, max(max(ratios.values()), 1.0) * 1.15)
    ax.set_xlabel("time, ours / published (below 1.0: ours is faster)")
    ax.set_ylabel("model")
    ax.set_title(f"Same .pte, our runtime against published ExecuTorch 1.5.1 (XNNPACK)\nmeasured {date}")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=120)
    write_chunks(path, [png.getvalue()])  # whole or not at all, as every file this project writes
    print(f"chart written to {path}")
    return True


def _same_xnnpack_file(args) -> None:
    from executorch.extension.pybindings import portable_lib
    from executorch.runtime import _native

    python = args.same_xnnpack_file
    tool = Path(__file__).resolve().parents[2] / "shared" / "tools" / "reference-runtime" / "export_pte.py"
    names = args.table_models.split(",") if args.table_models else ["mobilenet_v2", "resnet50", "vit_small",
                                                                       "transformer_encoder"]
    kind = "8da4w (quantize_model_)" if args.q8da4w else "int8 (XNNPACKQuantizer)" if args.int8 else "fp32"
    clock = "thread_time" if args.cpu_time else "perf_counter"
    counts = (1,) if args.cpu_time else (1, 2)
    print(f"load average before: {os.getloadavg()}, {len(os.sched_getaffinity(0))} CPUs available, "
          f"{args.repeat} interleaved turns of {args.inner} back-to-back runs each, {kind}"
          + (", 1 thread, thread CPU time (2T columns not run)" if args.cpu_time else ""))
    print("| model | ours 1T | published 1T | ours 2T | published 2T | ours/published 1T | ours/published 2T | check |")
    print("|---|---|---|---|---|---|---|---|")
    tag = "8da4w" if args.q8da4w else "int8" if args.int8 else "fp32"
    rows = []
    for name in names:
        model, inputs = _bench_models.MODELS[name]()
        with tempfile.TemporaryDirectory() as tmp:
            keep = Path(args.export_dir) if args.export_dir else None
            pte, inp = (keep or Path(tmp)) / f"{name}.{tag}.pte", Path(tmp) / "in.pt"
            flags = ["--xnnpack", "--int8"] if args.int8 else ["--xnnpack"]
            exporter = tool
            if args.q8da4w:
                exporter = Path(__file__).resolve().parents[1] / "test" / "fixtures" / "xnnpack" / "export_8da4w.py"
                flags = []
            if keep is None or not pte.is_file():
                if keep is not None:
                    keep.mkdir(parents=True, exist_ok=True)
                subprocess.run([python, str(exporter), f"{Path(__file__).parent / '_bench_models.py'}:"
                                f"{_bench_models.MODELS[name].__name__}", str(pte), *flags],
                               check=True, capture_output=True, text=True)
            torch.save(list(inputs), inp)
            data = pte.read_bytes()
            method = _native.load_program(data, Verification.InternalConsistency).load_method("forward")
            ref = pte.with_name(pte.stem + ".ref.pt")
            if ref.is_file():
                want = torch.load(ref)
            else:
                with torch.no_grad():
                    want = model(*inputs)
            ours = compare_outputs(method.execute(list(inputs)), want)
            published_out = Path(tmp) / "published.pt"
            procs = {n: subprocess.Popen([python, "-c", _XNNPACK_STEPPER, str(pte), str(inp), clock, str(n),
                                          str(published_out)],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                         text=True) for n in counts}

            def _line(n: int) -> str:
                line = procs[n].stdout.readline()
                if not line:  # EOF: the published runtime's process exited (its stderr is discarded)
                    raise SystemExit(f"the published runtime's process for {name} exited (code {procs[n].wait()})")
                return line

            for n in counts:
                while not _line(n).startswith("ready"):
                    pass
            check = _check_text(ours, compare_outputs(torch.load(published_out), want), quantized=tag != "fp32")
            times: dict = {}
            for _ in range(args.repeat):
                for threads in counts:
                    portable_lib._unsafe_reset_threadpool(threads)
                    time.sleep(0.05)  # the published pool's workers spin a while after a run
                    method.execute(list(inputs))
                    inner = []
                    for _ in range(args.inner):
                        start = getattr(time, clock)()
                        method.execute(list(inputs))
                        inner.append((getattr(time, clock)() - start) * 1e3)
                    times.setdefault(("ours", threads), []).append(statistics.median(inner))
                    procs[threads].stdin.write(f"{args.inner}\n")
                    procs[threads].stdin.flush()
                    line = _line(threads)
                    while not line.startswith("result-ms"):
                        line = _line(threads)
                    times.setdefault(("published", threads), []).append(float(line.split()[1]))
            for proc in procs.values():
                proc.stdin.close()
                proc.wait()
        med = {key: statistics.median(ts) for key, ts in times.items()}
        two = (f"{med[('ours', 2)]:.1f} | {med[('published', 2)]:.1f}",
               f"{med[('ours', 2)] / med[('published', 2)]:.2f}") \
            if 2 in counts else ("- | -", "-")
        print(f"| {name} | {med[('ours', 1)]:.1f} | {med[('published', 1)]:.1f} | {two[0]} | "
              f"{med[('ours', 1)] / med[('published', 1)]:.2f} | {two[1]} | {check} |", flush=True)
        rows.append({"model": f"{name} {tag}", "ours": {n: med[("ours", n)] for n in counts},
                     "published": {n: med[("published", n)] for n in counts}})
    print(f"load average after: {os.getloadavg()}")
    if args.chart:
        draw_ratio_chart(rows, args.chart)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mobilenet_v2", choices=sorted(MODELS))
    ap.add_argument("--pte", help="run this .pte instead of exporting the model")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch intra-op threads (default 1, like the native runtime)")
    ap.add_argument("--published", metavar="REFPY", help="also time the file on the published runtime")
    ap.add_argument("--table", action="store_true", help="time the thread-scaling table instead")
    ap.add_argument("--table-models", help=f"comma-separated subset of {','.join(_bench_models.MODELS)}")
    ap.add_argument("--xnnpack", metavar="XNNPY", help="with --table: a python with executorch 1.5.1 and torchao")
    ap.add_argument("--same-xnnpack-file", metavar="XNNPY",
                    help="time the published exporter's XNNPACK file on both runtimes (XNNPY: the published python)")
    ap.add_argument("--int8", action="store_true", help="with --same-xnnpack-file: quantize first (XNNPACKQuantizer)")
    ap.add_argument("--inner", type=int, default=10,
                    help="with --same-xnnpack-file: back-to-back timed runs per turn (their median is the turn's "
                         "figure; the first runs after the turn's idle wait are slower on both sides)")
    ap.add_argument("--8da4w", dest="q8da4w", action="store_true",
                    help="with --same-xnnpack-file: 8da4w linear layers (the published quantize_model_), e.g. for "
                         "llama_100m_token (one token: ms per decode step, tok/s = 1000 / ms)")
    ap.add_argument("--export-dir", metavar="DIR",
                    help="with --same-xnnpack-file: keep the exported files in DIR and reuse those already there "
                         "(delete them after changing the exporter or the models)")
    ap.add_argument("--cpu-time", action="store_true",
                    help="with --same-xnnpack-file: one thread only, timed in thread CPU time (steadier than "
                         "wall time on a machine others load)")
    ap.add_argument("--chart", metavar="PATH",
                    help="with --same-xnnpack-file: also draw the table's time ratios ours/published as a PNG bar "
                         "chart at PATH (needs matplotlib)")
    args = ap.parse_args()
    if args.chart and not args.same_xnnpack_file:
        ap.error("--chart goes with --same-xnnpack-file")
    if args.same_xnnpack_file:
        _same_xnnpack_file(args)
        return
    if args.table:
        _table(args)
        return
    torch.set_num_threads(args.threads)
    from executorch.runtime import _native

    model, inputs = MODELS[args.model]()
    data, source = program_bytes(model, inputs, args.pte)

    start = time.perf_counter()
    native_program = _native.load_program(data, Verification.InternalConsistency)
    native_load_ms = (time.perf_counter() - start) * 1e3
    start = time.perf_counter()
    native = native_program.load_method("forward")
    native_method_ms = (time.perf_counter() - start) * 1e3
    python = _python.load_program(data, Verification.InternalConsistency).load_method("forward")

    def eager():
        with torch.no_grad():
            return model(*inputs)

    runs = {"native": lambda: native.execute(list(inputs)), "python": lambda: python.execute(list(inputs)),
            "eager": eager}
    for fn in runs.values():
        fn()
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(args.repeat):
        for name, fn in runs.items():
            start = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - start) * 1e3)

    check = compare_outputs(native.execute(list(inputs)), eager())

    print(f"model {args.model} ({source}), {len(data):,} bytes, torch threads {args.threads}")
    print(f"native program load {native_load_ms:.2f} ms, method load {native_method_ms:.2f} ms")
    for name, ts in times.items():
        print(f"{name:>7}: median {statistics.median(ts):8.2f} ms  min {min(ts):8.2f} ms  ({args.repeat} runs)")
    if args.published:
        runs = min(args.repeat, 5)
        median, best = _published_ms(args.published, data, inputs, runs)
        print(f"{'published':>7}: median {median:8.2f} ms  min {best:8.2f} ms  ({runs} runs, published 1.5.1 portable)")
    print(f"native vs eager: {'OK' if check.ok else 'FAIL'}, {check}")
    print(f"executor cost per instruction (incl. a 1-element add kernel): {_per_instruction_ns(args.repeat):.0f} ns")


if __name__ == "__main__":
    main()
