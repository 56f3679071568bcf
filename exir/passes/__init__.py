"""Graph passes of the export pipeline; `MemoryPlanningPass` is importable here as in ExecuTorch."""

from executorch.exir.memory_planning import MemoryPlanningPass

__all__ = ["MemoryPlanningPass"]
