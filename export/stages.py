"""The steps of an export pipeline, one class each behind the `Stage` interface."""

from __future__ import annotations

import copy
import importlib
import inspect
import sys
from abc import ABC, abstractmethod
from typing import Any, Callable, Dict, List, Optional, Union

import torch
from torch import nn
from torch.export import ExportedProgram

from executorch.devtools.backend_debug import get_delegation_info  # noqa: F401  (called through _this)
from executorch.exir.config import EdgeCompileConfig
from executorch.exir.error import ExportError
from executorch.exir.program import EdgeProgramManager, to_edge, to_edge_transform_and_lower  # noqa: F401
from executorch.export.recipe import LoweringRecipe, QuantizationRecipe
from executorch.export.types import StageType

# torchao's pt2e and source-transform entry points, names of this module as upstream's stages module has them
# (tools and tests patch them here); torchao is optional, so each is imported on first use.
_TORCHAO_NAMES = {
    "ComposableQuantizer": "torchao.quantization.pt2e.quantizer",
    "prepare_pt2e": "torchao.quantization.pt2e.quantize_pt2e",
    "prepare_qat_pt2e": "torchao.quantization.pt2e.quantize_pt2e",
    "convert_pt2e": "torchao.quantization.pt2e.quantize_pt2e",
    "allow_exported_model_train_eval": "torchao.quantization.pt2e",
    "move_exported_model_to_eval": "torchao.quantization.pt2e",
    "move_exported_model_to_train": "torchao.quantization.pt2e",
    "quantize_": "torchao.quantization",
    "unwrap_tensor_subclass": "torchao.utils",
}


def __getattr__(name: str) -> Any:
    if name not in _TORCHAO_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from executorch.export._torchao import require_torchao

    require_torchao(f"executorch.export.stages.{name}")
    value = getattr(importlib.import_module(_TORCHAO_NAMES[name]), name)
    globals()[name] = value
    return value


# Calls go through the module, so a name patched here is the one called.
_this = sys.modules[__name__]


class PipelineArtifact:
    """What a stage hands to the next: its product (`data`) and the session's shared `context`."""

    def __init__(self, data: Any, context: Dict[str, Any]) -> None:
        self.data = data
        self.context = context

    def add_context(self, key: str, value: Any) -> None:
        self.context[key] = value

    def get_context(self, key: str, default: Any = None) -> Any:
        return self.context.get(key, default)

    def copy_with_new_data(self, new_data: Any) -> "PipelineArtifact":
        # Each stage gets its own context dict, so one stage's timing does not overwrite another's.
        return PipelineArtifact(new_data, dict(self.context))


class Stage(ABC):
    """One pipeline step: `run(artifact)` does the work, `get_artifacts()` returns its product."""

    def __init__(self) -> None:
        self._artifact: Optional[PipelineArtifact] = None

    @property
    @abstractmethod
    def stage_type(self) -> StageType: ...

    @property
    @abstractmethod
    def valid_predecessor_stages(self) -> List[StageType]:
        """Stages that may run just before this one (empty: any)."""

    @property
    @abstractmethod
    def can_start_pipeline(self) -> bool: ...

    @abstractmethod
    def run(self, artifact: PipelineArtifact) -> None: ...

    def get_artifacts(self) -> PipelineArtifact:
        if self._artifact is None:
            raise RuntimeError(f"Stage: {type(self).__name__} not executed: call run(artifact) first")
        return self._artifact


class SourceTransformStage(Stage):
    """Applies torchao `quantize_` configs to the eager modules (a copy unless `in_place`)."""

    def __init__(self, quantization_recipe: Optional[QuantizationRecipe], in_place: bool = False) -> None:
        super().__init__()
        self._recipe = quantization_recipe
        self._in_place = in_place

    stage_type = StageType.SOURCE_TRANSFORM
    valid_predecessor_stages: List[StageType] = []
    can_start_pipeline = True

    def run(self, artifact: PipelineArtifact) -> None:
        configs = self._recipe.ao_quantization_configs if self._recipe else None
        if not configs:
            self._artifact = artifact
            return
        if len(configs) > 1:
            raise ValueError(f"{len(configs)} ao_quantization_configs given; torchao configs do not compose, "
                             "give one")
        models = artifact.data if self._in_place else copy.deepcopy(artifact.data)
        for model in models.values():
            _this.quantize_(model, configs[0].ao_base_config, configs[0].filter_fn)
            _this.unwrap_tensor_subclass(model)
        self._artifact = artifact.copy_with_new_data(models)


