"""The interface a backend implements to hand out its export recipes."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Optional, Sequence

if TYPE_CHECKING:  # recipe.py -> recipe_registry.py -> here
    from executorch.export.recipe import ExportRecipe, RecipeType


class BackendRecipeProvider(ABC):
    """A backend's recipe factory, registered with `recipe_registry`."""

    @property
    @abstractmethod
    def backend_name(self) -> str:
        """The name recipe types of this backend return from `get_backend_name()`."""

    @abstractmethod
    def get_supported_recipes(self) -> Sequence[RecipeType]:
        """The recipe types `create_recipe` accepts."""

    @abstractmethod
    def create_recipe(self, recipe_type: RecipeType, **kwargs: Any) -> Optional[ExportRecipe]:
        """The recipe for `recipe_type` (kwargs tune it), or None when this backend has none."""

    def supports_recipe(self, recipe_type: RecipeType) -> bool:
        return recipe_type in self.get_supported_recipes()
