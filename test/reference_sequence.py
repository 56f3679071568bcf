"""Runs a sequence of calls on one loaded `.pte` on the published ExecuTorch runtime, so state carries over.

Run with the reference python (ET_REFERENCE_PYTHON), never imported by the project:
    python reference_sequence.py PROGRAM.pte CALLS.pt OUT.pt
CALLS.pt holds a list of (method name, list of inputs) saved with torch.save; each method is
loaded once and every call runs on that loaded method. OUT.pt gets the list of each call's outputs.
A program or call the runtime refuses exits 3 with its reason on stderr.
"""

import sys

import torch
from executorch.runtime import Runtime

pte, calls_path, out_path = sys.argv[1:4]
try:
    program = Runtime.get().load_program(pte)
    methods, results = {}, []
    for name, inputs in torch.load(calls_path):
        if name not in methods:
            methods[name] = program.load_method(name)
            if methods[name] is None:
                raise RuntimeError(f"no method {name!r}")
        results.append(list(methods[name].execute(list(inputs))))
except Exception as e:  # the runtime raises RuntimeError with its error code
    print(f"reference runtime refused {pte}: {type(e).__name__}: {e}", file=sys.stderr)
    sys.exit(3)
torch.save(results, out_path)
