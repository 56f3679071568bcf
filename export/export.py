"""`export()` and `ExportSession`: one call from a model to a `.pte`, keeping every stage's product."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import nn
from torch.export import ExportedProgram
from torch.fx import GraphModule

from executorch.exir.error import ExportError
from executorch.export.recipe import ExportRecipe
from executorch.export.stages import (EdgeProgramManagerTransformStage, EdgeTransformAndLowerStage, ExecutorchStage,
                                      PipelineArtifact, QuantizeStage, SourceTransformStage, Stage, ToBackendStage,
                                      ToEdgeStage, TorchExportStage)
from executorch.export.types import StageType

Model = Union[nn.Module, GraphModule, ExportedProgram, Dict[str, Any], str]
ExampleInputs = Union[List[tuple], Dict[str, List[tuple]]]

# Stages an input of each kind has already been through, so a pipeline may not run them again.
_DONE_BY_INPUT = {
    "GraphModule": {StageType.SOURCE_TRANSFORM, StageType.QUANTIZE},
    "ExportedProgram": {StageType.SOURCE_TRANSFORM, StageType.QUANTIZE, StageType.TORCH_EXPORT},
}
_EDGE_STAGES = (StageType.TO_EDGE_TRANSFORM_AND_LOWER, StageType.TO_BACKEND,
                StageType.EDGE_PROGRAM_MANAGER_TRANSFORM, StageType.TO_EDGE)


def export(model: Model, example_inputs: Optional[ExampleInputs] = None, export_recipe: Optional[ExportRecipe] = None,
           name: Optional[str] = None, dynamic_shapes: Any = None, constant_methods: Optional[Dict[str, Any]] = None,
           artifact_dir: Optional[str] = None, generate_etrecord: bool = False) -> "ExportSession":
    """Run the whole pipeline the recipe describes and return the session holding its products."""
    session = ExportSession(model, example_inputs, export_recipe, name, dynamic_shapes, constant_methods,
                            artifact_dir, generate_etrecord)
    session.export()
    return session


def _kind(model: Any, where: str = "model") -> str:
    if isinstance(model, ExportedProgram):
        return "ExportedProgram"
    if isinstance(model, GraphModule):
        return "GraphModule"
    if isinstance(model, nn.Module):
        return "nn.Module"
    raise TypeError(f"{where} is a {type(model).__name__}; export takes an nn.Module, a GraphModule, an "
                    "ExportedProgram, a path to a saved ExportedProgram, or a dict of method name -> one of those")


class ExportSession:
    """Builds the pipeline from a recipe once, runs it with `export()`, and keeps each stage's artifact."""

    def __init__(self, model: Model, example_inputs: Optional[ExampleInputs] = None,
                 export_recipe: Optional[ExportRecipe] = None, name: Optional[str] = None, dynamic_shapes: Any = None,
                 constant_methods: Optional[Dict[str, Any]] = None, artifact_dir: Optional[str] = None,
                 generate_etrecord: Optional[bool] = False) -> None:
        if not isinstance(generate_etrecord, bool):
            raise ValueError(f"generate_etrecord must be True or False, not {generate_etrecord!r}")
        if artifact_dir is not None:
            raise ValueError(f"artifact_dir={artifact_dir!r} is not supported: stages keep their products in "
                             "memory (get_stage_artifacts()); save the .pte with save_to_pte instead")
        if isinstance(model, (str, Path)):
            model = torch.export.load(str(model))
        models = model if isinstance(model, dict) else {"forward": model}
        if not models:
            raise ValueError("model is an empty dict; give at least one method name -> model")
        kinds = {_kind(m, f"model['{k}']") for k, m in models.items()}
        if len(kinds) > 1:
            raise TypeError(f"the methods' models are of different kinds ({', '.join(sorted(kinds))}); "
                            "give every method the same kind")
        self._input_model_type = kinds.pop()
        self._model = models
        self._example_inputs = self._normalize_inputs(example_inputs)
        self._dynamic_shapes = self._per_method("dynamic_shapes", dynamic_shapes)
        self._export_recipe = export_recipe if export_recipe is not None else ExportRecipe()
        if not isinstance(self._export_recipe, ExportRecipe):
            raise TypeError(f"export_recipe must be an ExportRecipe, got {type(export_recipe).__name__}; "
                            "use ExportRecipe.get_recipe(...)")
        self._quant_recipe = self._export_recipe.quantization_recipe
        self._lowering_recipe = self._export_recipe.lowering_recipe
        self._pipeline_stages = list(self._export_recipe.pipeline_stages or self._get_default_pipeline())
        self._stage_registry: Dict[StageType, Stage] = self._build_stages(self._pipeline_stages)
        self._run_context: Dict[str, Any] = {
            "example_inputs": self._example_inputs, "dynamic_shapes": self._dynamic_shapes,
            "constant_methods": constant_methods, "export_recipe": self._export_recipe, "session_name": name,
            "artifact_dir": artifact_dir, "generate_etrecord": generate_etrecord,
        }
        self._stage_to_artifacts: Dict[StageType, PipelineArtifact] = {}

    def _normalize_inputs(self, example_inputs: Optional[ExampleInputs]) -> Dict[str, List[tuple]]:
        if example_inputs is None:
            if self._input_model_type != "ExportedProgram":
                raise ValueError(f"example_inputs are required for a {self._input_model_type}; pass a list of "
                                 "input tuples (only an ExportedProgram may omit them)")
            return {}
        per_method = example_inputs if isinstance(example_inputs, dict) else {"forward": example_inputs}
        for method, samples in per_method.items():
            if not isinstance(samples, list):
                raise TypeError(f"method '{method}': example inputs must be a list of input tuples, got "
                                f"{type(samples).__name__}; write [inputs] for a single sample")
        missing = [m for m in self._model if m not in per_method and self._input_model_type != "ExportedProgram"]
        if missing:
            raise ValueError(f"method '{missing[0]}' has no example inputs; example_inputs has "
                             f"{sorted(per_method)}")
        return dict(per_method)

    def _per_method(self, what: str, value: Any) -> Dict[str, Any]:
        if value is None:
            return {}
        if isinstance(value, dict) and value and set(value) <= set(self._model):
            return dict(value)
        if len(self._model) > 1:
            raise ValueError(f"{what} for several methods must be a dict of method name -> {what}; methods: "
                             f"{sorted(self._model)}")
        return {next(iter(self._model)): value}

    def _get_default_pipeline(self) -> List[StageType]:
        stages = []
        if self._input_model_type == "nn.Module":
            stages += [StageType.SOURCE_TRANSFORM, StageType.QUANTIZE]
        if self._input_model_type != "ExportedProgram":
            stages.append(StageType.TORCH_EXPORT)
        stages.append(StageType.TO_EDGE_TRANSFORM_AND_LOWER)
        if self._lowering_recipe is not None and self._lowering_recipe.edge_manager_transform_passes:
            stages.append(StageType.EDGE_PROGRAM_MANAGER_TRANSFORM)
        stages.append(StageType.TO_EXECUTORCH)
        return stages

    def _build_stages(self, stages: List[StageType]) -> Dict[StageType, Stage]:
        recipe, lowering = self._export_recipe, self._lowering_recipe
        makers: Dict[StageType, Callable[[], Stage]] = {
            StageType.SOURCE_TRANSFORM: lambda: SourceTransformStage(self._quant_recipe,
                                                                     recipe.source_transform_in_place),
            StageType.QUANTIZE: lambda: QuantizeStage(self._quant_recipe),
            StageType.TORCH_EXPORT: lambda: TorchExportStage(recipe.aten_transform_passes, strict=recipe.strict),
            StageType.TO_EDGE_TRANSFORM_AND_LOWER: lambda: EdgeTransformAndLowerStage.from_recipe(lowering),
            StageType.TO_EDGE: lambda: ToEdgeStage.from_recipe(lowering),
            StageType.EDGE_PROGRAM_MANAGER_TRANSFORM: lambda: EdgeProgramManagerTransformStage.from_recipe(lowering),
            StageType.TO_BACKEND: lambda: ToBackendStage.from_recipe(lowering),
            StageType.TO_EXECUTORCH: lambda: ExecutorchStage(recipe.executorch_backend_config),
        }
        return {s: makers[s]() for s in stages}

    def register_stage(self, stage_type: StageType, stage: Stage) -> None:
        """Add a stage or replace the built-in one of that type."""
        self._stage_registry[stage_type] = stage

    def get_registered_stage(self, stage_type: StageType) -> Optional[Stage]:
        return self._stage_registry.get(stage_type)

    def get_all_registered_stages(self) -> Dict[StageType, Stage]:
        return self._stage_registry

    def _validate_pipeline_sequence(self, stages: List[StageType]) -> None:
        """Raises ValueError when `stages` cannot run in this order on this session's input."""
        if not stages:
            raise ValueError("Pipeline stages cannot be empty; leave ExportRecipe.pipeline_stages=None for the "
                             "default")
        done = set(stages) & _DONE_BY_INPUT.get(self._input_model_type, set())
        if done:
            names = ", ".join(sorted(s.name for s in done))
            raise ValueError(f"Cannot run stage(s) {names} on a {self._input_model_type} input, which has been "
                             f"through them already; remove them from pipeline_stages")
        for i, stage_type in enumerate(stages):
            stage = self._stage_registry.get(stage_type)
            if stage is None:
                raise ValueError(f"stage {stage_type.value} has no implementation; add one with "
                                 "session.register_stage()")
            if i == 0 and not stage.can_start_pipeline:
                raise ValueError(f"stage {stage_type.value} cannot start a pipeline; put the stages that make "
                                 "its input before it")
            if i and stage.valid_predecessor_stages and stages[i - 1] not in stage.valid_predecessor_stages:
                raise ValueError(f"stage {stage_type.value} cannot follow {stages[i - 1].value}; it may follow "
                                 f"{[s.value for s in stage.valid_predecessor_stages]}")

    def export(self, progress: Optional[Callable[[StageType, float], None]] = None) -> None:
        """Run every stage in order. A failing stage is named in the error; the artifacts of the
        stages before it stay readable with `get_stage_artifacts()`. `progress(stage, seconds)` is
        called after each stage."""
        self._validate_pipeline_sequence(self._pipeline_stages)
        self._stage_to_artifacts.clear()
        artifact = PipelineArtifact(self._model, self._run_context)
        for stage_type in self._pipeline_stages:
            stage = self._stage_registry[stage_type]
            start = time.perf_counter()
            try:
                stage.run(artifact)
            except Exception as e:
                raise ExportError(f"export stage '{stage_type.value}' failed: {e}") from e
            seconds = time.perf_counter() - start
            artifact = stage.get_artifacts()
            artifact.add_context("duration_ms", int(seconds * 1000))
            self._stage_to_artifacts[stage_type] = artifact
            if progress is not None:
                progress(stage_type, seconds)

    def get_stage_artifacts(self) -> Dict[StageType, PipelineArtifact]:
        return self._stage_to_artifacts

    def get_exported_program(self, method_name: str = "forward") -> ExportedProgram:
        artifact = self._stage_to_artifacts.get(StageType.TORCH_EXPORT)
        if artifact is None:
            raise RuntimeError("Exported program is not available: the torch_export stage has not run")
        if method_name not in artifact.data:
            raise KeyError(f"Method name '{method_name}' not found; exported methods: {sorted(artifact.data)}")
        return artifact.data[method_name]

    def get_edge_program_manager(self) -> Any:
        for stage_type in _EDGE_STAGES:
            artifact = self._stage_to_artifacts.get(stage_type)
            if artifact is not None and artifact.data is not None:
                return artifact.data
        raise RuntimeError("Edge program manager is not available: none of the stages "
                           f"{[s.value for s in _EDGE_STAGES]} has run")

    def get_executorch_program_manager(self) -> Any:
        artifact = self._stage_to_artifacts.get(StageType.TO_EXECUTORCH)
        if artifact is None or artifact.data is None:
            raise RuntimeError("Executorch program manager is not initialized: the to_executorch stage has not run")
        return artifact.data

    def get_etrecord(self) -> Any:
        """The ETRecord of the exported program (export with `generate_etrecord=True`); save it with
        `.save(path)` and read it, with the runtime's ETDump, in `executorch.devtools.Inspector`."""
        return self.get_executorch_program_manager().get_etrecord()

    def get_executorch_program(self) -> Any:
        return self.get_executorch_program_manager().executorch_program

    def get_pte_buffer(self) -> bytes:
        return self.get_executorch_program_manager().buffer

    def save_to_pte(self, output_name: str) -> None:
        """Write the program to `output_name` (".pte" appended when missing), atomically."""
        if not output_name:
            raise ValueError("save_to_pte needs a file name, e.g. save_to_pte('model.pte')")
        path = output_name if str(output_name).endswith(".pte") else f"{output_name}.pte"
        self.get_executorch_program_manager().write_to_file(path)

    def get_example_input(self, method_name: str = "forward") -> Tuple[Any, ...]:
        if method_name not in self._example_inputs:
            raise KeyError(f"Method name '{method_name}' not found among the example inputs; methods with "
                           f"inputs: {sorted(self._example_inputs)}")
        samples = self._example_inputs[method_name]
        if not samples:
            raise ValueError(f"Example inputs list for method {method_name} is empty")
        return samples[0]

    def run_method(self, method_name: str = "forward",
                   example_inputs: Optional[Tuple[Any, ...]] = None) -> Sequence[Any]:
        """Run a method of the written program on `executorch.runtime` (default: its first example input)."""
        from executorch.runtime import Runtime, Verification

        program = Runtime.get().load_program(self.get_pte_buffer(), verification=Verification.Minimal)
        inputs = self.get_example_input(method_name) if example_inputs is None else example_inputs
        return program.load_method(method_name).execute(inputs)

    def print_delegation_info(self) -> None:
        """Print, per method, how much of the graph each backend took."""
        artifact = next((self._stage_to_artifacts[s] for s in (StageType.TO_EDGE_TRANSFORM_AND_LOWER,
                                                               StageType.TO_BACKEND)
                         if s in self._stage_to_artifacts), None)
        by_method = artifact.get_context("delegation_info_by_method") if artifact else None
        if not by_method:
            print("No delegation info available")
            return
        for method, info in sorted(by_method.items()):
            print(f"Delegation info for method '{method}':")
            print(info.get_summary(), end="")
            for op in sorted(info.delegation_by_operator.values(), key=lambda b: b.op_type):
                print(f"  {op.op_type}: {op.delegated} delegated, {op.non_delegated} not delegated")
