"""`python -m executorch.export MODEL --recipe NAME -o m.pte`: a recipe export with a line per stage."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any, Optional, Sequence

from executorch.cli.errors import CliError
from executorch.cli.export import call_factory, resolve_model

# Short names; any recipe type's value (`portable_fp32`, `xnnpack_pt2e_int8_dynamic_per_channel`,
# `executor_backend_fp32`, ...) works too.
_ALIASES = {
    "portable": "portable_fp32",
    "xnnpack": "xnnpack_fp32",
    "xnnpack_int8": "xnnpack_pt2e_int8_static_per_channel",  # what the published examples' --quantize does
    "xnnpack_8da4w": "xnnpack_torchao_int8da_int4w_per_tensor",  # int4 weights in groups of 32
}


def _recipe_types() -> dict[str, Any]:
    import executorch.backends.xnnpack.recipes  # noqa: F401  (each backend's recipe module registers its provider)
    from executorch.export import recipe_registry

    try:  # the ExecutorBackend's partitioner lives in the source tree only
        import executorch.exir.backend.test.demos.rpc.executor_backend_recipes  # noqa: F401
    except ImportError:
        pass
    return {r.value: r for b in recipe_registry.list_backends() for r in recipe_registry.get_supported_recipes(b)}


def _recipe(name: str) -> Any:
    from executorch.export import ExportRecipe

    known = _recipe_types()
    key = _ALIASES.get(name, name)
    if key not in known:
        names = sorted(set(known) | set(_ALIASES))
        raise CliError(f"unknown recipe {name!r}; known recipes: {', '.join(names)}", 2)
    try:
        return ExportRecipe.get_recipe(known[key])
    except ModuleNotFoundError as e:
        raise CliError(f"recipe {name!r}: {e}", 2) from None


def _with_backend(recipe: Any, backend: str) -> Any:
    """The recipe lowering to `backend` (`--backend`): XNNPACK's partitioner as its lowering step."""
    if backend == "portable":
        return recipe
    import dataclasses

    from executorch.backends.xnnpack import XnnpackPartitioner
    from executorch.export.recipe import LoweringRecipe

    lowering = recipe.lowering_recipe
    if lowering is not None and lowering.partitioners:
        raise CliError(f"--backend {backend}: recipe {recipe.name!r} already lowers with its own partitioners; "
                       "drop --backend or pick a portable recipe", 2)
    lowering = dataclasses.replace(lowering or LoweringRecipe(), partitioners=[XnnpackPartitioner()])
    return dataclasses.replace(recipe, name=f"{recipe.name}+{backend}", lowering_recipe=lowering)


def _missing_backends(path: Path) -> list:
    from executorch.exir._serialize import read_program
    from executorch.runtime import Runtime

    ids = {d.id for plan in read_program(path.read_bytes()).execution_plan for d in plan.delegates}
    return sorted(ids - set(Runtime.get().backend_registry.registered_backend_names))


def _size(n: int) -> str:
    return f"{n} bytes" if n < 2**10 else f"{n / 2**10:.1f} KiB" if n < 2**20 else f"{n / 2**20:.1f} MiB"


def _summary(session: Any, path: Path) -> list[str]:
    program = session.get_executorch_program()
    lines = []
    for plan in program.execution_plan:
        calls = [i.instr_args for i in plan.chains[0].instructions] if plan.chains else []
        kernels = sum(type(c).__name__ == "KernelCall" for c in calls)
        delegated = sum(type(c).__name__ == "DelegateCall" for c in calls)
        ops = sorted({f"{o.name}.{o.overload}" if o.overload else o.name for o in plan.operators})
        share = f", {delegated} delegate call{'s' if delegated != 1 else ''}" if delegated else ""
        lines.append(f"method {plan.name}: {kernels} kernel calls{share}; {len(ops)} operators: {', '.join(ops)}")
    info = session.get_stage_artifacts()
    for stage in info.values():
        by_method = stage.get_context("delegation_info_by_method")
        if by_method:
            for method, d in sorted(by_method.items()):
                total = d.num_delegated_nodes + d.num_non_delegated_nodes
                lines.append(f"method {method}: {d.num_delegated_nodes}/{total} operator nodes delegated "
                             f"({100.0 * d.num_delegated_nodes / max(total, 1):.0f}%)")
            break
    lines.append(f"size: {_size(path.stat().st_size)}")
    return lines


