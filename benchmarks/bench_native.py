"""Times the native runtime against the pure-Python runtime and eager torch, and the
executor's own cost per instruction; prints the figures.

    python benchmarks/bench_native.py [--model mobilenet_v2] [--pte FILE.pte] [--repeat N]

Without --pte the model is exported with this package's exporter; with it (e.g. a file from
the published exporter made from the same zoo factory) that file is run. Runs of the three
are interleaved so load from other processes affects them alike. The per-instruction figure
is the slope between chains of 100 and 400 one-element adds, so it includes a trivial kernel.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from executorch.examples.models import MODELS
from executorch.runtime import _native, _python
from executorch.runtime._backend import Verification


def _export(model, inputs) -> bytes:
    from executorch.exir import to_edge_transform_and_lower

    return bytes(to_edge_transform_and_lower(torch.export.export(model, inputs)).to_executorch().buffer)


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
    x = torch.ones(1)
    costs = {}
    for n in (100, 400):
        method = _native.load_program(_export(_Chain(n), (x,)), Verification.InternalConsistency).load_method("forward")
        method.execute([x])
        costs[n] = _median_ms(lambda: method.execute([x]), repeat * 20)
    return (costs[400] - costs[100]) / 300 * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mobilenet_v2", choices=sorted(MODELS))
    ap.add_argument("--pte", help="run this .pte instead of exporting the model")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1, like the native runtime)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    model, inputs = MODELS[args.model]()
    if args.pte:
        with open(args.pte, "rb") as f:
            data, source = f.read(), args.pte
    else:
        start = time.perf_counter()
        data, source = _export(model, inputs), f"exported here in {time.perf_counter() - start:.1f}s"

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

    want = torch.utils._pytree.tree_leaves(eager())
    got = native.execute(list(inputs))
    err = max(float((g - w).abs().max()) for g, w in zip(got, want))

    print(f"model {args.model} ({source}), {len(data):,} bytes, torch threads {args.threads}")
    print(f"native program load {native_load_ms:.2f} ms, method load {native_method_ms:.2f} ms")
    for name, ts in times.items():
        print(f"{name:>7}: median {statistics.median(ts):8.2f} ms  min {min(ts):8.2f} ms  ({args.repeat} runs)")
    print(f"native vs eager max abs difference {err:.3g}")
    print(f"executor cost per instruction (incl. a 1-element add kernel): {_per_instruction_ns(args.repeat):.0f} ns")


if __name__ == "__main__":
    main()
