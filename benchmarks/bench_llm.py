"""Prefill and decode speed of a ~100M-parameter Llama-style decoder with a static KV cache (fp32,
bf16, fp16): the native runtime against eager torch (1 thread and all threads) and the published
portable runtime.

    python benchmarks/bench_llm.py [--dtypes fp32,bf16] [--prompt 32] [--new 16] [--published $ET_REFERENCE_PYTHON]

The model is examples/models/llama_kv_cache.py at width 768, 8 layers, 12 query / 4 key-value heads,
SwiGLU width 2048, vocabulary 32000 (99M parameters), exported once with a dynamic prompt length.
Each engine runs one prefill over the prompt, then greedy decode steps; the figures are tokens/s
(prefill: prompt tokens / prefill time; decode: new tokens / decode time), best of --repeat rounds in
which eager and the native runtime (each at 1 thread and all threads) take turns.
Every engine's generated tokens are compared with eager's (in half precision a different
accumulation order may pick another token near a tie; the row says so). The published runtime
runs the same file in a separate process, one thread. Each dtype is a separate model and export,
measured one after another in the same run.
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "models"))
from llama_kv_cache import LlamaKVCache, make_llama_kv_cache_dynamic_shapes  # noqa: E402

from executorch.exir import to_edge  # noqa: E402
from executorch.runtime import Runtime  # noqa: E402

SIZES = dict(vocab=32000, dim=768, layers=8, heads=12, kv_heads=4, hidden=2048, max_seq=128)
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}

# Run on the published runtime: argv = pte, prompt (comma-separated), new tokens, repeat.
_PUBLISHED = r'''
import json, sys, time
import torch
torch.set_num_threads(1)
from executorch.runtime import Runtime
pte, prompt, new, repeat = sys.argv[1], [int(t) for t in sys.argv[2].split(",")], int(sys.argv[3]), int(sys.argv[4])
method = Runtime.get().load_program(pte).load_method("forward")
best = None
for _ in range(repeat):
    t0 = time.perf_counter()
    logits = method.execute([torch.tensor([prompt]), torch.arange(len(prompt))])[0]
    t1 = time.perf_counter()
    out = []
    for pos in range(len(prompt), len(prompt) + new):
        out.append(int(logits.argmax(-1)))
        logits = method.execute([torch.tensor([[out[-1]]]), torch.tensor([pos])])[0]
    t2 = time.perf_counter()
    run = (t1 - t0, t2 - t1, out)
    best = run if best is None else (min(best[0], run[0]), min(best[1], run[1]), out)
print(json.dumps({"prefill_s": best[0], "decode_s": best[1], "tokens": best[2]}))
'''


def _generate(step, prompt: list[int], new: int) -> tuple[float, float, list[int]]:
    """(prefill seconds, decode seconds for `new` steps, generated tokens) of one run."""
    t0 = time.perf_counter()
    logits = step([torch.tensor([prompt]), torch.arange(len(prompt))])
    t1 = time.perf_counter()
    tokens: list[int] = []
    for pos in range(len(prompt), len(prompt) + new):
        tokens.append(int(logits.argmax(-1)))
        logits = step([torch.tensor([[tokens[-1]]]), torch.tensor([pos])])
    return t1 - t0, time.perf_counter() - t1, tokens


def _interleaved(engines: dict, prompt: list[int], new: int, repeat: int) -> dict:
    """Best prefill and decode seconds per engine, the engines taking turns in every round so a
    change in machine load falls on all of them. `engines` maps a name to (setup, step)."""
    best: dict = {}
    for _ in range(repeat):
        for name, (setup, step) in engines.items():
            setup()
            p, d, tokens = _generate(step, prompt, new)
            old = best.get(name, (float("inf"), float("inf"), tokens))
            best[name] = (min(old[0], p), min(old[1], d), tokens)
    return best


def _row(name: str, prompt: int, new: int, prefill_s: float, decode_s: float) -> str:
    return f"{name:<44} prefill {prompt / prefill_s:8.1f} tok/s   decode {new / decode_s:7.2f} tok/s"


def _bench(args, dtype_name: str) -> None:
    torch.manual_seed(0)
    model = LlamaKVCache(**SIZES).eval().to(DTYPES[dtype_name])
    params = sum(p.numel() for p in model.parameters())
    prompt = torch.randint(0, SIZES["vocab"], (args.prompt,), generator=torch.Generator().manual_seed(1)).tolist()
    t = time.perf_counter()
    with torch.no_grad():
        ep = torch.export.export(copy.deepcopy(model), (torch.tensor([prompt]), torch.arange(args.prompt)),
                                 dynamic_shapes=make_llama_kv_cache_dynamic_shapes(SIZES["max_seq"]))
        data = to_edge(ep).to_executorch().buffer
    print(f"\nmodel: {params / 1e6:.1f}M parameters {dtype_name}, .pte {len(data) / 2**20:.0f} MiB, "
          f"export + lowering {time.perf_counter() - t:.1f} s; prompt {args.prompt} tokens, {args.new} decode steps")

    all_threads = torch.get_num_threads()
    method = Runtime.get().load_program(data).load_method("forward")
    engines = {}
    for threads in sorted({1, all_threads}):
        engines[f"eager torch, {threads} thread(s)"] = (lambda n=threads: torch.set_num_threads(n),
                                                        lambda a: model(*a))
        engines[f"native runtime (this project), {threads} thread(s)"] = (
            lambda n=threads: _native_threads(n), lambda a: method.execute(a)[0])  # noqa: F821  (`del method` runs after)
    with torch.no_grad():
        results = _interleaved(engines, prompt, args.new, args.repeat)
    torch.set_num_threads(all_threads)
    del method
    if args.published:
        with tempfile.TemporaryDirectory() as tmp:
            pte, script = Path(tmp) / "llama.pte", Path(tmp) / "run.py"
            pte.write_bytes(data)
            script.write_text(_PUBLISHED)
            proc = subprocess.run([args.published, str(script), str(pte), ",".join(map(str, prompt)), str(args.new),
                                   str(args.repeat)], capture_output=True, text=True)
            if proc.returncode == 0:
                r = json.loads(proc.stdout.strip().splitlines()[-1])
                results["published portable runtime, 1 thread"] = (r["prefill_s"], r["decode_s"], r["tokens"])
            else:
                print(f"published portable runtime: refused the {dtype_name} file: {proc.stderr.strip()[-300:]}")

    want = next(iter(results.values()))[2]
    for name, (prefill_s, decode_s, tokens) in results.items():
        same = "" if tokens == want else "   tokens differ from eager: " + _first_difference(tokens, want)
        print(_row(name, args.prompt, args.new, prefill_s, decode_s) + same)


def _native_threads(n: int) -> None:
    """Sizes the native runtime's thread pool, when this runtime is the native one."""
    try:
        from executorch.extension.pybindings import portable_lib
    except ImportError:
        return
    portable_lib._unsafe_reset_threadpool(n)


def _first_difference(got: list[int], want: list[int]) -> str:
    i = next(i for i, (g, w) in enumerate(zip(got, want)) if g != w)
    return f"from step {i} of {len(want)}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtypes", default="fp32", help="comma-separated, of fp32, bf16, fp16 (default fp32)")
    ap.add_argument("--prompt", type=int, default=32, help="prompt tokens (default 32)")
    ap.add_argument("--new", type=int, default=16, help="decode steps (default 16)")
    ap.add_argument("--repeat", type=int, default=2, help="runs per engine, best kept (default 2)")
    ap.add_argument("--published", metavar="PYTHON", help="python of an environment with the published ExecuTorch")
    args = ap.parse_args()
    dtypes = args.dtypes.split(",")
    unknown = [d for d in dtypes if d not in DTYPES]
    if unknown:
        ap.error(f"--dtypes: {unknown[0]!r} is not one of {', '.join(DTYPES)}")
    if Runtime.get().backend != "native":
        sys.exit("bench_llm: the native runtime is not built; run bash tools/run_tests.sh (or pip install .) first")
    for dtype_name in dtypes:
        _bench(args, dtype_name)


if __name__ == "__main__":
    main()