def _reference(session: Any, model: Any, inputs: tuple, quantized: bool) -> tuple[Any, str]:
    """Eager's outputs, or for a quantized recipe the converted pt2e module's (what the file computes)."""
    import torch

    from executorch.export import StageType

    if quantized:
        converted = session.get_stage_artifacts()[StageType.QUANTIZE].data["forward"]
        with torch.no_grad():
            return converted(*inputs), "the converted pt2e module"
    with torch.no_grad():
        return model(*inputs), "eager"


def _quantized_tolerance(model: Any, inputs: tuple, expected: Any) -> float:
    """1e-3 of the largest output, or half of what quantization itself moves the outputs when that is
    more. Float summation order decides on which side of a rounding boundary an activation lands, and
    over many quantized layers those one-step flips compound (MobileNetV2's int8 file differs from
    the converted module by 3.6e-2 of its largest output on the native engine, whose convolutions
    sum in another order than torch's)."""
    import torch
    from torch.utils._pytree import tree_flatten

    with torch.no_grad():
        eager, _ = tree_flatten(model(*inputs))
    want, _ = tree_flatten(expected)
    moved = [float((e.float() - w.float()).abs().max() / w.float().abs().max().clamp_min(1e-30))
             for e, w in zip(eager, want) if isinstance(w, torch.Tensor) and w.is_floating_point()]
    return max([1e-3] + [m / 2 for m in moved])


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m executorch.export",
        description="Export a model to a .pte with an export recipe, printing each stage as it runs.")
    parser.add_argument("model", help="a zoo name (source tree) or FILE.py:FACTORY returning (module, inputs)")
    parser.add_argument("--recipe", default="portable", help="recipe name (default: portable, the fp32 recipe)")
    parser.add_argument("--backend", choices=("portable", "xnnpack"), default="portable",
                        help="xnnpack: lower what XNNPACK takes with XnnpackPartitioner on top of the recipe "
                             "(default: portable, the recipe as it is)")
    parser.add_argument("-o", "--output", type=Path, required=True, help="the .pte to write")
    parser.add_argument("--no-verify", dest="verify", action="store_false",
                        help="skip running the file and comparing it with eager")
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except CliError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.code


def _run(args: argparse.Namespace) -> int:
    import torch

    from executorch.exir.error import ExportError
    from executorch.export import ExportSession

    recipe = _with_backend(_recipe(args.recipe), getattr(args, "backend", "portable"))
    source = resolve_model(args.model)
    torch.manual_seed(0)
    model, inputs = call_factory(source)
    print(f"exporting {source.label} with recipe {recipe.name}")
    session = ExportSession(model, [inputs], recipe)

    def progress(stage: Any, seconds: float) -> None:
        print(f"  {stage.value:<30} {seconds:7.2f}s", flush=True)

    try:
        session.export(progress=progress)
    except ExportError as e:
        raise CliError(str(e).splitlines()[0], 1) from None
    try:
        session.save_to_pte(str(args.output))
    except OSError as e:
        raise CliError(f"cannot write {args.output}: {e.strerror or e}", 1) from None
    for line in _summary(session, args.output):
        print(line)
    if not args.verify:
        print(f"wrote {args.output}; not checked (--no-verify)")
        return 0
    missing = _missing_backends(args.output)
    if missing:
        print(f"wrote {args.output}; not checked: the runtime has no {', '.join(missing)}; run the file where it "
              "is registered")
        return 0
    from executorch.devtools.compare import compare_outputs
    from executorch.runtime import Runtime

    from executorch.export._torch_threads import one_torch_thread

    quantized = recipe.quantization_recipe is not None
    # A quantized reference is taken single-threaded (see one_torch_thread); the Python engine runs
    # torch's kernels, so it runs under the same setting.
    with one_torch_thread() if quantized else contextlib.nullcontext():
        expected, against = _reference(session, model, inputs, quantized)
        actual = session.run_method("forward", inputs)
    if quantized:
        result = compare_outputs(actual, expected, rtol=0.0, atol=_quantized_tolerance(model, inputs, expected))
    else:
        result = compare_outputs(actual, expected)
    where = f"on the {Runtime.get().backend} runtime"
    if not result.ok:
        print(f"FAIL: {args.output} does not match {against} {where} ({result})", file=sys.stderr)
        return 1
    print(f"OK: {args.output} matches {against} {where} ({result})")
    return 0
