"""Configuration of the two lowering stages: `EdgeCompileConfig` and `ExecutorchBackendConfig`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

from executorch.exir._serialize._alignment import DEFAULT_SEGMENT_ALIGNMENT, is_power_of_two
from executorch.exir.error import ExportError
from executorch.exir.memory_planning import MemoryPlanningPass


@dataclass
class EdgeCompileConfig:
    """Options of `to_edge`: whether to check that every op is in the edge op set, whether to
    keep `clone`/`_to_copy` instead of their dim-order variants, and ops to leave undecomposed."""

    _check_ir_validity: bool = True
    _skip_dim_order: bool = False
    _core_aten_ops_exception_list: list = field(default_factory=list)
    preserve_ops: list = field(default_factory=list)
    # Set by to_edge_transform_and_lower on the config it derives from a partitioner's
    # ops_to_not_decompose, never by users: the per-op node filters, and which preserve_ops came
    # from the partitioner (checked once it has claimed them) rather than from the user.
    _preserve_filters: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    _for_partitioner: frozenset = field(default=frozenset(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("_check_ir_validity", "_skip_dim_order"):
            if not isinstance(getattr(self, name), bool):
                raise ExportError(f"EdgeCompileConfig.{name} must be True or False, not {getattr(self, name)!r}")
        import torch

        bad = [op for op in self._core_aten_ops_exception_list if not isinstance(op, torch._ops.OpOverload)]
        if bad:
            raise ExportError(
                f"EdgeCompileConfig._core_aten_ops_exception_list holds {bad[0]!r}, not an operator overload; list "
                "ops such as torch.ops.aten.linalg_vector_norm.default that the edge op check should let through")


def _refuse(name: str, value: Any, supported: Any, why: str) -> None:
    if value != supported:
        raise ExportError(f"ExecutorchBackendConfig.{name}={value!r} is not supported: {why}")


def _power_of_two(name: str, v: Any, optional: bool) -> None:
    if v is None and optional:
        return
    if not is_power_of_two(v):
        raise ExportError(f"ExecutorchBackendConfig.{name}={v!r} must be a positive power of two, e.g. 16")


def _check_device_config(config: Any) -> None:
    from executorch.exir.passes.propagate_device_config import PropagateDeviceConfig

    per_method = config.values() if isinstance(config, dict) else [config]
    for c in per_method:
        if c is None:
            continue
        if not isinstance(c, PropagateDeviceConfig):
            raise ExportError(
                "ExecutorchBackendConfig.propagate_device_config must be a PropagateDeviceConfig "
                f"(executorch.exir.passes.propagate_device_pass) or a dict of method name -> one, "
                f"not {type(c).__name__}")
        for name in ("skip_h2d_for_method_inputs", "skip_d2h_for_method_outputs"):
            value = getattr(c, name)
            if any((value.values() if isinstance(value, dict) else [value])):
                raise ExportError(
                    f"PropagateDeviceConfig.{name}={value!r} is not supported: it hands device memory to the caller, "
                    "which the runtimes here cannot bind (inputs and outputs always get planned memory); "
                    "leave it False")


def _check_sym_shape_eval(value: Any) -> None:
    given = [v for v in (value.values() if isinstance(value, dict) else [value]) if v is not None]
    if not given:
        return
    from executorch.exir.passes.sym_shape_eval_pass import ConstraintBasedSymShapeEvalPass

    for v in given:
        if not isinstance(v, ConstraintBasedSymShapeEvalPass):
            raise ExportError(
                f"ExecutorchBackendConfig.sym_shape_eval_pass={v!r} is not supported: dynamic shapes are planned at "
                "their upper bounds; pass None or ConstraintBasedSymShapeEvalPass() "
                "(executorch.exir.passes.sym_shape_eval_pass), or a dict of method name -> one")


@dataclass
class ExecutorchBackendConfig:
    """Options of `to_executorch`: extra passes, memory planning, and the file's alignments."""

    passes: list = field(default_factory=list)
    memory_planning_pass: MemoryPlanningPass = field(default_factory=MemoryPlanningPass)
    emit_stacktrace: bool = False
    extract_delegate_segments: bool = True
    segment_alignment: int = DEFAULT_SEGMENT_ALIGNMENT
    constant_tensor_alignment: Optional[int] = None
    delegate_alignment: Optional[int] = None
    # True: every parameter and buffer goes to `_default_external_constant.ptd`; a callable gets
    # each parameter/buffer placeholder node and returns a file name (str), True (the default
    # file), or None/False (stays in the .pte).
    external_constants: Union[bool, Callable[[Any], Union[str, bool, None]]] = False
    # True (ExecuTorch's default): a view copy the runtime can read in place becomes a view of its base's
    # memory (no instruction; an et_view over symbolic sizes). False: every view copy is a kernel call.
    remove_view_copy: bool = True
    emit_mutable_buffer_names: bool = False
    sym_shape_eval_pass: Any = None
    external_mutable_weights: bool = False
    # True: each method first gets `quant_fusion_and_const_prop_pass` (exir/passes/quant_fusion_pass.py).
    do_quant_fusion_and_const_prop: bool = False
    # Delegates whose compile specs name a `target_device` get host/device copies around them, and
    # their side of the copies is planned in device memory (False: only marked, planned on the host).
    propagate_device_config: Any = None
    enable_non_cpu_memory_planning: bool = True
    # True (or extra ops named): `reinplace_pass` (exir/passes/reinplace.py) writes index_put, and the
    # extra ops, into their input's memory where that input is dead afterwards.
    run_reinplace_pass: bool = False
    reinplace_extra_ops: Optional[frozenset] = None

    def __post_init__(self) -> None:
        _check_sym_shape_eval(self.sym_shape_eval_pass)
        if not isinstance(self.external_constants, bool) and not callable(self.external_constants):
            raise ExportError(
                f"ExecutorchBackendConfig.external_constants={self.external_constants!r} must be True, False or a "
                "callable(node) returning a .ptd file name, True or None")
        _refuse("external_mutable_weights", self.external_mutable_weights, False,
                "training programs (the only ones with mutable weights) are not lowered here; pass "
                "external_mutable_weights=False (external_constants moves weights to a .ptd)")
        _check_device_config(self.propagate_device_config)
        if self.reinplace_extra_ops is not None:
            import torch

            ops = self.reinplace_extra_ops
            if isinstance(ops, (str, bytes)) or not all(isinstance(op, torch._ops.OpOverload) for op in ops):
                raise ExportError(
                    f"ExecutorchBackendConfig.reinplace_extra_ops={ops!r} must be a set of operator overloads, e.g. "
                    "frozenset({torch.ops.aten.add.Tensor})")
            self.reinplace_extra_ops = frozenset(ops)
        for name in ("emit_stacktrace", "extract_delegate_segments", "enable_non_cpu_memory_planning",
                     "do_quant_fusion_and_const_prop", "run_reinplace_pass"):
            if not isinstance(getattr(self, name), bool):
                raise ExportError(f"ExecutorchBackendConfig.{name} must be True or False, not {getattr(self, name)!r}")
        _power_of_two("segment_alignment", self.segment_alignment, optional=False)
        _power_of_two("constant_tensor_alignment", self.constant_tensor_alignment, optional=True)
        _power_of_two("delegate_alignment", self.delegate_alignment, optional=True)
        passes = self.memory_planning_pass
        per_method = passes.values() if isinstance(passes, dict) else [passes]
        if not all(isinstance(p, MemoryPlanningPass) for p in per_method):
            raise ExportError(
                "ExecutorchBackendConfig.memory_planning_pass must be a MemoryPlanningPass, e.g. "
                "MemoryPlanningPass(memory_planning_algo='greedy'), or a dict of method name -> MemoryPlanningPass; "
                f"got {type(self.memory_planning_pass).__name__}"
            )

    def reinplace_ops(self) -> frozenset:
        """The ops `to_executorch` writes in place (none unless run_reinplace_pass or reinplace_extra_ops)."""
        if not (self.run_reinplace_pass or self.reinplace_extra_ops):
            return frozenset()
        from executorch.exir.passes.reinplace import DEFAULT_INPLACEABLE_OPS

        return DEFAULT_INPLACEABLE_OPS | (self.reinplace_extra_ops or frozenset())

    def memory_planning_pass_for(self, method: str) -> MemoryPlanningPass:
        """The memory planning of `method`: its entry in a per-method dict, else the default."""
        passes = self.memory_planning_pass
        if isinstance(passes, dict):
            return passes.get(method) or MemoryPlanningPass()
        return passes
