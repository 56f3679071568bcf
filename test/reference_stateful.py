"""Stateful programs on the published ExecuTorch exporter and runtime, in one process.

Run with the reference python (ET_REFERENCE_PYTHON), never imported by the project:
    python reference_stateful.py DIR NAME [NAME ...]
For each NAME: when DIR/NAME.pt2 (a `torch.export.save`d ExportedProgram) exists, the published
exporter lowers it to DIR/NAME.published.pte (when DIR/NAME@METHOD.pt2 files exist instead, it
lowers them as the methods of one program with share_mutable_buffers=True); when DIR/NAME.pte and
DIR/NAME.calls.pt (a list of (method name, list of inputs)) exist, every call runs on one loaded program,
each method loaded once so state carries over between calls, and DIR/NAME.out.pt gets each call's outputs.
A failed export goes to DIR/NAME.published.err.txt, a failed run to DIR/NAME.err.txt.
"""

import sys
from pathlib import Path

import torch
import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401  (llama::* kernels, for files that call them)
import executorch.kernels.quantized  # noqa: F401  (quantized_decomposed::* kernels: quantized embeddings)
from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
from executorch.exir.passes import MemoryPlanningPass
from executorch.runtime import Runtime

root = Path(sys.argv[1])
runtime = Runtime.get()
for name in sys.argv[2:]:
    print(name, flush=True)
    methods = {p.stem.split("@", 1)[1]: p for p in root.glob(f"{name}@*.pt2")}
    if (root / f"{name}.pt2").exists() or methods:
        try:
            with torch.no_grad():  # the loaded parameters require grad; lowering runs the graph in place
                if methods:
                    shared = ExecutorchBackendConfig(
                        memory_planning_pass=MemoryPlanningPass(share_mutable_buffers=True))
                    eps = {m: torch.export.load(p) for m, p in methods.items()}
                    program = to_edge_transform_and_lower(eps).to_executorch(shared)
                else:
                    program = to_edge_transform_and_lower(torch.export.load(root / f"{name}.pt2")).to_executorch()
            (root / f"{name}.published.pte").write_bytes(program.buffer)
        except Exception as e:
            (root / f"{name}.published.err.txt").write_text(f"{type(e).__name__}: {e}")
    if (root / f"{name}.calls.pt").exists():
        try:
            loaded = runtime.load_program(root / f"{name}.pte")
            methods, results = {}, []
            for method, inputs in torch.load(root / f"{name}.calls.pt"):
                if method not in methods:
                    methods[method] = loaded.load_method(method)
                results.append(list(methods[method].execute(list(inputs))))
            torch.save(results, root / f"{name}.out.pt")
        except Exception as e:  # the runtime raises RuntimeError with its error code
            (root / f"{name}.err.txt").write_text(f"{type(e).__name__}: {e}")
