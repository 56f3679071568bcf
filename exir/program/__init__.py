"""Program managers and the export entry points (upstream's `executorch.exir.program`); the code is in `_program`."""

from executorch.exir.program._program import (EdgeProgramManager, ExecutorchProgramManager, to_edge,
                                               to_edge_transform_and_lower, to_edge_with_preserved_ops)

__all__ = ["EdgeProgramManager", "ExecutorchProgramManager", "to_edge", "to_edge_transform_and_lower",
           "to_edge_with_preserved_ops"]
