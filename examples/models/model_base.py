"""`EagerModelBase`: the interface `EagerModelFactory` builds example models through."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any


class EagerModelBase(ABC):
    """An example model: the eager module and the inputs to export it with."""

    @abstractmethod
    def get_eager_model(self) -> Any:
        """The module, in eval mode."""

    @abstractmethod
    def get_example_inputs(self) -> tuple:
        """Positional example inputs."""
