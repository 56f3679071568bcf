"""Graph passes of the export pipeline; upstream's names (`MemoryPlanningPass`, `SpecPropPass`, the sym-shape
passes, `dead_code_elimination_pass`) importable here."""

__all__ = ["ConstraintBasedSymShapeEvalPass", "HintBasedSymShapeEvalPass", "MemoryPlanningPass", "SpecPropPass",
           "dead_code_elimination_pass", "make_alloc_node"]


def __getattr__(name: str):
    if name == "MemoryPlanningPass":  # lazily: memory_planning imports passes of this package
        from executorch.exir.memory_planning import MemoryPlanningPass

        return MemoryPlanningPass
    if name == "SpecPropPass":
        from executorch.exir.passes.spec_prop_pass import SpecPropPass

        return SpecPropPass
    if name == "make_alloc_node":
        from executorch.exir.passes._alloc import make_alloc_node

        return make_alloc_node
    if name == "dead_code_elimination_pass":
        from executorch.exir.pass_manager import dead_code_elimination_pass

        return dead_code_elimination_pass
    if name in ("ConstraintBasedSymShapeEvalPass", "HintBasedSymShapeEvalPass"):
        from executorch.exir.passes import sym_shape_eval_pass

        return getattr(sym_shape_eval_pass, name)
    raise AttributeError(f"module 'executorch.exir.passes' has no attribute {name!r}")
