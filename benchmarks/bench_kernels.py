"""Compare the portable kernels' speed with torch (one thread): MobileNetV2's convolutions, GEMM, softmax, layer norm, GELU, attention.

Runs the C++ benchmark (bench_kernels, built with -DEXECUTORCH_BUILD_KERNEL_BENCHMARKS=ON or
EXECUTORCH_BUILD_TESTS=ON), times the same shapes with torch, and prints both side by side:

    EXECUTORCH_NUM_THREADS=1 python benchmarks/bench_kernels.py BUILD_DIR/kernels/cpu/bench_kernels [--gemm | --resnet50]

--gemm times GEMMs at ViT-small's, an encoder's and ResNet-50's layer shapes (gemmbt_: B stored
transposed, as nn.Linear's weight); --resnet50 times each distinct ResNet-50 convolution.
"""  # noqa: E501  (--help prints this docstring verbatim: its lines stay as they are)

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time

import torch
import torch.nn.functional as F


def _best_ms(fn, rounds: int = 5, min_ms: float = 50.0) -> float:
    fn()
    best = float("inf")
    for _ in range(rounds):
        calls, start = 0, time.perf_counter()
        while True:
            fn()
            calls += 1
            elapsed = (time.perf_counter() - start) * 1e3
            if elapsed >= min_ms:
                break
        best = min(best, elapsed / calls)
    return best


def _torch_case(name: str):
    """A zero-argument torch call doing what the C++ case `name` does."""
    if name.startswith("gemm_"):
        m, n, k = (int(v) for v in re.findall(r"\d+", name))
        a, b = torch.randn(m, k), torch.randn(k, n)
        return lambda: torch.mm(a, b)
    if name.startswith("gemmbt_"):
        m, n, k = (int(v) for v in re.findall(r"\d+", name))
        a, w = torch.randn(m, k), torch.randn(n, k)
        return lambda: torch.mm(a, w.t())
    match = re.match(r"r50_(\d+)to(\d+)_k(\d+)s(\d+)_(\d+)_x\d+$", name)
    if match:
        cin, cout, k, stride, hw = (int(v) for v in match.groups())
        x, w, b = torch.randn(1, cin, hw, hw), torch.randn(cout, cin, k, k), torch.randn(cout)
        return lambda: F.conv2d(x, w, b, stride, (k - 1) // 2)
    match = re.match(r"(attention|attention_causal)_(\d+)x(\d+)x(\d+)x(\d+)$", name)
    if match:
        q, k, v = (torch.randn(*(int(match.group(i)) for i in range(2, 6))) for _ in range(3))
        causal = match.group(1) == "attention_causal"
        return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    match = re.match(r"(log_softmax|softmax|layer_norm|gelu_tanh|gelu)_(\d+)x(\d+)$", name)
    if match:
        kind, rows, cols = match.group(1), int(match.group(2)), int(match.group(3))
        x = torch.randn(rows, cols)
        if kind == "softmax":
            return lambda: torch.softmax(x, -1)
        if kind == "log_softmax":
            return lambda: torch.log_softmax(x, -1)
        if kind == "layer_norm":
            w, b = torch.randn(cols), torch.randn(cols)
            return lambda: F.layer_norm(x, (cols,), w, b, 1e-6)
        return lambda: F.gelu(x, approximate="tanh" if kind == "gelu_tanh" else "none")
    match = re.match(r"mv2_(stem_3x3s2_3to32|pw_(\d+)to(\d+)|dw3x3s(\d)_(\d+))_(\d+)$", name)
    if not match:
        return None
    hw = int(match.group(6))
    if match.group(1).startswith("stem"):
        cin, cout, k, stride, groups = 3, 32, 3, 2, 1
    elif match.group(2):
        cin, cout, k, stride, groups = int(match.group(2)), int(match.group(3)), 1, 1, 1
    else:
        cin = cout = groups = int(match.group(5))
        k, stride = 3, int(match.group(4))
    x = torch.randn(1, cin, hw, hw)
    w = torch.randn(cout, cin // groups, k, k)
    b = torch.randn(cout)
    return lambda: F.conv2d(x, w, b, stride, (k - 1) // 2, 1, groups)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bench_binary", help="path to the built bench_kernels executable")
    ap.add_argument("--gemm", action="store_true", help="GEMMs at ViT-small's, an encoder's and ResNet-50's shapes")
    ap.add_argument("--resnet50", action="store_true", help="ResNet-50's convolutions")
    args = ap.parse_args()
    torch.set_num_threads(1)
    section = ["--gemm"] if args.gemm else ["--resnet50"] if args.resnet50 else []
    try:
        lines = subprocess.run([args.bench_binary, *section], check=True, capture_output=True,
                               text=True).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"bench_kernels: cannot run {args.bench_binary}: {e}; "
              f"build it with -DEXECUTORCH_BUILD_KERNEL_BENCHMARKS=ON")
        return 2
    print(f"{'case':34} {'ours ms':>9} {'GFLOP/s':>8} {'torch ms':>9} {'GFLOP/s':>8} {'ours/torch':>10}")
    ours_total = torch_total = 0.0
    with torch.no_grad():
        for line in lines:
            name, ms, gflops = line.split()
            ms, gflops = float(ms), float(gflops)
            if name.endswith("_all_convolutions"):
                continue
            fn = _torch_case(name)
            if fn is None:
                continue
            tms = _best_ms(fn)
            tflops = gflops * ms / tms
            if name.startswith(("mv2_", "r50_")):
                count = int(name.rsplit("_x", 1)[1]) if name.startswith("r50_") else 1
                ours_total += count * ms
                torch_total += count * tms
            print(f"{name:34} {ms:9.3f} {gflops:8.1f} {tms:9.3f} {tflops:8.1f} {ms / tms:10.2f}")
    if torch_total:
        label = "r50 convolutions, total" if args.resnet50 else "mv2 convolutions, total"
        print(f"{label:34} {ours_total:9.3f} {'':8} {torch_total:9.3f} {'':8} {ours_total / torch_total:10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
