"""Times the `.pte` serializer and deserializer and prints the figures.

    python benchmarks/bench_serialize.py [MODEL.pte] [--repeat N]

With a file (e.g. a MobileNetV2 .pte from the published exporter) it reads the file, writes it
back and checks the bytes are identical; without one it uses a synthetic program of
MobileNetV2's shape (1603 values, 153 instructions, 82 constant buffers, 14 MB of weights).
With a file and ET_REFERENCE_PYTHON set, the published 1.5.1 serializer is timed on the same
file for comparison.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import statistics
import time

from executorch.exir import schema as s
from executorch.exir._serialize import deserialize_pte_binary, serialize_pte_binary, serialize_pte_chunks
from executorch.exir._serialize._flatbuffer_writer import write_flatbuffer


def _synthetic() -> s.Program:
    def tensor(sizes, buffer_idx=0, alloc=None):
        return s.EValue(s.Tensor(s.ScalarType.FLOAT, 0, sizes, list(range(len(sizes))), False, buffer_idx, alloc))

    values, constants = [], [s.Buffer(b"")]
    for _ in range(81):
        values.append(tensor([1, 42_950], len(constants)))
        constants.append(s.Buffer(bytes(171_800)))
    while len(values) < 1603:
        k = len(values) % 4
        if k == 0:
            values.append(tensor([1, 32, 112, 112], alloc=s.AllocationDetails(1, 64 * len(values))))
        elif k == 1:
            values.append(s.EValue(s.IntList([1, 1])))
        elif k == 2:
            values.append(s.EValue(s.Int(1)))
        else:
            values.append(s.EValue(s.Bool(False)))
    instructions = [s.Instruction(s.KernelCall(i % 7, list(range(i, i + 11)))) for i in range(153)]
    plan = s.ExecutionPlan(
        "forward", s.ContainerMetadata("[1]", "[1]"), values, [100], [1600],
        [s.Chain([100], [1600], instructions)], [s.Operator(f"aten::op{i}", "out") for i in range(7)], [],
        [0, 9_936_896],
    )
    return s.Program(0, [plan], constants, [], [], s.SubsegmentOffsets(0, []))


# Runs in the published package's python: times its reader and writer on the same file.
_PUBLISHED = """
import statistics, sys, time
from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary
data = open(sys.argv[1], "rb").read()
reads, writes = [], []
for _ in range(int(sys.argv[2])):
    t = time.perf_counter(); pte = deserialize_pte_binary(data); reads.append(time.perf_counter() - t)
    t = time.perf_counter(); bytes(serialize_pte_binary(pte)); writes.append(time.perf_counter() - t)
for name, times in (("deserialize_pte_binary", reads), ("serialize_pte_binary", writes)):
    print(f"{'published ' + name:<36}{min(times) * 1e3:>10.2f}{statistics.median(times) * 1e3:>12.2f}")
"""


def _time(fn, repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times) * 1e3, statistics.median(times) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pte", nargs="?")
    ap.add_argument("--repeat", type=int, default=20)
    a = ap.parse_args()
    if a.pte:
        with open(a.pte, "rb") as f:
            data = f.read()
        program = deserialize_pte_binary(data).program
        source = a.pte
    else:
        program = _synthetic()
        data = serialize_pte_binary(program)
        source = "synthetic MobileNetV2-shaped program"
    plan = program.execution_plan[0]
    print(f"{source}: {len(data):,} bytes, {len(plan.values)} values, "
          f"{sum(len(c.instructions) for c in plan.chains)} instructions, "
          f"{len(program.constant_buffer)} constant buffers")
    identical = serialize_pte_binary(program) == data
    print(f"read then write gives identical bytes: {identical}")
    without_constants = dataclasses.replace(program, constant_buffer=[])
    rows = [
        ("deserialize_pte_binary", lambda: deserialize_pte_binary(data)),
        ("write_flatbuffer only", lambda: write_flatbuffer(
            without_constants, tensor_alignment=16, delegate_alignment=16)),
        ("serialize_pte_chunks", lambda: serialize_pte_chunks(program)),
        ("serialize_pte_binary", lambda: serialize_pte_binary(program)),
    ]
    print(f"{'step':<36}{'min ms':>10}{'median ms':>12}   ({a.repeat} runs)")
    for name, fn in rows:
        best, median = _time(fn, a.repeat)
        print(f"{name:<36}{best:>10.2f}{median:>12.2f}")
    reference = os.environ.get("ET_REFERENCE_PYTHON")
    if a.pte and reference:
        runs = str(max(1, a.repeat // 4))
        proc = subprocess.run([reference, "-c", _PUBLISHED, a.pte, runs], capture_output=True, text=True)
        print(proc.stdout.rstrip() if proc.returncode == 0 else f"published timing failed: {proc.stderr[-500:]}")
    if not identical:
        raise SystemExit("the rewritten bytes differ from the input")


if __name__ == "__main__":
    main()
