"""Run a .pte on the `executorch.runtime` this Python imports and compare it with eager PyTorch.

  python tools/packaging/run_check.py FILE.py:FACTORY MODEL.pte [--atol 1e-3]

FACTORY() returns (module, example_inputs). Exits 1 when outputs differ beyond the tolerance.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import torch


def _factory(spec: str):
    path, _, name = spec.rpartition(":")
    module_spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return getattr(module, name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("factory")
    parser.add_argument("pte", type=Path)
    parser.add_argument("--atol", type=float, default=1e-3)
    args = parser.parse_args(argv)

    from executorch.runtime import Runtime

    model, inputs = _factory(args.factory)()
    with torch.no_grad():
        expected = model(*inputs)
    expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    runtime = Runtime.get()
    try:
        outputs = runtime.load_program(args.pte).load_method("forward").execute(list(inputs))
    except Exception as err:  # any runtime failure is the finding; report it in one line
        print(f"FAIL: {args.pte.name} on {getattr(runtime, 'backend', 'runtime')}: {type(err).__name__}: {err}",
              file=sys.stderr)
        return 1
    worst = max((float((got - want).abs().max()) for got, want in zip(outputs, expected)), default=0.0)
    backend = getattr(runtime, "backend", "runtime")
    where = list(sys.modules["executorch"].__path__)[0]
    print(f"{args.pte.name} on {backend} ({where}): {len(outputs)} output(s), max |diff| vs eager = {worst:.3g}")
    if len(outputs) != len(expected) or worst > args.atol:
        print(f"FAIL: outputs differ from eager PyTorch (tolerance {args.atol})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
