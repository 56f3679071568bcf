"""Times the event tracer's cost: each model run with tracing off, profiling, and intermediate outputs.

    python benchmarks/bench_tracing.py [--model mobilenet_v2 transformer_encoder] [--engine native python]
                                       [--repeat 15] [--threads 1]

Each (model, engine) loads the program three times: plain, `enable_etdump=True` (an event per
instruction and kernel), and with a debug buffer large enough for every run's kernel outputs
(each kernel's output copied into it). Runs of the three are interleaved so that load from other
processes affects all alike; medians and minimums in ms, and each traced mode's median as a ratio
of the plain one (on a shared machine a run of a millisecond or two is often preempted: the
minimum shows the cost without that).
Thread counts are pinned (`--threads`): the native kernels' pool and torch's intra-op threads.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch

from _zoo import export_bytes, load_models  # noqa: E402  (this script's folder is on sys.path)

MODELS = load_models()
MODES = ("off", "profiling", "intermediate outputs")


def _debug_bytes_per_run(pte: bytes) -> int:
    """Bytes one run's logged values take in the debug buffer: each kernel's output and each
    delegate call's arguments, 64-byte aligned, and the program's outputs."""
    from executorch.exir import schema as S
    from executorch.exir._dtypes import element_size
    from executorch.exir._serialize import read_program

    plan = read_program(pte).execution_plan[0]

    def nbytes(index: int) -> int:
        v = plan.values[index].val
        if not isinstance(v, S.Tensor):
            return 0
        n = element_size(int(v.scalar_type)) or 8
        for s in v.sizes:
            n *= s
        return n + 64

    total = sum(nbytes(i) for i in plan.outputs)
    for instr in plan.chains[0].instructions:
        args = instr.instr_args
        if isinstance(args, S.KernelCall) and args.args:
            total += nbytes(args.args[-1])
        elif isinstance(args, S.DelegateCall):
            total += sum(nbytes(i) for i in args.args)
    return total


def _dump(program):
    from executorch.devtools.etdump.serialize import deserialize_from_etdump_flatcc

    with tempfile.TemporaryDirectory() as tmp:
        program.write_etdump_result_to_file(Path(tmp) / "t.etdp")
        return deserialize_from_etdump_flatcc((Path(tmp) / "t.etdp").read_bytes())


def _logged_per_run(program) -> list:
    """Intermediate outputs logged in each Execute block (a full buffer would drop the later ones)."""
    return [sum(1 for e in b.events if e.debug_event and e.debug_event.debug_entry.output is None)
            for b in _dump(program).run_data if b.name == "Execute"]


def _debug_buffer_for(runtime, pte: bytes, inputs: list, runs: int) -> int:
    """A debug buffer for `runs` runs: one run's use, measured on a generous buffer, times `runs`."""
    program = runtime.load_program(pte, enable_etdump=True, debug_buffer_size=4 * _debug_bytes_per_run(pte))
    program.load_method("forward").execute(inputs)
    used = 0
    for block in _dump(program).run_data:
        for e in block.events:
            t = e.debug_event.debug_entry.tensor if e.debug_event else None
            if t is not None:
                n = torch.empty((), dtype=torch.float64).element_size()  # an upper bound per element
                for s in t.sizes:
                    n *= s
                used = max(used, t.offset + n)
    return (used + 64) * runs


def bench(runtime, pte: bytes, inputs: list, repeat: int, warmup: int) -> dict:
    runs = repeat + warmup
    programs = {
        "off": runtime.load_program(pte),
        "profiling": runtime.load_program(pte, enable_etdump=True),
        "intermediate outputs": runtime.load_program(
            pte, enable_etdump=True, debug_buffer_size=_debug_buffer_for(runtime, pte, inputs, runs)),
    }
    methods = {mode: p.load_method("forward") for mode, p in programs.items()}
    times: dict = {mode: [] for mode in MODES}
    for i in range(runs):
        for mode in MODES:
            start = time.perf_counter()
            methods[mode].execute(inputs)
            if i >= warmup:
                times[mode].append((time.perf_counter() - start) * 1e3)
    logged = _logged_per_run(programs["intermediate outputs"])
    if len(set(logged)) != 1 or not logged[0]:
        raise SystemExit(f"the debug buffer dropped outputs (logged per run: {logged}); raise its size")
    return {mode: (statistics.median(t), min(t)) for mode, t in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", nargs="+", default=["mobilenet_v2", "transformer_encoder"], choices=sorted(MODELS))
    ap.add_argument("--engine", nargs="+", default=["native", "python"], choices=["native", "python"])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="kernel threads, both engines (default: 1)")
    args = ap.parse_args()

    import importlib

    from executorch.runtime import Runtime
    from executorch.runtime._backend import _MODULES

    torch.set_num_threads(args.threads)
    runtimes = {}
    for engine in args.engine:
        try:
            runtimes[engine] = Runtime(engine, importlib.import_module(_MODULES[engine]))
        except ImportError:
            print(f"({engine} runtime not built: skipped)")
    if "native" in runtimes:
        from executorch.extension.pybindings import portable_lib

        portable_lib._unsafe_reset_threadpool(args.threads)
    print(f"median and min of {args.repeat} interleaved runs in ms ({args.warmup} warm-up), {args.threads} "
          "thread(s); the median's ratio to tracing off in brackets")
    print(f"{'model':<20} {'engine':<7} " + " ".join(f"{m:>30}" for m in MODES))
    for name in args.model:
        model, inputs = MODELS[name]()
        pte = export_bytes(model, inputs)
        for engine, runtime in runtimes.items():
            med = bench(runtime, pte, list(inputs), args.repeat, args.warmup)
            cells = [f"{med[m][0]:.3f} / {med[m][1]:.3f} ({med[m][0] / med['off'][0]:.2f}x)" for m in MODES]
            print(f"{name:<20} {engine:<7} " + " ".join(f"{c:>30}" for c in cells), flush=True)


if __name__ == "__main__":
    main()
