"""Runs many `.pte` files on the published ExecuTorch runtime in one process.

Run with the reference python (ET_REFERENCE_PYTHON), never imported by the project:
    python reference_runner.py DIR [NAME ...]
For each DIR/NAME.pte (all of them when no NAME is given) with inputs DIR/NAME.in.pt (a list saved with
torch.save) it writes DIR/NAME.out.pt, or DIR/NAME.err.txt with the runtime's reason when the runtime refuses.
It prints each NAME before running it, so a caller can tell which file made the runtime abort the process.
"""

import sys
from pathlib import Path

import executorch.kernels.quantized  # noqa: F401  (the q/dq and choose_qparams kernels, as a user of quantized files loads them)
import torch
import executorch.runtime
from executorch.runtime import Runtime

if Path(sys.prefix).resolve() not in Path(executorch.runtime.__file__).resolve().parents:
    sys.exit(f"the reference Python imports an executorch from outside its own environment "
             f"({executorch.runtime.__file__}), "
             "not the published one; run it without PYTHONPATH pointing at a project")

runtime = Runtime.get()
root = Path(sys.argv[1])
names = sys.argv[2:] or sorted(p.name[: -len(".pte")] for p in root.glob("*.pte"))
for name in names:
    pte = root / (name + ".pte")
    print(name, flush=True)
    try:
        inputs = list(torch.load(pte.with_name(name + ".in.pt")))
        method = runtime.load_program(pte).load_method("forward")
        if method is None:
            raise RuntimeError("no method 'forward'")
        torch.save(list(method.execute(inputs)), pte.with_name(name + ".out.pt"))
    except Exception as e:  # the runtime raises RuntimeError with its error code
        pte.with_name(name + ".err.txt").write_text(f"{type(e).__name__}: {e}")
