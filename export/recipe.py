"""What an export does, as data: `ExportRecipe` and its quantization and lowering parts."""

from __future__ import annotations

import copy
import dataclasses
from abc import ABCMeta, abstractmethod
from dataclasses import dataclass
from enum import Enum, EnumMeta
from typing import Any, Callable, Dict, Iterable, List, Optional, Union

from executorch.exir.config import EdgeCompileConfig, ExecutorchBackendConfig
from executorch.export.types import StageType


class _RecipeTypeMeta(EnumMeta, ABCMeta):
    """Lets a recipe-type enum also declare abstract class methods."""


class RecipeType(Enum, metaclass=_RecipeTypeMeta):
    """Base of every backend's enum of recipe names; each says which backend provides it."""

    @classmethod
    @abstractmethod
    def get_backend_name(cls) -> str:
        """The `BackendRecipeProvider.backend_name` that creates recipes of this type."""


class Mode(str, Enum):
    """Debug exports keep more checks and information; release exports are the deployable file."""

    DEBUG = "debug"
    RELEASE = "release"


@dataclass
class AOQuantizationConfig:
    """A torchao `quantize_` config (an `AOBaseConfig`) with an optional module filter."""

    ao_base_config: Any
    filter_fn: Optional[Callable[[Any, str], bool]] = None


GraphPass = Callable[[Any], Any]


@dataclass
class QuantizationRecipe:
    """How to quantize: pt2e quantizers (prepare, calibrate or train, convert) and/or torchao
    source-transform configs, plus passes around each pt2e step."""

    quantizers: Optional[List[Any]] = None
    ao_quantization_configs: Optional[List[AOQuantizationConfig]] = None
    is_qat: bool = False
    dynamic_batch_size: bool = False
    calibration_inputs_fn: Optional[Callable[[], Iterable[tuple]]] = None
    train_fn: Optional[Callable[[Any], None]] = None
    pre_prepare_passes: Optional[List[GraphPass]] = None
    post_prepare_passes: Optional[List[GraphPass]] = None
    pre_convert_passes: Optional[List[GraphPass]] = None
    post_convert_passes: Optional[List[GraphPass]] = None

    def get_quantizers(self) -> Optional[List[Any]]:
        return self.quantizers


@dataclass
class LoweringRecipe:
    """How to lower: partitioners (a list for every method, or per method), edge passes
    (callables `(method, ExportedProgram) -> passes`), manager-level passes, edge config."""

    partitioners: Optional[Union[List[Any], Dict[str, List[Any]]]] = None
    edge_transform_passes: Optional[List[Callable]] = None
    edge_manager_transform_passes: Optional[List[Callable]] = None
    edge_compile_config: Optional[EdgeCompileConfig] = None


@dataclass
class ExportRecipe:
    """Everything `export()` needs besides the model; `ExportRecipe()` is the portable fp32 recipe."""

    name: Optional[str] = None
    quantization_recipe: Optional[QuantizationRecipe] = None
    aten_transform_passes: Optional[List[Callable]] = None
    source_transform_in_place: bool = False
    lowering_recipe: Optional[LoweringRecipe] = None
    executorch_backend_config: Optional[ExecutorchBackendConfig] = None
    pipeline_stages: Optional[List[StageType]] = None
    mode: Mode = Mode.RELEASE
    strict: bool = True

    def __post_init__(self) -> None:
        checks = (("quantization_recipe", QuantizationRecipe), ("lowering_recipe", LoweringRecipe),
                  ("executorch_backend_config", ExecutorchBackendConfig))
        for field_name, kind in checks:
            value = getattr(self, field_name)
            if value is not None and not isinstance(value, kind):
                raise TypeError(f"ExportRecipe.{field_name} must be a {kind.__name__} or None, "
                                f"got {type(value).__name__}")
        if not isinstance(self.mode, Mode):
            try:
                self.mode = Mode(self.mode)
            except ValueError:
                raise ValueError(f"ExportRecipe.mode={self.mode!r} is not a mode; use "
                                 f"{[m.value for m in Mode]}") from None
        if self.mode is Mode.DEBUG:
            raise ValueError("ExportRecipe.mode='debug' is not supported: this exporter has no debug build of a "
                             "program; use the default Mode.RELEASE")
        if self.pipeline_stages is not None:
            self.pipeline_stages = [_stage(s) for s in self.pipeline_stages]

    @classmethod
    def get_recipe(cls, recipe: RecipeType, **kwargs: Any) -> "ExportRecipe":
        """The recipe the backend of `recipe` provides (kwargs tune it)."""
        from executorch.export.recipe_registry import recipe_registry

        if not isinstance(recipe, RecipeType):
            known = _known_recipes(recipe_registry)
            raise ValueError(f"unknown recipe {recipe!r}; known recipes: {known}")
        backend = recipe.get_backend_name()
        made = recipe_registry.create_recipe(recipe, backend, **kwargs)
        if made is None:
            supported = [r.value for r in recipe_registry.get_supported_recipes(backend)]
            raise ValueError(f"recipe '{recipe.value}' is not provided by backend '{backend}'; "
                             f"it provides {supported}")
        return made

    @classmethod
    def combine(cls, recipes: List["ExportRecipe"], recipe_name: Optional[str] = None) -> "ExportRecipe":
        """One recipe doing what all of `recipes` do: partitioners in order (earlier ones claim
        first), quantizers composed, passes concatenated; scalar settings must agree."""
        if not recipes:
            raise ValueError("ExportRecipe.combine needs at least one recipe")
        if len(recipes) == 1:
            return recipes[0]
        for field_name in ("strict", "mode", "source_transform_in_place", "pipeline_stages"):
            values = {_hashable(getattr(r, field_name)) for r in recipes}
            if len(values) > 1:
                raise ValueError(f"cannot combine recipes with different {field_name} values: "
                                 f"{sorted(map(str, values))}")
        configs = [r.executorch_backend_config for r in recipes if r.executorch_backend_config is not None]
        return cls(
            name=recipe_name or "_".join(r.name for r in recipes if r.name),
            quantization_recipe=_combine_quantization([r.quantization_recipe for r in recipes
                                                       if r.quantization_recipe]),
            aten_transform_passes=_concat(r.aten_transform_passes for r in recipes),
            source_transform_in_place=recipes[0].source_transform_in_place,
            lowering_recipe=_combine_lowering([(r.name, r.lowering_recipe) for r in recipes if r.lowering_recipe]),
            executorch_backend_config=copy.deepcopy(configs[0]) if configs else None,
            pipeline_stages=recipes[0].pipeline_stages,
            mode=recipes[0].mode,
            strict=recipes[0].strict,
        )


