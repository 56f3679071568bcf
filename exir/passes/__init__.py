"""Graph passes of the export pipeline; `MemoryPlanningPass` and `SpecPropPass` are importable here as in ExecuTorch."""

from executorch.exir.memory_planning import MemoryPlanningPass

__all__ = ["MemoryPlanningPass", "SpecPropPass"]


def __getattr__(name: str):
    # SpecPropPass's code ships with the full wheel only (tools/packaging/components.py).
    if name == "SpecPropPass":
        from executorch.exir.passes.spec_prop_pass import SpecPropPass

        return SpecPropPass
    raise AttributeError(f"module 'executorch.exir.passes' has no attribute {name!r}")
