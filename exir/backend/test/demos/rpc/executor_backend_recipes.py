"""ExecutorBackend's export recipes, handed out through the recipe registry like any backend's."""

from __future__ import annotations

from typing import Any, Optional, Sequence

from executorch.export import BackendRecipeProvider, ExportRecipe, LoweringRecipe, RecipeType, recipe_registry


class ExecutorBackendRecipeType(RecipeType):
    """Recipes that delegate to ExecutorBackend (a nested .pte the runtime runs itself)."""

    FP32 = "executor_backend_fp32"

    @classmethod
    def get_backend_name(cls) -> str:
        return "executor_backend"


class ExecutorBackendRecipeProvider(BackendRecipeProvider):
    """FP32: every operator node delegated (or, with `ops=[...]`, the nodes of those ops)."""

    @property
    def backend_name(self) -> str:
        return "executor_backend"

    def get_supported_recipes(self) -> Sequence[RecipeType]:
        return list(ExecutorBackendRecipeType)

    def create_recipe(self, recipe_type: RecipeType, **kwargs: Any) -> Optional[ExportRecipe]:
        if recipe_type is not ExecutorBackendRecipeType.FP32:
            return None
        unknown = set(kwargs) - {"ops"}
        if unknown:
            raise ValueError(f"recipe {recipe_type.value} takes only 'ops'; got {sorted(unknown)}")
        from executorch.exir.backend.test.demos.rpc.executor_backend_partitioner import ExecutorBackendPartitioner

        return ExportRecipe(name=recipe_type.value,
                            lowering_recipe=LoweringRecipe(partitioners=[ExecutorBackendPartitioner(kwargs.get("ops"))]))


recipe_registry.register_backend_recipe_provider(ExecutorBackendRecipeProvider())
