"""Delegation benchmarks: the cost of one DelegateCall on the native runtime, and MobileNetV2
export time with a partitioner against without, in the same run.

    python benchmarks/bench_delegation.py [--repeat 2000] [--runs 5]

Call overhead: a chain of K `relu(x + c)` steps on 16 floats, run (a) all on portable kernels
and (b) with every add delegated to ExecutorBackend (K partitions, relu between them); the
per-call figure is (b - a) / K. ExecutorBackend copies inputs into its nested method, runs it
and copies the result out, so this is an upper bound on what the runtime's dispatch costs.
Export: to_edge_transform_and_lower + to_executorch + .buffer on MobileNetV2, median of --runs
after a warm-up, without a partitioner and with ExecutorBackendPartitioner (one partition
holding every op).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from _zoo import load_models  # this script's folder is on sys.path

K = 32


class Chain(torch.nn.Module):
    def forward(self, x):
        for i in range(K):
            x = torch.relu(x + float(i) * 0.01)
        return x


def _median_us(fn, repeat: int) -> float:
    fn()
    samples = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(repeat):
            fn()
        samples.append((time.perf_counter() - t0) / repeat * 1e6)
    return statistics.median(samples)


def call_overhead(repeat: int) -> dict:
    from executorch.exir import to_edge_transform_and_lower
    from executorch.exir.backend.test.demos.rpc.executor_backend_partitioner import ExecutorBackendPartitioner
    from executorch.runtime import Runtime

    runtime = Runtime.get()
    x = torch.randn(16)
    ep = torch.export.export(Chain(), (x,))
    plain = to_edge_transform_and_lower(ep).to_executorch().buffer
    part = ExecutorBackendPartitioner([torch.ops.aten.add.Tensor])
    delegated = to_edge_transform_and_lower(ep, partitioner=[part]).to_executorch().buffer
    a = runtime.load_program(plain).load_method("forward")
    b = runtime.load_program(delegated).load_method("forward")
    ta, tb = _median_us(lambda: a.execute([x]), repeat), _median_us(lambda: b.execute([x]), repeat)
    return {"engine": runtime.backend, "portable_us": ta, "delegated_us": tb, "per_call_us": (tb - ta) / K}


def export_times(runs: int) -> dict:
    from executorch.exir import to_edge_transform_and_lower
    from executorch.exir.backend.test.demos.rpc.executor_backend_partitioner import ExecutorBackendPartitioner

    model, inputs = load_models()["mobilenet_v2"]()
    ep = torch.export.export(model, inputs)
    out = {}
    for name, partitioner in (("without", None), ("with", [ExecutorBackendPartitioner()])):
        times = []
        for i in range(runs + 1):
            t0 = time.perf_counter()
            to_edge_transform_and_lower(ep, partitioner=partitioner).to_executorch().buffer
            if i:
                times.append(time.perf_counter() - t0)
        out[name] = statistics.median(times)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    c = call_overhead(args.repeat)
    print(f"call overhead ({c['engine']} runtime, {K} steps on 16 floats): portable {c['portable_us']:.1f} us, "
          f"delegated {c['delegated_us']:.1f} us -> {c['per_call_us']:.2f} us per DelegateCall (ExecutorBackend)")
    e = export_times(args.runs)
    print(f"MobileNetV2 export: without a partitioner {e['without']:.2f} s, with ExecutorBackendPartitioner "
          f"{e['with']:.2f} s ({e['with'] / e['without']:.2f}x)")


if __name__ == "__main__":
    main()
