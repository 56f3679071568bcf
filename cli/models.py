"""The models the commands take: a zoo name or FILE.py:FACTORY, loaded and called with checks."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from executorch.cli.errors import CliError


@dataclass
class ModelSource:
    """A model to export: its label, the factory returning (module, inputs), its dynamic shapes if declared."""

    label: str
    factory: Callable[[], Any]
    dynamic_shapes: Optional[Callable[[], Any]]


def resolve_model(spec: str) -> ModelSource:
    """The model a zoo name or FILE.py:FACTORY names; a CliError (exit code 2) says what is wrong."""
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
    """The (module, example inputs) the factory returns, checked."""
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
    """The dynamic shapes the model declares (for --dynamic)."""
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
    """An exception's first line (torch's messages are long; the first line names the problem)."""
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
