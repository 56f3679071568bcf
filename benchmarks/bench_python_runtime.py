"""Times the pure-Python runtime against eager torch on a zoo model and prints both.

    python benchmarks/bench_python_runtime.py [--model mobilenet_v2] [--pte FILE.pte] [--repeat N]

Without --pte the model is exported with this package's exporter. With it (e.g. a file from
the published exporter, made from the same zoo factory) that file is run instead. Runs of
the two are interleaved so that load from other processes affects both alike. A last line
times a chain of 200 tiny ops, where the time is almost all per-instruction dispatch.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from _zoo import export_bytes, load_models, program_bytes  # noqa: E402  (this script's folder is on sys.path)

from executorch.devtools.compare import compare_outputs

MODELS = load_models()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mobilenet_v2", choices=sorted(MODELS))
    ap.add_argument("--pte", help="run this .pte instead of exporting the model")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's choice)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    os.environ["EXECUTORCH_RUNTIME"] = "python"
    from executorch.runtime import Runtime

    model, inputs = MODELS[args.model]()
    data, source = program_bytes(model, inputs, args.pte)

    start = time.perf_counter()
    method = Runtime.get().load_program(data).load_method("forward")
    load_s = time.perf_counter() - start

    def eager():
        with torch.no_grad():
            return model(*inputs)

    def runtime():
        return method.execute(list(inputs))

    for _ in range(args.warmup):
        eager(), runtime()
    times = {"eager": [], "runtime": []}
    for _ in range(args.repeat):
        for name, fn in (("eager", eager), ("runtime", runtime)):
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)

    check = compare_outputs(runtime(), eager())
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    low = {k: min(v) * 1e3 for k, v in times.items()}
    print(f"model {args.model}: {len(data):,} bytes .pte ({source}), torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads, {args.repeat} runs")
    print(f"load_program + load_method: {load_s * 1e3:.1f} ms")
    print(f"eager torch (no_grad):  median {med['eager']:.2f} ms  min {low['eager']:.2f} ms")
    print(f"python runtime execute: median {med['runtime']:.2f} ms  min {low['runtime']:.2f} ms")
    print(f"runtime / eager: {med['runtime'] / med['eager']:.3f} (median), {low['runtime'] / low['eager']:.3f} (min)")
    print(f"runtime vs eager: {'OK' if check.ok else 'FAIL'}, {check}")
    _dispatch_overhead(Runtime, args.repeat)


class _TinyChain(torch.nn.Module):
    """Many ops on a 4-element tensor: the time is almost all per-op dispatch."""

    def forward(self, x):
        for i in range(100):
            x = x * 1.0001 + i
        return x


def _dispatch_overhead(runtime_cls, repeat: int) -> None:
    model, inputs = _TinyChain(), (torch.ones(4),)
    data = export_bytes(model, inputs)
    from executorch.exir._serialize import read_program

    n = sum(len(c.instructions) for c in read_program(data).execution_plan[0].chains)
    method = runtime_cls.get().load_program(data).load_method("forward")
    best = {"eager": float("inf"), "runtime": float("inf")}
    for _ in range(repeat):
        for name, fn in (("eager", lambda: model(*inputs)), ("runtime", lambda: method.execute(list(inputs)))):
            with torch.no_grad():
                start = time.perf_counter()
                fn()
                best[name] = min(best[name], time.perf_counter() - start)
    print(f"tiny chain ({n} instructions, 4 elements): eager {best['eager'] * 1e6 / n:.1f} us/op, "
          f"python runtime {best['runtime'] * 1e6 / n:.1f} us/instruction (min of {repeat})")


if __name__ == "__main__":
    main()
