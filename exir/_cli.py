"""`python -m executorch.exir`: export a model to a `.pte` (and check it runs), or summarize a `.pte`."""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

_TOLERANCE = 1e-5  # both relative and absolute, as torch.allclose combines them

_EPILOG = """\
MODEL is a model-zoo name (e.g. mobilenet_v2; the zoo, executorch.examples.models, is in
the source tree but in no wheel) or FILE.py:FACTORY, where FACTORY() returns
(module, example_inputs_tuple). With --dynamic, the shapes come from the zoo, or for
FILE.py:FACTORY from a FACTORY_dynamic_shapes() function in the same file.
"""


class CliError(Exception):
    """A user-facing failure: printed as one line, then the process exits with `code`."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


@dataclass
class _ModelSource:
    label: str
    factory: Callable[[], Any]
    dynamic_shapes: Optional[Callable[[], Any]]


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line; returns the process exit code."""
    args = _parser().parse_args(argv)
    try:
        return args.run(args)
    except CliError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m executorch.exir", description="Export a model to a .pte (and check it runs), or summarize a .pte.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{export,inspect}")

    export = sub.add_parser(
        "export", help="export a model to a .pte and check it against eager",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    export.add_argument("model", metavar="MODEL", help="a zoo name or FILE.py:FACTORY")
    export.add_argument("-o", "--output", required=True, type=Path, help="the .pte file to write")
    export.add_argument("--method-name", default="forward", help="name of the method in the program (default: forward)")
    export.add_argument("--seed", type=int, default=0, help="torch seed set before calling the factory (default: 0); factories that seed "
                        "themselves, as the zoo's do, override it")
    export.add_argument("--dynamic", action="store_true", help="export with the model's declared dynamic shapes")
    export.add_argument("--no-verify", dest="verify", action="store_false",
                        help="skip running the .pte on executorch.runtime and comparing with eager")
    export.set_defaults(run=_run_export)

    inspect = sub.add_parser("inspect", help="print a summary of a .pte file")
    inspect.add_argument("pte", metavar="FILE.pte", type=Path)
    inspect.set_defaults(run=_run_inspect)
    return parser


def _run_inspect(args: argparse.Namespace) -> int:
    from executorch.exir._inspect import summarize
    from executorch.exir.error import SerializeError

    try:
        data = args.pte.read_bytes()
    except OSError as e:
        raise CliError(f"cannot read {args.pte}: {e.strerror or e}", 1) from None
    try:
        print(summarize(data, str(args.pte)))
    except SerializeError as e:
        raise CliError(f"{args.pte} is not a valid .pte file: {e}", 1) from None
    return 0


def _run_export(args: argparse.Namespace) -> int:
    import torch

    source = _resolve_model(args.model)
    torch.manual_seed(args.seed)
    model, inputs = _call_factory(source)
    dynamic_shapes = _dynamic_shapes(source) if args.dynamic else None

    timings: list[tuple[str, float]] = []
    clock = time.perf_counter()
    try:
        ep = torch.export.export(model, inputs, dynamic_shapes=dynamic_shapes)
    except Exception as e:  # torch.export's errors are long; the first line names the problem
        raise CliError(f"torch.export failed on {source.label}: {_first_line(e)}", 1) from None
    timings.append(("torch.export", time.perf_counter() - clock))

    from executorch.exir import to_edge_transform_and_lower
    from executorch.exir.error import ExportError

    clock = time.perf_counter()
    try:
        program = to_edge_transform_and_lower({args.method_name: ep}).to_executorch()
    except ExportError as e:
        raise CliError(f"lowering {source.label} failed: {e}", 1) from None
    except Exception as e:  # a bug in the exporter, not in the model: say so, in one line
        raise CliError(f"lowering {source.label} hit an exporter bug ({type(e).__name__}: {_first_line(e)}); "
                       "please report it with the model", 1) from None
    timings.append(("lower", time.perf_counter() - clock))

    clock = time.perf_counter()
    try:
        program.write_to_file(args.output)
    except OSError as e:
        raise CliError(f"cannot write {args.output}: {e.strerror or e}", 1) from None
    timings.append(("write", time.perf_counter() - clock))

    from executorch.exir._inspect import summarize

    print(summarize(args.output.read_bytes(), str(args.output)))
    failure = None
    if args.verify:
        clock = time.perf_counter()
        failure = _verify(args.output, args.method_name, model, inputs)
        timings.append(("verify", time.perf_counter() - clock))
    print("time: " + ", ".join(f"{name} {seconds:.2f}s" for name, seconds in timings))
    if failure:
        raise CliError(f"{args.output} was written but does not match eager: {failure}", 1)
    return 0


def _resolve_model(spec: str) -> _ModelSource:
    path, sep, name = spec.rpartition(":")
    if sep and path.endswith(".py"):
        return _load_from_file(Path(path), name, spec)
    if spec.endswith(".py") or sep:
        raise CliError(
            f"bad model {spec!r}: expected a zoo name or FILE.py:FACTORY (e.g. models.py:make_model)", 2
        )
    try:
        from executorch.examples.models import DYNAMIC_SHAPES, MODELS
    except ImportError:
        raise CliError(
            f"model {spec!r}: the model zoo (executorch.examples.models) is not installed (it lives in the "
            "source tree; the wheels ship without it): run from a source checkout or pass FILE.py:FACTORY", 2
        ) from None
    if spec not in MODELS:
        raise CliError(f"unknown model {spec!r}; available: {', '.join(sorted(MODELS))}, or FILE.py:FACTORY", 2)
    return _ModelSource(spec, MODELS[spec], DYNAMIC_SHAPES.get(spec))


def _load_from_file(path: Path, name: str, spec_text: str) -> _ModelSource:
    if not path.is_file():
        raise CliError(f"bad model {spec_text!r}: no file {path}", 2)
    if not name.isidentifier():
        raise CliError(f"bad model {spec_text!r}: {name!r} is not a function name; write FILE.py:FACTORY", 2)
    spec = importlib.util.spec_from_file_location(f"_exir_cli_model_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise CliError(f"bad model {spec_text!r}: cannot load {path} as a Python module", 2)
    module = importlib.util.module_from_spec(spec)
    # The factory's file may import its neighbours, as it would when run as a script.
    sys.path.insert(0, str(path.resolve().parent))
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        raise CliError(f"bad model {spec_text!r}: importing {path} failed: {_first_line(e)}", 2) from None
    factory = getattr(module, name, None)
    if not callable(factory):
        found = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_") and
                       getattr(v, "__module__", None) == module.__name__)
        raise CliError(f"bad model {spec_text!r}: {path} has no function {name!r}; it defines: "
                       f"{', '.join(found) or 'nothing callable'}", 2)
    return _ModelSource(spec_text, factory, getattr(module, f"{name}_dynamic_shapes", None))


def _call_factory(source: _ModelSource) -> tuple[Any, tuple]:
    import torch

    try:
        result = source.factory()
    except Exception as e:
        raise CliError(f"model factory {source.label} raised {type(e).__name__}: {_first_line(e)}", 2) from None
    if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], torch.nn.Module)
            and isinstance(result[1], (tuple, list))):
        raise CliError(
            f"model factory {source.label} returned {_shape_of(result)}; it must return "
            "(torch.nn.Module, tuple_of_example_inputs)", 2
        )
    return result[0], tuple(result[1])


