"""Runs `.pte` files on the published ExecuTorch runtime, one request per line, in one long-lived process.

Run with the reference python (ET_REFERENCE_PYTHON), never imported by the project; test/conftest.py's
ReferenceRuntime starts one per test worker, so each run costs the run, not a Python start and the
published package's import (several seconds each).

Each stdin line is a JSON request {"pte", "inputs", "outputs", "method"} (paths; the inputs a list saved
with torch.save); the reply is one stdout line `@@reply {"ok": true}` or `@@reply {"ok": false, "error": ...}`
(a program the runtime refuses). Anything else on stdout is the runtime's own chatter. A crash ends the
process, which the caller reports as the runtime crashing on that file.
"""

import json
import sys

import torch
from executorch.runtime import Runtime

MARK = "@@reply "


def serve() -> None:
    runtime = Runtime.get()
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        try:
            inputs = list(torch.load(req["inputs"]))
            program = runtime.load_program(req["pte"])
            method = program.load_method(req["method"])
            if method is None:
                raise RuntimeError(f"no method {req['method']!r}; methods: {sorted(program.method_names)}")
            outputs = list(method.execute(inputs))
            torch.save(outputs, req["outputs"])
            reply = {"ok": True}
        except Exception as e:  # the runtime raises RuntimeError with a code; report it plainly
            reply = {"ok": False, "error": f"reference runtime refused {req['pte']}: {e}"}
        finally:
            method = program = None
        sys.stdout.write(MARK + json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    serve()
