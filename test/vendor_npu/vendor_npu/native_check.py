"""Export a model for the vendor backend and check what its C++ runner wrote, in two steps around the run.

    python -m vendor_npu.native_check export DIR     # DIR/npu.pte, DIR/in<i>.bin, DIR/expected.pt
    vendor_npu_runner DIR/npu.pte DIR/in0.bin ... --out DIR/out
    python -m vendor_npu.native_check compare DIR    # DIR/out<j>.bin against eager

Needs only torch and the executorch export path (the minimal wheel is enough).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from executorch.devtools.compare import compare_outputs
from executorch.exir import to_edge_transform_and_lower

from . import models
from .partitioner import VendorNpuPartitioner
from .preprocess import VendorNpuBackend  # noqa: F401  (lowering looks the backend up by name)


def export(directory: Path, factory=models.all_on_npu) -> list[Path]:
    """Lower the model to the vendor backend and write the program, its inputs and eager's outputs; return the
    input files."""
    model, inputs = factory()
    edge = to_edge_transform_and_lower(torch.export.export(model, inputs), partitioner=[VendorNpuPartitioner()])
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "npu.pte").write_bytes(edge.to_executorch().buffer)
    files = []
    for i, x in enumerate(inputs):
        files.append(directory / f"in{i}.bin")
        files[-1].write_bytes(bytes(x.contiguous().untyped_storage()))
    with torch.no_grad():
        want = model(*inputs)
    torch.save(list(want) if isinstance(want, tuple) else [want], directory / "expected.pt")
    return files


def read_outputs(directory: Path) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """The runner's outputs (shaped like eager's) and eager's."""
    want = torch.load(directory / "expected.pt")
    got = [torch.frombuffer(bytearray((directory / f"out{j}.bin").read_bytes()), dtype=torch.float32).reshape(w.shape)
           for j, w in enumerate(want)]
    return got, want


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vendor_npu.native_check")
    parser.add_argument("step", choices=("export", "compare"))
    parser.add_argument("directory", type=Path)
    args = parser.parse_args(argv)
    if args.step == "export":
        print(" ".join(str(f) for f in export(args.directory)))
        return 0
    got, want = read_outputs(args.directory)
    verdict = compare_outputs(got, want)
    print(f"vendor_npu native run vs eager: {verdict}")
    # The gate must be able to fail: a 0.1% error in one output is caught.
    assert not compare_outputs([got[0] * 1.001, *got[1:]], want).ok, "the comparison accepts a wrong answer"
    return 0 if verdict.ok else 1


if __name__ == "__main__":
    sys.exit(main())
