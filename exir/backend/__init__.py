"""The delegation hook: partitioners claim parts of a graph for a backend.

This build defines the interface and runs partitioners; a partitioner that claims nodes needs
a backend with an ahead-of-time `preprocess`, which this package does not ship, so claimed
nodes are reported as an error rather than silently run elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torch.export import ExportedProgram

from ..error import ExportError


@dataclass
class DelegationSpec:
    backend_id: str
    compile_specs: list = field(default_factory=list)


@dataclass
class PartitionResult:
    tagged_exported_program: ExportedProgram
    partition_tags: dict[str, DelegationSpec] = field(default_factory=dict)


class Partitioner:
    """Base class: `partition(ep)` tags nodes (`node.meta["delegation_tag"]`) for a backend."""

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        raise NotImplementedError

    def ops_to_not_decompose(self, ep: ExportedProgram) -> tuple[list, Any]:
        return [], None


def to_backend(ep: ExportedProgram, partitioners: list, method: str) -> ExportedProgram:
    """Run each partitioner over the method; claimed nodes need a backend this build lacks."""
    for p in partitioners:
        if not hasattr(p, "partition"):
            raise ExportError(f"partitioner {p!r} has no partition(exported_program) method; subclass Partitioner")
        result = p.partition(ep)
        ep = result.tagged_exported_program
        if result.partition_tags:
            backends = sorted({spec.backend_id for spec in result.partition_tags.values()})
            raise ExportError(
                f"method '{method}': partitioner {type(p).__name__} delegated nodes to {backends}, but no backend "
                "with that id is available in this build; lower without that partitioner to run on portable kernels"
            )
    return ep
