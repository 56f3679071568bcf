"""Recipes and staged sessions from a model to a `.pte`: `export(model, inputs, recipe)`."""

from executorch.export import portable_recipes as _portable_recipes  # noqa: F401  (registers it)
from executorch.export.export import ExportSession, export
from executorch.export.recipe import AOQuantizationConfig, ExportRecipe, LoweringRecipe, QuantizationRecipe, RecipeType
from executorch.export.recipe_provider import BackendRecipeProvider
from executorch.export.recipe_registry import recipe_registry
from executorch.export.types import StageType

__all__ = [
    "AOQuantizationConfig", "BackendRecipeProvider", "ExportRecipe", "ExportSession", "LoweringRecipe",
    "QuantizationRecipe", "RecipeType", "StageType", "export", "recipe_registry",
]
