"""The portable int8 recipe against fp32 on MobileNetV2: file size, export time, native run time.

    python benchmarks/bench_quantized.py [--runs 10]

Both files come from `executorch.export.export` in the same run (fp32: `ExportRecipe()`; int8:
`PortableRecipeType.INT8`, calibrated on 4 samples). Run time is the median of --runs executions
on the native runtime (one thread) after a warm-up. The int8 program runs quantize/dequantize
kernels around float convolutions (no fused int8 kernels), so it is expected to be slower.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from _zoo import load_models  # this script's folder is on sys.path


def _median_ms(session, inputs, runs: int) -> float:
    from executorch.runtime import Runtime, Verification

    method = Runtime.get().load_program(session.get_pte_buffer(), verification=Verification.Minimal) \
        .load_method("forward")
    method.execute(list(inputs))
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        method.execute(list(inputs))
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    os.environ.setdefault("EXECUTORCH_RUNTIME", "native")
    torch.set_num_threads(1)
    from executorch.export import ExportRecipe, export
    from executorch.export.portable_recipes import PortableRecipeType
    from executorch.runtime import Runtime

    model, inputs = load_models()["mobilenet_v2"]()
    g = torch.Generator().manual_seed(1)
    samples = [inputs] + [(torch.randn(inputs[0].shape, generator=g),) for _ in range(3)]
    rows = []
    for label, recipe, data in (("fp32", ExportRecipe(), [inputs]),
                                ("int8", ExportRecipe.get_recipe(PortableRecipeType.INT8), samples)):
        t0 = time.perf_counter()
        session = export(model, data, recipe)
        seconds = time.perf_counter() - t0
        rows.append((label, len(session.get_pte_buffer()), seconds, _median_ms(session, inputs, args.runs)))
    print(f"MobileNetV2, {Runtime.get().backend} runtime, 1 thread, median of {args.runs}")
    for label, size, seconds, ms in rows:
        print(f"{label}: {size:>10,} bytes ({size / rows[0][1]:.3f}x)  export {seconds:6.1f} s  run {ms:7.2f} ms "
              f"({ms / rows[0][3]:.2f}x)")


if __name__ == "__main__":
    main()
