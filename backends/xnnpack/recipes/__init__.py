"""XNNPACK's export recipes (`XNNPackRecipeType`); importing this package registers their provider."""

from executorch.backends.xnnpack.recipes.xnnpack_recipe_provider import XNNPACKRecipeProvider
from executorch.backends.xnnpack.recipes.xnnpack_recipe_types import XNNPackRecipeType
from executorch.export.recipe_registry import recipe_registry

recipe_registry.register_backend_recipe_provider(XNNPACKRecipeProvider())

__all__ = ["XNNPACKRecipeProvider", "XNNPackRecipeType"]
