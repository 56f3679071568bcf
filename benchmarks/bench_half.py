"""Times the Llama-style zoo decoder in float32, bfloat16 and float16 on the native runtime against eager torch.

    python benchmarks/bench_half.py [--repeat N] [--dim D --layers L --hidden H --vocab V --seq S]

Without size options the zoo's `llama_decoder` (width 64, 2 layers) runs as is; with them a wider
decoder of the same code is built (seed 0). Each dtype's file is exported with this package's
exporter; native runs and eager runs (one thread, same dtype) are interleaved so machine load
affects them alike. Prints per dtype: the `.pte` size, median and min milliseconds per forward
call, the ratio to the float32 file, and the largest error against eager in that dtype.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from _zoo import export_bytes, load_models  # noqa: E402  (this script's folder is on sys.path)
from executorch.devtools.compare import compare_outputs
from executorch.runtime import _native
from executorch.runtime._backend import Verification

MODELS = load_models()

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _decoder(args) -> tuple[torch.nn.Module, tuple[torch.Tensor]]:
    model, inputs = MODELS["llama_decoder"]()
    if args.dim is None:
        return model, inputs
    torch.manual_seed(0)
    model = type(model)(vocab=args.vocab, dim=args.dim, layers=args.layers, heads=args.heads,
                        kv_heads=args.kv_heads, hidden=args.hidden, max_seq=args.seq).eval()
    return model, (torch.randint(0, args.vocab, (1, args.seq)),)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--dim", type=int)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--hidden", type=int, default=1376)
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--seq", type=int, default=32)
    args = p.parse_args()
    torch.set_num_threads(1)

    base, inputs = _decoder(args)
    params = sum(t.numel() for t in base.parameters())
    shape = ("zoo llama_decoder" if args.dim is None
             else f"dim {args.dim}, {args.layers} layers, hidden {args.hidden}, vocab {args.vocab}")
    print(f"decoder: {shape}; {params:,} parameters; input {tuple(inputs[0].shape)}; {args.repeat} runs, 1 thread")

    runs = {}
    for name, dtype in DTYPES.items():
        model = base.to(dtype)
        data = export_bytes(model, inputs)
        method = _native.load_program(data, Verification.InternalConsistency).load_method("forward")
        with torch.no_grad():
            expected = model(*inputs)
        check = compare_outputs(method.execute(list(inputs)), expected)
        runs[name] = (model, method, len(data), check, [], [])

    for _ in range(args.repeat):
        for name, (model, method, _, _, native_ms, eager_ms) in runs.items():
            start = time.perf_counter()
            method.execute(list(inputs))
            native_ms.append((time.perf_counter() - start) * 1e3)
            start = time.perf_counter()
            with torch.no_grad():
                model(*inputs)
            eager_ms.append((time.perf_counter() - start) * 1e3)

    fp32 = statistics.median(runs["float32"][4])
    print(f"{'dtype':<9} {'.pte bytes':>12} {'native median':>14} {'min':>8} {'vs float32':>10} "
          f"{'eager median':>13} {'native/eager':>12}  vs eager")
    for name, (_, _, size, check, native_ms, eager_ms) in runs.items():
        med, eager = statistics.median(native_ms), statistics.median(eager_ms)
        print(f"{name:<9} {size:>12,} {med:>11.2f} ms {min(native_ms):>5.2f} ms {med / fp32:>9.2f}x "
              f"{eager:>10.2f} ms {med / eager:>11.2f}x  {'OK' if check.ok else 'FAIL'} ({check})")


if __name__ == "__main__":
    main()
