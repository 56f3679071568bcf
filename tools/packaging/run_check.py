"""Run a .pte on the `executorch.runtime` this Python imports and compare it with eager PyTorch.

  python tools/packaging/run_check.py FILE.py:FACTORY MODEL.pte

FACTORY() returns (module, example_inputs). Exits 1 when the outputs fail executorch.devtools.compare's
check (tolerances scaled to eager's outputs; integers exact; counts, shapes and dtypes equal).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import warnings
from pathlib import Path

# torch warns at import when NumPy is absent; nothing here needs it.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
import torch  # noqa: E402

# The comparison is loaded from this source tree by path: under the published runtime's Python,
# `executorch` is the published package, which has no such module.
_COMPARE = Path(__file__).resolve().parents[2] / "devtools" / "compare.py"


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("factory")
    parser.add_argument("pte", type=Path)
    args = parser.parse_args(argv)

    from executorch.runtime import Runtime

    path, _, name = args.factory.rpartition(":")
    model, inputs = getattr(_load(Path(path), Path(path).stem), name)()
    with torch.no_grad():
        expected = model(*inputs)
    runtime = Runtime.get()
    backend = getattr(runtime, "backend", "runtime")
    try:
        outputs = runtime.load_program(args.pte).load_method("forward").execute(list(inputs))
    except Exception as err:  # any runtime failure is the finding; report it in one line
        print(f"FAIL: {args.pte.name} on {backend}: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    result = _load(_COMPARE, "_run_check_compare").compare_outputs(outputs, expected)
    where = list(sys.modules["executorch"].__path__)[0]
    print(f"{args.pte.name} on {backend} ({where}): {result}")
    if not result.ok:
        print(f"FAIL: {args.pte.name} does not match eager PyTorch", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
