"""The process-wide table of backend recipe providers, looked up by backend name."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Sequence

from executorch.export.recipe_provider import BackendRecipeProvider

if TYPE_CHECKING:  # recipe.py imports this module
    from executorch.export.recipe import ExportRecipe, RecipeType


class RecipeRegistry:
    """Backend name -> provider; there is one, `recipe_registry`. Importing a backend's recipe types
    registers its provider (`executorch.export` imports the portable one)."""

    _instance: Optional["RecipeRegistry"] = None

    def __new__(cls) -> "RecipeRegistry":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
            cls._instance._providers = {}
            cls._instance._initialized = True
        return cls._instance

    def register_backend_recipe_provider(self, provider: BackendRecipeProvider) -> None:
        if not isinstance(provider, BackendRecipeProvider):
            raise TypeError(f"register_backend_recipe_provider takes a BackendRecipeProvider, "
                            f"got {type(provider).__name__}")
        self._providers[provider.backend_name] = provider

    def _provider(self, backend: str) -> BackendRecipeProvider:
        if backend not in self._providers:
            raise ValueError(f"Backend '{backend}' not available: it has no recipe provider; registered backends: "
                             f"{sorted(self._providers)} (register one with "
                             "recipe_registry.register_backend_recipe_provider)")
        return self._providers[backend]

    def create_recipe(self, recipe_type: RecipeType, backend: str, **kwargs: Any) -> Optional[ExportRecipe]:
        return self._provider(backend).create_recipe(recipe_type, **kwargs)

    def get_supported_recipes(self, backend: str) -> Sequence[RecipeType]:
        return self._provider(backend).get_supported_recipes()

    def list_backends(self) -> Sequence[str]:
        return list(self._providers)


recipe_registry = RecipeRegistry()
