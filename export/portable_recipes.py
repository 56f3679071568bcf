"""The recipes of the portable kernel library (no delegate): fp32, and int8 via pt2e."""

from __future__ import annotations

from typing import Any, Optional, Sequence

from executorch.export.recipe import ExportRecipe, QuantizationRecipe, RecipeType
from executorch.export.recipe_provider import BackendRecipeProvider


class PortableRecipeType(RecipeType):
    """Recipes that run on the portable kernels of every runtime."""

    FP32 = "portable_fp32"
    INT8 = "portable_int8"  # static int8: per-channel weights, per-tensor activations

    @classmethod
    def get_backend_name(cls) -> str:
        return "portable"


class PortableRecipeProvider(BackendRecipeProvider):
    """Makes `PortableRecipeType` recipes; INT8 needs torchao (its pt2e flow) installed."""

    @property
    def backend_name(self) -> str:
        return "portable"

    def get_supported_recipes(self) -> Sequence[RecipeType]:
        return list(PortableRecipeType)

    def create_recipe(self, recipe_type: RecipeType, **kwargs: Any) -> Optional[ExportRecipe]:
        if recipe_type not in self.get_supported_recipes():
            return None
        if recipe_type is PortableRecipeType.FP32:
            _no_kwargs(recipe_type, kwargs)
            return ExportRecipe(name=recipe_type.value)
        from executorch.export._torchao import require_torchao

        require_torchao(f"recipe {recipe_type.value}")
        from executorch.export.quantizer import Int8Quantizer

        return ExportRecipe(name=recipe_type.value,
                            quantization_recipe=QuantizationRecipe(quantizers=[Int8Quantizer(**kwargs)]))


def _no_kwargs(recipe_type: RecipeType, kwargs: dict) -> None:
    if kwargs:
        raise ValueError(f"recipe {recipe_type.value} takes no options; got {sorted(kwargs)}")


def _register() -> None:
    from executorch.export.recipe_registry import recipe_registry

    recipe_registry.register_backend_recipe_provider(PortableRecipeProvider())


_register()
