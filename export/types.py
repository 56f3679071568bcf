"""The stages an export pipeline can run, by name."""

from __future__ import annotations

from enum import Enum


class StageType(str, Enum):
    """One step of `ExportSession`'s pipeline; recipes and sessions name stages by these values."""

    SOURCE_TRANSFORM = "source_transform"
    QUANTIZE = "quantize"
    TORCH_EXPORT = "torch_export"
    TO_EDGE_TRANSFORM_AND_LOWER = "to_edge_transform_and_lower"
    TO_EDGE = "to_edge"
    EDGE_PROGRAM_MANAGER_TRANSFORM = "edge_program_manager_transform"
    TO_BACKEND = "to_backend"
    TO_EXECUTORCH = "to_executorch"
