"""`export`: load a model, export it to a `.pte`, print its summary, and check it against eager."""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from executorch.cli.errors import CliError


@dataclass
class ModelSource:
    label: str
    factory: Callable[[], Any]
    dynamic_shapes: Optional[Callable[[], Any]]


def run_export(args: argparse.Namespace) -> int:
    """Export, summarize, verify; prints an OK or FAIL verdict line and returns the exit code."""
    import torch

    source = resolve_model(args.model)
    torch.manual_seed(args.seed)
    model, inputs = call_factory(source)
    dynamic_shapes = declared_dynamic_shapes(source) if args.dynamic else None

    timings: list[tuple[str, float]] = []
    clock = time.perf_counter()
    try:
        ep = torch.export.export(model, inputs, dynamic_shapes=dynamic_shapes)
    except Exception as e:  # torch.export's errors are long; the first line names the problem
        raise CliError(f"torch.export failed on {source.label}: {first_line(e)}", 1) from None
    timings.append(("torch.export", time.perf_counter() - clock))

    from executorch.exir import to_edge_transform_and_lower
    from executorch.exir.error import ExportError

    clock = time.perf_counter()
    try:
        program = to_edge_transform_and_lower({args.method_name: ep},
                                              partitioner=_partitioners(getattr(args, "backend", "portable")),
                                              ).to_executorch()
    except ExportError as e:
        raise CliError(f"lowering {source.label} failed: {e}", 1) from None
    except Exception as e:  # a bug in the exporter, not in the model: say so, in one line
        raise CliError(f"lowering {source.label} hit an exporter bug ({type(e).__name__}: {first_line(e)}); "
                       "please report it with the model", 1) from None
    timings.append(("lower", time.perf_counter() - clock))

    clock = time.perf_counter()
    try:
        program.write_to_file(args.output)
    except OSError as e:
        raise CliError(f"cannot write {args.output}: {e.strerror or e}", 1) from None
    if args.bundled is not None:
        _write_bundled(program, args.bundled, args.method_name, model, inputs)
    timings.append(("write", time.perf_counter() - clock))

    from executorch.cli.summary import summarize

    data = args.output.read_bytes()
    print(summarize(data, str(args.output)))
    size = f"{args.output} ({_size(len(data))})"
    verdict = None
    if args.verify:
        clock = time.perf_counter()
        verdict = _verify(args.output, args.method_name, model, inputs)
        timings.append(("verify", time.perf_counter() - clock))
    print("time: " + ", ".join(f"{name} {seconds:.2f}s" for name, seconds in timings))
    if verdict is None:
        print(f"wrote {size}; not checked against eager (--no-verify)")
        return 0
    ok, detail = verdict
    if ok is None:
        print(f"wrote {size}; not checked against eager: {detail}")
        return 0
    if not ok:
        print(f"FAIL: {size} was written but does not match eager ({detail})", file=sys.stderr)
        return 1
    print(f"OK: {size} matches eager ({detail})")
    return 0


def _partitioners(backend: str) -> Optional[list]:
    """The partitioners `--backend` names (None: portable kernels only)."""
    if backend == "portable":
        return None
    if backend == "xnnpack":
        from executorch.backends.xnnpack import XnnpackPartitioner

        return [XnnpackPartitioner()]
    raise CliError(f"--backend {backend!r} is not one of portable, xnnpack", 2)


def _verify(path: Path, method_name: str, model: Any, inputs: tuple) -> tuple[Optional[bool], str]:
    """Run the `.pte` on executorch.runtime and compare with eager: (matches, what was measured)."""
    import torch

    from executorch.devtools.compare import compare_outputs
    from executorch.runtime import Runtime

    with torch.no_grad():
        expected = model(*inputs)
    runtime = Runtime.get()
    ids = _delegate_ids(path)
    missing = sorted(ids - set(runtime.backend_registry.registered_backend_names)) if ids else []
    if missing:
        return None, f"the {runtime.backend} runtime has no {', '.join(missing)}; run the file where it is registered"
    try:
        actual = runtime.load_program(path).load_method(method_name).execute(list(inputs))
    except Exception as e:
        return False, f"the {runtime.backend} runtime failed: {first_line(e)}"
    result = compare_outputs(actual, expected)
    return result.ok, f"{result} on the {runtime.backend} runtime"