class QuantizeStage(Stage):
    """pt2e quantization: capture, prepare, calibrate (or train), convert, per method."""

    def __init__(self, quantization_recipe: Optional[QuantizationRecipe]) -> None:
        super().__init__()
        self._recipe = quantization_recipe

    stage_type = StageType.QUANTIZE
    valid_predecessor_stages = [StageType.SOURCE_TRANSFORM]
    can_start_pipeline = True

    def run(self, artifact: PipelineArtifact) -> None:
        if not self._recipe or not self._recipe.quantizers:
            self._artifact = artifact
            return
        from executorch.export._quantize import quantize_pt2e

        inputs = artifact.get_context("example_inputs")
        quantized = {}
        for method, model in artifact.data.items():
            if not inputs.get(method):
                raise ValueError(f"Example inputs for method {method} not found or empty: the quantize stage "
                                 f"calibrates on them; pass example_inputs={{'{method}': [(...), ...]}}")
            quantized[method] = quantize_pt2e(method, model, inputs[method], self._recipe,
                                              self._get_quantizer_for_prepare_pt2e(self._recipe.quantizers), _this)
        self._artifact = artifact.copy_with_new_data(quantized)

    def _get_quantizer_for_prepare_pt2e(self, quantizers: List[Any]) -> Any:
        """The recipe's quantizers as the one torchao quantizer prepare_pt2e takes (their composition)."""
        if not quantizers:
            raise ValueError("No quantizers detected: give QuantizationRecipe.quantizers at least one torchao "
                             "pt2e Quantizer")
        from executorch.export._torchao import require_torchao

        require_torchao("the quantize stage (QuantizationRecipe.quantizers)")
        from torchao.quantization.pt2e.quantizer import Quantizer

        wrong = [q for q in quantizers if not isinstance(q, Quantizer)]
        if wrong:
            raise TypeError(f"quantizer {type(wrong[0]).__name__} is not a torchao pt2e Quantizer "
                            "(torchao.quantization.pt2e.quantizer.Quantizer); port it to torchao's interface")
        return _this.ComposableQuantizer(list(quantizers))


class TorchExportStage(Stage):
    """`torch.export.export` of each method on its first example input, then the aten passes."""

    def __init__(self, aten_transform_passes: Optional[List[Callable]] = None, strict: bool = True) -> None:
        super().__init__()
        self._passes = aten_transform_passes
        self.strict = strict

    stage_type = StageType.TORCH_EXPORT
    valid_predecessor_stages = [StageType.SOURCE_TRANSFORM, StageType.QUANTIZE]
    can_start_pipeline = True

    def run(self, artifact: PipelineArtifact) -> None:
        inputs = artifact.get_context("example_inputs")
        dynamic = artifact.get_context("dynamic_shapes") or {}
        programs = {}
        with torch.no_grad():
            for method, model in artifact.data.items():
                if not inputs.get(method):
                    raise ValueError(f"Example inputs for method {method} not found: pass example_inputs as a "
                                     f"list of input tuples (or {{'{method}': [...]}} for several methods)")
                sample = inputs[method][0]
                check_arguments(method, model, sample)
                try:
                    programs[method] = torch.export.export(model, sample, dynamic_shapes=dynamic.get(method),
                                                           strict=self.strict)
                except Exception as e:  # torch's own message, prefixed with the method it concerns
                    what = "dynamic_shapes" if method in dynamic and _about_dynamic_shapes(e) else "torch.export"
                    raise ExportError(f"method '{method}': {what} failed: {_first_line(e)}") from e
                for p in self._passes or []:
                    if not callable(p):
                        raise ValueError(f"Aten transform passes must be a callable that can transform and "
                                         f"return an exported program: {p!r} is not callable; give functions "
                                         "(method_name, ExportedProgram) -> ExportedProgram")
                    programs[method] = p(method, programs[method])
        self._artifact = artifact.copy_with_new_data(programs)


