"""`Partitioner`: tags the nodes of a program that a backend takes over."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch
from torch.export import ExportedProgram

from executorch.exir.backend.compile_spec_schema import CompileSpec


@dataclass
class DelegationSpec:
    """Which backend a partition goes to, and the options its `preprocess` gets."""

    backend_id: str
    compile_specs: list[CompileSpec] = field(default_factory=list)


@dataclass
class PartitionResult:
    """The program with claimed nodes tagged (`node.meta["delegation_tag"] = tag`), and for each
    tag the backend that lowers it."""

    tagged_exported_program: ExportedProgram
    partition_tags: dict[str, DelegationSpec] = field(default_factory=dict)


class Partitioner(ABC):
    """Subclass per backend: `partition` tags nodes; `ops_to_not_decompose` names ops the backend
    wants whole (kept out of the core-ATen decomposition by `to_edge_transform_and_lower`)."""

    def __init__(self, spec: Optional[dict] = None) -> None:
        self._spec = spec or {}

    @property
    def spec(self) -> dict:
        return self._spec

    @abstractmethod
    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        """Tag the nodes this backend takes; return the tags and their DelegationSpecs."""

    def ops_to_not_decompose(
        self, ep: ExportedProgram
    ) -> tuple[list[torch._ops.OpOverload], Optional[Callable[[torch.fx.Node], bool]]]:
        """Ops to keep whole, and an optional filter saying which of their nodes to keep."""
        return [], None