def _delegate_ids(path: Path) -> set:
    from executorch.exir._serialize import read_program

    program = read_program(path.read_bytes())
    return {d.id for plan in program.execution_plan for d in plan.delegates}


def _write_bundled(program: Any, path: Path, method_name: str, model: Any, inputs: tuple) -> None:
    """The program with one test case, the example inputs and eager's outputs for them."""
    import torch
    import torch.utils._pytree as pytree

    from executorch.devtools import BundledProgram
    from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
    from executorch.devtools.bundled_program.serialize import write_bundled_program

    with torch.no_grad():
        expected = pytree.tree_leaves(model(*inputs))
    case = MethodTestCase(inputs=list(inputs), expected_outputs=expected)
    try:
        write_bundled_program(BundledProgram(program, [MethodTestSuite(method_name, [case])]), path)
    except OSError as e:
        raise CliError(f"cannot write {path}: {e.strerror or e}", 1) from None


def _size(n: int) -> str:
    if n < 2**10:
        return f"{n} bytes"
    return f"{n / 2**10:.1f} KiB" if n < 2**20 else f"{n / 2**20:.1f} MiB"


def resolve_model(spec: str) -> ModelSource:
    """The model a zoo name or FILE.py:FACTORY names."""
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
    return ModelSource(spec, MODELS[spec], DYNAMIC_SHAPES.get(spec))


def _load_from_file(path: Path, name: str, spec_text: str) -> ModelSource:
    if not path.is_file():
        raise CliError(f"bad model {spec_text!r}: no file {path}", 2)
    if not name.isidentifier():
        raise CliError(f"bad model {spec_text!r}: {name!r} is not a function name; write FILE.py:FACTORY", 2)
    spec = importlib.util.spec_from_file_location(f"_executorch_cli_model_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise CliError(f"bad model {spec_text!r}: cannot load {path} as a Python module", 2)
    module = importlib.util.module_from_spec(spec)
    # Registered under its name, as an import would, so code that looks a class's module up by name
    # (torch.export does) finds it; the factory's file may import its neighbours, as a script would.
    sys.modules[spec.name] = module
    sys.path.insert(0, str(path.resolve().parent))
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        sys.modules.pop(spec.name, None)
        raise CliError(f"bad model {spec_text!r}: importing {path} failed: {first_line(e)}", 2) from None
    factory = getattr(module, name, None)
    if not callable(factory):
        found = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_") and
                       getattr(v, "__module__", None) == module.__name__)
        raise CliError(f"bad model {spec_text!r}: {path} has no function {name!r}; it defines: "
                       f"{', '.join(found) or 'nothing callable'}", 2)
    return ModelSource(spec_text, factory, getattr(module, f"{name}_dynamic_shapes", None))


def call_factory(source: ModelSource) -> tuple[Any, tuple]:
    import torch

    try:
        result = source.factory()
    except Exception as e:
        raise CliError(f"model factory {source.label} raised {type(e).__name__}: {first_line(e)}", 2) from None
    if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], torch.nn.Module)
            and isinstance(result[1], (tuple, list))):
        raise CliError(
            f"model factory {source.label} returned {_shape_of(result)}; it must return "
            "(torch.nn.Module, tuple_of_example_inputs)", 2
        )
    return result[0], tuple(result[1])


def declared_dynamic_shapes(source: ModelSource) -> Any:
    if source.dynamic_shapes is None:
        how = "for FILE.py:FACTORY, define FACTORY_dynamic_shapes() in the file" if ":" in source.label else \
            "the zoo declares none for it"
        raise CliError(f"--dynamic: {source.label} has no dynamic shapes ({how}); export without --dynamic", 2)
    return source.dynamic_shapes()


def _shape_of(result: Any) -> str:
    if isinstance(result, tuple):
        return f"a {len(result)}-tuple of ({', '.join(type(r).__name__ for r in result)})"
    return f"a {type(result).__name__}"


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