def check_arguments(method: str, model: Any, sample: Any) -> None:
    """Name the method and argument when the example inputs cannot be the model's arguments."""
    if not isinstance(sample, tuple):
        raise TypeError(f"method '{method}': an example input must be a tuple of arguments, got "
                        f"{type(sample).__name__}; wrap it as ({type(sample).__name__.lower()},)")
    try:
        params = inspect.signature(model.forward if isinstance(model, nn.Module) else model).parameters
    except (TypeError, ValueError):
        return
    positional = [p for p in params.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind == p.VAR_POSITIONAL for p in params.values()):
        return
    required = [p.name for p in positional if p.default is p.empty]
    if len(sample) > len(positional):
        raise TypeError(f"method '{method}': {len(sample)} example inputs given, but it takes "
                        f"{len(positional)} ({', '.join(p.name for p in positional)}); drop the extra inputs")
    if len(sample) < len(required):
        missing = required[len(sample):]
        raise TypeError(f"method '{method}': argument '{missing[0]}' has no example input ({len(sample)} given, "
                        f"{len(required)} required); add one to the input tuple")


def _about_dynamic_shapes(e: Exception) -> bool:
    text = str(e).lower()
    return "dynamic" in text or "constraint" in text or "dim" in text


def _first_line(e: Exception) -> str:
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    return lines[0] if lines else type(e).__name__


def _delegation_context(artifact: PipelineArtifact, manager: EdgeProgramManager) -> None:
    by_method = {m: _this.get_delegation_info(manager.exported_program(m).graph_module)
                 for m in sorted(manager.methods)}
    artifact.add_context("delegation_info_by_method", by_method)
    artifact.add_context("delegation_info", by_method.get("forward", next(iter(by_method.values()), None)))


def _resolve_passes(callables: Optional[List[Callable]], programs: Dict[str, ExportedProgram]) -> Optional[dict]:
    """Each callable maps (method, program) to that method's passes; gather them per method."""
    per_method: dict = {}
    for method, ep in programs.items():
        for make in callables or []:
            if not callable(make):
                raise TypeError(f"edge_transform_passes: {make!r} is not callable; give functions "
                                "(method_name, ExportedProgram) -> list of passes")
            per_method.setdefault(method, []).extend(make(method, ep) or [])
    per_method = {m: p for m, p in per_method.items() if p}
    return per_method or None


class EdgeTransformAndLowerStage(Stage):
    """`to_edge_transform_and_lower`: edge dialect, the recipe's passes, the partitioners."""

    def __init__(self, partitioners: Optional[Union[List[Any], Dict[str, List[Any]]]] = None,
                 transform_passes: Optional[List[Callable]] = None,
                 compile_config: Optional[EdgeCompileConfig] = None) -> None:
        super().__init__()
        self._partitioners = partitioners
        self._transform_passes = transform_passes
        self._compile_config = compile_config

    @classmethod
    def from_recipe(cls, recipe: Optional[LoweringRecipe]) -> "EdgeTransformAndLowerStage":
        if recipe is None:
            return cls()
        return cls(recipe.partitioners, recipe.edge_transform_passes, recipe.edge_compile_config)

    stage_type = StageType.TO_EDGE_TRANSFORM_AND_LOWER
    valid_predecessor_stages = [StageType.TORCH_EXPORT]
    can_start_pipeline = True

    def run(self, artifact: PipelineArtifact) -> None:
        programs = artifact.data
        manager = _this.to_edge_transform_and_lower(
            programs, transform_passes=_resolve_passes(self._transform_passes, programs),
            partitioner=self._partitioners, constant_methods=artifact.get_context("constant_methods"),
            compile_config=self._compile_config, generate_etrecord=artifact.get_context("generate_etrecord", False))
        self._artifact = artifact.copy_with_new_data(manager)
        _delegation_context(self._artifact, manager)

    @property
    def delegation_info(self) -> Any:
        """The delegation summary of `forward` (or of the first method by name)."""
        return self.get_artifacts().get_context("delegation_info")

    @property
    def delegation_info_by_method(self) -> Dict[str, Any]:
        return self.get_artifacts().get_context("delegation_info_by_method")


class ToEdgeStage(Stage):
    """`to_edge` alone (delegation then runs in `ToBackendStage`)."""

    def __init__(self, edge_compile_config: Optional[EdgeCompileConfig] = None) -> None:
        super().__init__()
        self._config = edge_compile_config

    @classmethod
    def from_recipe(cls, recipe: Optional[LoweringRecipe]) -> "ToEdgeStage":
        return cls(recipe.edge_compile_config if recipe else None)

    stage_type = StageType.TO_EDGE
    valid_predecessor_stages = [StageType.TORCH_EXPORT]
    can_start_pipeline = True

    def run(self, artifact: PipelineArtifact) -> None:
        manager = _this.to_edge(artifact.data, constant_methods=artifact.get_context("constant_methods"),
                          compile_config=self._config,
                          generate_etrecord=artifact.get_context("generate_etrecord", False))
        self._artifact = artifact.copy_with_new_data(manager)