def _dynamic_shapes(source: _ModelSource) -> Any:
    if source.dynamic_shapes is None:
        how = "for FILE.py:FACTORY, define FACTORY_dynamic_shapes() in the file" if ":" in source.label else \
            "the zoo declares none for it"
        raise CliError(f"--dynamic: {source.label} has no dynamic shapes ({how}); export without --dynamic", 2)
    return source.dynamic_shapes()


def _verify(path: Path, method_name: str, model: Any, inputs: tuple) -> Optional[str]:
    """Run the `.pte` on executorch.runtime and compare with eager; the mismatch, or None."""
    import torch
    from torch.utils._pytree import tree_flatten

    from executorch.runtime import Runtime

    with torch.no_grad():
        expected = tree_flatten(model(*inputs))[0]
    runtime = Runtime.get()
    try:
        actual = runtime.load_program(path).load_method(method_name).execute(list(inputs))
    except Exception as e:
        return f"the {runtime.backend} runtime failed: {_first_line(e)}"
    if len(actual) != len(expected):
        return f"it returns {len(actual)} outputs, eager returns {len(expected)}"
    worst = 0.0
    problems = []
    for i, (a, e) in enumerate(zip(actual, expected)):
        problem, diff = _compare(a, e)
        worst = max(worst, diff)
        if problem:
            problems.append(f"output {i}: {problem}")
    print(f"verify: {len(actual)} outputs on the {runtime.backend} runtime, max abs diff {worst:.3g} "
          f"(tolerance {_TOLERANCE:g} relative + absolute)")
    return "; ".join(problems) or None


def _compare(actual: Any, expected: Any) -> tuple[Optional[str], float]:
    import torch

    if not isinstance(expected, torch.Tensor):
        return (None if actual == expected else f"{actual!r} != eager {expected!r}"), 0.0
    if not isinstance(actual, torch.Tensor):
        return f"got {type(actual).__name__}, eager gives a tensor", 0.0
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return (f"{_describe(actual)} != eager {_describe(expected)}"), 0.0
    if not expected.dtype.is_floating_point:
        return (None if torch.equal(actual, expected) else "values differ"), 0.0
    diff = (actual - expected).abs()
    worst = float(diff.max()) if diff.numel() else 0.0
    if torch.allclose(actual, expected, rtol=_TOLERANCE, atol=_TOLERANCE, equal_nan=True):
        return None, worst
    return f"max abs diff {worst:.3g}", worst


def _describe(t: Any) -> str:
    return f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)}"


def _shape_of(result: Any) -> str:
    if isinstance(result, tuple):
        return f"a {len(result)}-tuple of ({', '.join(type(r).__name__ for r in result)})"
    return f"a {type(result).__name__}"


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