def _stage(value: Any) -> StageType:
    try:
        return StageType(value)
    except ValueError:
        raise ValueError(f"pipeline stage {value!r} is not a StageType; use one of "
                         f"{[s.value for s in StageType]}") from None


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _concat(lists: Iterable[Optional[list]]) -> Optional[list]:
    out = [item for lst in lists for item in (lst or [])]
    return out or None


def _single(values: list, what: str) -> Any:
    given = [v for v in values if v is not None]
    if len(given) > 1:
        raise ValueError(f"cannot combine recipes: more than one sets {what}")
    return given[0] if given else None


def _chained(factories: list) -> Optional[Callable[[], Iterable[tuple]]]:
    """One calibration-input factory yielding each recipe's inputs in turn, each factory called once."""
    if len(factories) <= 1:
        return factories[0] if factories else None

    def chained() -> Iterable[tuple]:
        for make in factories:
            yield from make()

    return chained


def _combine_quantization(recipes: List[QuantizationRecipe]) -> Optional[QuantizationRecipe]:
    if not recipes:
        return None
    if len({r.is_qat for r in recipes}) > 1:
        raise ValueError("cannot combine a QAT quantization recipe with a post-training one (is_qat differs)")
    return QuantizationRecipe(
        quantizers=_concat(r.quantizers for r in recipes),
        ao_quantization_configs=_concat(r.ao_quantization_configs for r in recipes),
        is_qat=recipes[0].is_qat,
        dynamic_batch_size=any(r.dynamic_batch_size for r in recipes),
        calibration_inputs_fn=_chained([r.calibration_inputs_fn for r in recipes if r.calibration_inputs_fn]),
        train_fn=_single([r.train_fn for r in recipes], "train_fn"),
        **{name: _concat(getattr(r, name) for r in recipes)
           for name in ("pre_prepare_passes", "post_prepare_passes", "pre_convert_passes", "post_convert_passes")},
    )


def _differences(a: Any, b: Any) -> list[tuple]:
    """The fields of two dataclasses that differ, as (field, value in a, value in b)."""
    def shown(v: Any) -> str:  # operators print as aten.linear.default, not as their repr
        return f"[{', '.join(map(str, v))}]" if isinstance(v, (list, tuple)) else repr(v)

    def same(x: Any, y: Any, name: str) -> bool:  # preserve_ops is a set of operators, whatever its order
        if name == "preserve_ops" and isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
            return len(x) == len(y) and set(x) == set(y)
        return x == y

    return [(f.name, shown(getattr(a, f.name)), shown(getattr(b, f.name))) for f in dataclasses.fields(a)
            if not same(getattr(a, f.name), getattr(b, f.name), f.name)]


def _combine_lowering(named: List[tuple]) -> Optional[LoweringRecipe]:
    if not named:
        return None
    recipes = [r for _, r in named]
    parts = [r.partitioners for r in recipes if r.partitioners]
    if any(isinstance(p, dict) for p in parts) and not all(isinstance(p, dict) for p in parts):
        raise ValueError("cannot combine recipes whose partitioners are a list in one and per-method in "
                         "another; give every recipe per-method partitioners")
    if parts and isinstance(parts[0], dict):
        partitioners: Any = {}
        for p in parts:
            for method, found in p.items():
                partitioners.setdefault(method, []).extend(found)
    else:
        partitioners = _concat(parts)
    configs = [(name, r.edge_compile_config) for name, r in named if r.edge_compile_config is not None]
    for name, other in configs[1:]:
        first_name, first = configs[0]
        diff = _differences(first, other)
        if diff:
            fields = "; ".join(f"{f} ({first_name}={x}, {name}={y})" for f, x, y in diff)
            raise ValueError(f"cannot combine recipes whose edge_compile_configs differ in {fields}; give them "
                             "the same EdgeCompileConfig")
    configs = [c for _, c in configs]
    return LoweringRecipe(
        partitioners=partitioners or None,
        edge_transform_passes=_concat(r.edge_transform_passes for r in recipes),
        edge_manager_transform_passes=_concat(r.edge_manager_transform_passes for r in recipes),
        edge_compile_config=copy.deepcopy(configs[0]) if configs else None,
    )


def _known_recipes(registry: Any) -> list[str]:
    return sorted(f"{type(r).__name__}.{r.name}" for b in registry.list_backends()
                  for r in registry.get_supported_recipes(b))