class EdgeProgramManagerTransformStage(Stage):
    """Passes over the edge programs: per-method edge passes, then manager-level passes in order."""

    def __init__(self, edge_transform_passes: Optional[List[Callable]] = None,
                 edge_manager_transform_passes: Optional[List[Callable]] = None) -> None:
        super().__init__()
        self._edge_passes = edge_transform_passes or []
        self._manager_passes = edge_manager_transform_passes or []

    @classmethod
    def from_recipe(cls, recipe: Optional[LoweringRecipe]) -> "EdgeProgramManagerTransformStage":
        if recipe is None:
            return cls()
        return cls(recipe.edge_transform_passes, recipe.edge_manager_transform_passes)

    stage_type = StageType.EDGE_PROGRAM_MANAGER_TRANSFORM
    valid_predecessor_stages = [StageType.TO_EDGE, StageType.TO_EDGE_TRANSFORM_AND_LOWER]
    can_start_pipeline = False

    def run(self, artifact: PipelineArtifact) -> None:
        manager = artifact.data
        if not isinstance(manager, EdgeProgramManager):
            raise TypeError(f"stage {self.stage_type.value} needs an EdgeProgramManager, got {type(manager).__name__}")
        programs = {m: manager.exported_program(m) for m in manager.methods}
        passes = _resolve_passes(self._edge_passes, programs)
        if passes:
            manager = manager.transform(passes)
        for make in self._manager_passes:
            found = make(manager)
            if found:
                manager = manager.transform(found)
        self._artifact = artifact.copy_with_new_data(manager)


class ToBackendStage(Stage):
    """`EdgeProgramManager.to_backend` with the recipe's partitioners."""

    def __init__(self, partitioners: Optional[Union[List[Any], Dict[str, List[Any]]]] = None) -> None:
        super().__init__()
        self._partitioners = partitioners

    @classmethod
    def from_recipe(cls, recipe: Optional[LoweringRecipe]) -> "ToBackendStage":
        return cls(recipe.partitioners if recipe else None)

    stage_type = StageType.TO_BACKEND
    valid_predecessor_stages = [StageType.TO_EDGE, StageType.EDGE_PROGRAM_MANAGER_TRANSFORM]
    can_start_pipeline = False

    def run(self, artifact: PipelineArtifact) -> None:
        manager = artifact.data
        if manager is None:
            raise RuntimeError("Edge program manager is not set: the to_backend stage needs the product of "
                               "to_edge (or edge_program_manager_transform) before it")
        if isinstance(self._partitioners, dict):
            # round i lowers every method with its i-th partitioner, as upstream's stage does
            for i in range(max(map(len, self._partitioners.values()), default=0)):
                manager = manager.to_backend({m: ps[i] for m, ps in self._partitioners.items() if i < len(ps)})
        elif self._partitioners:
            manager = manager.to_backend(self._partitioners)
        self._artifact = artifact.copy_with_new_data(manager)
        _delegation_context(self._artifact, manager)

    @property
    def delegation_info_by_method(self) -> Dict[str, Any]:
        return self.get_artifacts().get_context("delegation_info_by_method")


class ExecutorchStage(Stage):
    """`to_executorch`: out variants, memory planning, emission."""

    def __init__(self, backend_config: Any = None) -> None:
        super().__init__()
        self._config = backend_config

    stage_type = StageType.TO_EXECUTORCH
    valid_predecessor_stages = [StageType.TO_EDGE_TRANSFORM_AND_LOWER, StageType.TO_BACKEND,
                                StageType.EDGE_PROGRAM_MANAGER_TRANSFORM]
    can_start_pipeline = False

    def run(self, artifact: PipelineArtifact) -> None:
        if artifact.data is None:
            raise RuntimeError("Edge program manager is not set: the to_executorch stage needs the product of "
                               "an edge stage (to_edge, to_edge_transform_and_lower or to_backend) before it")
        self._artifact = artifact.copy_with_new_data(artifact.data.to_executorch(self._config))
