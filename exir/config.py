"""Configuration of the two lowering stages: `EdgeCompileConfig` and `ExecutorchBackendConfig`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from .error import ExportError
from .memory_planning import MemoryPlanningPass


@dataclass
class EdgeCompileConfig:
    """Options of `to_edge`: whether to check that every op is in the edge op set, whether to
    keep `clone`/`_to_copy` instead of their dim-order variants, and ops to leave undecomposed."""

    _check_ir_validity: bool = True
    _skip_dim_order: bool = False
    _core_aten_ops_exception_list: list = field(default_factory=list)
    preserve_ops: list = field(default_factory=list)

    def __post_init__(self) -> None:
        for name in ("_check_ir_validity", "_skip_dim_order"):
            if not isinstance(getattr(self, name), bool):
                raise ExportError(f"EdgeCompileConfig.{name} must be True or False, not {getattr(self, name)!r}")


def _power_of_two(name: str, v: Any, optional: bool) -> None:
    if v is None and optional:
        return
    if not isinstance(v, int) or isinstance(v, bool) or v <= 0 or v & (v - 1):
        raise ExportError(f"ExecutorchBackendConfig.{name}={v!r} must be a positive power of two, e.g. 16")


@dataclass
class ExecutorchBackendConfig:
    """Options of `to_executorch`: extra passes, memory planning, and the file's alignments."""

    passes: list = field(default_factory=list)
    memory_planning_pass: MemoryPlanningPass = field(default_factory=MemoryPlanningPass)
    emit_stacktrace: bool = False
    extract_delegate_segments: bool = True
    segment_alignment: int = 128
    constant_tensor_alignment: Optional[int] = None
    delegate_alignment: Optional[int] = None
    external_constants: bool = False

    def __post_init__(self) -> None:
        _power_of_two("segment_alignment", self.segment_alignment, optional=False)
        _power_of_two("constant_tensor_alignment", self.constant_tensor_alignment, optional=True)
        _power_of_two("delegate_alignment", self.delegate_alignment, optional=True)
        if not isinstance(self.memory_planning_pass, MemoryPlanningPass):
            raise ExportError(
                "ExecutorchBackendConfig.memory_planning_pass must be a MemoryPlanningPass, e.g. "
                "MemoryPlanningPass(memory_planning_algo='greedy'); got "
                f"{type(self.memory_planning_pass).__name__}"
            )
