"""`EagerModelFactory.create_model(module, class)`: an example model by its registry entry."""

from __future__ import annotations

import importlib
from typing import Any


class EagerModelFactory:
    @staticmethod
    def create_model(module_name: str, model_class_name: str, **kwargs) -> tuple[Any, tuple, Any, Any]:
        """(eager model, example inputs, example keyword inputs or None, dynamic shapes or None) of the
        EagerModelBase class `model_class_name` in `executorch.examples.models.<module_name>`."""
        module = importlib.import_module(f"{__package__}.{module_name}")
        cls = getattr(module, model_class_name, None)
        if cls is None:
            raise ValueError(f"no model class {model_class_name!r} in executorch.examples.models.{module_name}")
        model = cls(**kwargs)
        kwarg_inputs = model.get_example_kwarg_inputs() if hasattr(model, "get_example_kwarg_inputs") else None
        dynamic = model.get_dynamic_shapes() if hasattr(model, "get_dynamic_shapes") else None
        return model.get_eager_model(), model.get_example_inputs(), kwarg_inputs, dynamic
