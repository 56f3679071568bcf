"""Graph passes of the export pipeline; `MemoryPlanningPass` and `SpecPropPass` are importable here as in ExecuTorch."""

from executorch.exir.memory_planning import MemoryPlanningPass
from executorch.exir.passes.spec_prop_pass import SpecPropPass

__all__ = ["MemoryPlanningPass", "SpecPropPass"]
