"""The lowering stages as users drive them: `to_edge` -> `EdgeProgramManager` -> `to_executorch`
-> `ExecutorchProgramManager` (`.buffer`, `.write_to_file`)."""

from __future__ import annotations

import contextlib
import os
from typing import Any, Callable, Iterable, Mapping, Optional, Union

import torch
from torch import fx
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind

from executorch.exir import schema as S
from executorch.exir._edge_verifier import EdgeVerifier
from executorch.exir.config import EdgeCompileConfig, ExecutorchBackendConfig
from executorch.exir.dialects._edge_ops import name_nodes_as_edge_ops, to_edge_targets
from executorch.exir.dialects.edge._ops import to_aten_targets, torch_targets
from executorch.exir.emit._emitter import emit_constant_method, emit_method_with_delegates
from executorch.exir.emit._program_state import ProgramState
from executorch.exir.error import ExportError
from executorch.exir.memory_planning import plan_program
from executorch.exir.passes import (decompose, dim_order, edge, propagate_device_pass, reinplace, sym_ops,
                                    torch_decompose, write_back)
from executorch.exir.passes._graph import (
    _copy_program, _copy_program_and_tables, _sync_output_names, order_inputs_as_decomposed)
from executorch.exir.passes.quant_fusion_pass import quant_fusion_and_const_prop_pass
from executorch.exir.passes.remove_noop_pass import remove_noops

Programs = Union[ExportedProgram, Mapping[str, ExportedProgram]]


def _as_dict(programs: Programs) -> dict[str, ExportedProgram]:
    if isinstance(programs, ExportedProgram):
        return {"forward": programs}
    if isinstance(programs, Mapping) and programs:
        bad = {k: type(v).__name__ for k, v in programs.items() if not isinstance(v, ExportedProgram)}
        if not bad and all(isinstance(k, str) and k for k in programs):
            return dict(programs)
        raise ExportError(
            f"programs must map method names to torch.export.ExportedProgram; got {bad or list(programs)}; "
            "export each method with torch.export.export(module, args) first"
        )
    raise ExportError(
        f"programs must be a torch.export.ExportedProgram or a dict of them, not {type(programs).__name__}; "
        "call torch.export.export(module, example_args) first"
    )


def _to_core_aten(ep: ExportedProgram, config: EdgeCompileConfig) -> ExportedProgram:
    """Core ATen: the direct rewrites, and torch's decomposer on just the nodes they leave; the
    whole graph goes through torch's decomposer only when some node cannot be taken alone."""
    if decompose.inplace_rewrites_sound(ep.graph_module):
        fast = _copy_program(ep)
        order_inputs_as_decomposed(fast)  # as torch's decomposer would leave them
        keep = _keeper(config)
        # Preserved ops no rewrite covers stay as they are, as in torch's own run.
        decomposer = torch_decompose.NodeDecomposer(fast, lambda: _decomposition_table(config), config.preserve_ops)
        decomposer.prefetch(n for n in fast.graph.nodes if n.op == "call_function"
                            and not decompose.has_rewrite(n) and not (keep and keep(n)))
        try:
            left = decompose.rewrite_to_core_aten(fast.graph_module, keep, decomposer)
        except decompose.CannotRewrite:
            left = [None]
        if not [n for n in left if n is None or n.target not in config.preserve_ops]:
            if decomposer.runs or config.preserve_ops:
                # the graph torch's decomposer gives, metadata included
                torch_decompose.as_inference(fast.graph_module)
            return fast
    return _whole_graph_core_aten(ep, config)


def _whole_graph_core_aten(ep: ExportedProgram, config: EdgeCompileConfig) -> ExportedProgram:
    """Core ATen by torch's decomposer retracing the whole graph, then the direct rewrites."""
    slow = ep.run_decompositions(_decomposition_table(config))
    # What torch leaves composite (preserved ops, ops with no decomposition) stays as it is;
    # the edge op check names it if it is not allowed.
    decompose.rewrite_to_core_aten(slow.graph_module, _keeper(config))
    return slow


def _decomposition_table(config: EdgeCompileConfig):
    table = torch.export.default_decompositions()
    for op in config.preserve_ops:
        table.pop(op, None)
    return table


def _keeper(config: EdgeCompileConfig) -> Optional[Callable[[fx.Node], bool]]:
    """Which nodes the direct rewrites leave whole: preserved ops, where their filter agrees."""
    if not config.preserve_ops:
        return None
    ops = set(config.preserve_ops)
    filters = config._preserve_filters

    def keep(node: fx.Node) -> bool:
        f = filters.get(node.target)
        return node.target in ops and (f is None or bool(f(node)))

    return keep


def _user_preserved(config: EdgeCompileConfig) -> frozenset:
    """The ops the user asked to keep whole (a partitioner's kept ops are checked once it has run)."""
    return frozenset(op for op in config.preserve_ops if op not in config._for_partitioner)


def _refuse_training_graph(name: str, ep: ExportedProgram) -> None:
    from torch.export.graph_signature import OutputKind

    training = {OutputKind.LOSS_OUTPUT, OutputKind.GRADIENT_TO_PARAMETER, OutputKind.GRADIENT_TO_USER_INPUT}
    if any(spec.kind in training for spec in ep.graph_signature.output_specs):
        raise ExportError(
            f"method '{name}' is a joint forward/backward (training) graph, which this exporter does not lower; "
            "export the inference module (model.eval(), no _export_forward_backward) instead"
        )


def _constant_inputs(ep: ExportedProgram) -> list[str]:
    kinds = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)
    return [spec.arg.name for spec in ep.graph_signature.input_specs
            if spec.kind in kinds and hasattr(spec.arg, "name")]


def _to_edge_one(name: str, ep: ExportedProgram, config: EdgeCompileConfig) -> ExportedProgram:
    _refuse_training_graph(name, ep)
    ep = _to_core_aten(ep, config)
    gm = ep.graph_module
    for sub in edge.graph_modules(gm):
        if sub is not gm:
            decompose.rewrite_to_core_aten(sub, _keeper(config))
        edge.to_functional_copies(sub)
        remove_noops(sub)
        sym_ops.ne_as_not_eq(sub)
        sym_ops.round_to_int(sub, name)
        sym_ops.sizes_as_tensor_operands(sub)
    dim_order.dense_layouts(gm, _constant_inputs(ep))
    for sub in edge.graph_modules(gm):
        if not config._skip_dim_order:
            edge.to_dim_order_ops(sub)
        edge.check_values(sub, name)
    if config._check_ir_validity:
        edge.check_edge_ops(gm, name, _user_preserved(config) | frozenset(config._core_aten_ops_exception_list))
    gm.graph.eliminate_dead_code()
    to_edge_targets(gm, recompile=False)  # the graph users and vendor passes see calls edge ops (EdgeOpOverload)
    name_nodes_as_edge_ops(gm, recompile=False)
    _sync_output_names(ep)
    for mod in edge.graph_modules(gm):
        mod.recompile()
    return _copy_program(ep, gm, EdgeVerifier)


def _check_constant_methods(constant_methods: Optional[Mapping[str, Any]], methods: Iterable[str]) -> dict:
    if constant_methods is None:
        return {}
    if not isinstance(constant_methods, Mapping):
        raise ExportError(f"constant_methods must be a dict of name -> value, not {type(constant_methods).__name__}")
    clash = set(constant_methods) & set(methods)
    if clash:
        raise ExportError(f"constant method names {sorted(clash)} are also program methods; rename one of them")
    return dict(constant_methods)


def to_edge(programs: Programs, constant_methods: Optional[Mapping[str, Any]] = None,
            compile_config: Optional[EdgeCompileConfig] = None,
            generate_etrecord: bool = False) -> "EdgeProgramManager":
    """Lower exported programs to the edge dialect: core ATen ops, `*_copy` views, checked. With
    `generate_etrecord`, the managers keep what an ETRecord needs (`get_etrecord()`)."""
    progs = _as_dict(programs)
    etrecord = _etrecord_source(progs, generate_etrecord)
    config = compile_config or EdgeCompileConfig()
    if not isinstance(config, EdgeCompileConfig):
        raise ExportError(f"compile_config must be an EdgeCompileConfig, not {type(config).__name__}")
    edge.check_preserve_ops(_user_preserved(config))
    consts = _check_constant_methods(constant_methods, progs)
    manager = EdgeProgramManager({name: _to_edge_one(name, ep, config) for name, ep in progs.items()}, consts, config,
                                 etrecord)
    if etrecord is not None:
        etrecord.record_edge(manager._programs)
    return manager


def _etrecord_source(programs: dict, generate_etrecord: bool):
    if not isinstance(generate_etrecord, bool):
        raise ExportError(f"generate_etrecord must be True or False, not {generate_etrecord!r}")
    if not generate_etrecord:
        return None
    from executorch.exir._etrecord import ETRecordBuilder

    return ETRecordBuilder(programs)


def to_edge_transform_and_lower(
    programs: Programs,
    transform_passes: Optional[Union[list, Mapping[str, list]]] = None,
    partitioner: Optional[Union[list, Mapping[str, list]]] = None,
    constant_methods: Optional[Mapping[str, Any]] = None,
    compile_config: Optional[EdgeCompileConfig] = None,
    generate_etrecord: bool = False,
) -> "EdgeProgramManager":
    """`to_edge`, then the transform passes, then delegation to each partitioner's backend; ops a
    partitioner names in `ops_to_not_decompose` stay whole until it has claimed them. With
    `generate_etrecord`, the managers keep what an ETRecord needs (`get_etrecord()`)."""
    config = compile_config or EdgeCompileConfig()
    keep_config = _preserving(config, partitioner, _as_dict(programs)) if partitioner else None
    manager = to_edge(programs, constant_methods, keep_config or config, generate_etrecord)
    if transform_passes:
        manager = manager.transform(transform_passes)
    if partitioner:
        manager = manager.to_backend(partitioner)
    if keep_config is not None:
        manager = manager._finish_preserved(config, keep_config.preserve_ops)
    return manager


def _preserving(config: EdgeCompileConfig, partitioner, programs: dict) -> Optional[EdgeCompileConfig]:
    """The config that keeps every op a partitioner asks to keep whole (None if none asks)."""
    import dataclasses

    ops: list = []
    filters: dict = {}
    per = _per_method(partitioner, programs)
    for name, ep in programs.items():
        for p in per[name]:
            if not hasattr(p, "ops_to_not_decompose"):
                continue
            got, node_filter = p.ops_to_not_decompose(ep)
            for op in got:
                if not _in_functional_graph(op):
                    continue
                if op not in ops:
                    ops.append(op)
                if node_filter is not None:
                    prev = filters.get(op)
                    filters[op] = node_filter if prev is None else (lambda n, a=prev, b=node_filter: a(n) or b(n))
    if not ops:
        return None
    keep = dataclasses.replace(config, preserve_ops=list(config.preserve_ops) + ops, _check_ir_validity=False)
    keep._preserve_filters = filters
    keep._for_partitioner = frozenset(op for op in ops if op not in config.preserve_ops)
    return keep


def _in_functional_graph(op) -> bool:
    """Whether `op` can be in the functional graph (`run_decompositions({})`) the published stack asks partitioners
    about: in-place ops and the composites torch will not keep (batch_norm, flatten, dropout) are gone from it, so a
    partitioner asking to keep them whole, shown the program as exported, is not followed."""
    from torch._export.utils import _check_valid_to_preserve, _is_cia_op

    if not isinstance(op, torch._ops.OpOverload):
        return True
    return not op._schema.is_mutable and (not _is_cia_op(op) or _check_valid_to_preserve(op))


def _apply_pass(p: Callable, ep: ExportedProgram) -> ExportedProgram:
    result = p(ep.graph_module)
    gm = getattr(result, "graph_module", result)
    if gm is None:
        gm = ep.graph_module
    if not isinstance(gm, fx.GraphModule):
        raise ExportError(
            f"pass {getattr(p, '__name__', p)!r} returned {type(result).__name__}; a pass takes a GraphModule and "
            "returns None (changed in place), a GraphModule, or an object with .graph_module"
        )
    gm.recompile()
    return _copy_program(ep, gm) if gm is not ep.graph_module else ep


def _per_method(arg, methods: Iterable[str]) -> dict[str, list]:
    def as_list(v) -> list:
        return list(v) if isinstance(v, (list, tuple)) else ([] if v is None else [v])

    if isinstance(arg, Mapping):
        return {m: as_list(arg.get(m)) for m in methods}
    return {m: as_list(arg) for m in methods}


class EdgeProgramManager:
    """Edge-dialect programs, one per method, plus constant methods; lower with `to_executorch`."""

    def __init__(self, programs: dict[str, ExportedProgram], constant_methods: Optional[dict] = None,
                 compile_config: Optional[EdgeCompileConfig] = None, etrecord=None):
        from executorch.exir.passes.debug_handle import assign_debug_handles

        for ep in programs.values():
            assign_debug_handles(ep.graph_module)
        self._programs = programs
        self._constant_methods = dict(constant_methods or {})
        self.compile_config = compile_config or EdgeCompileConfig()
        self._etrecord = etrecord  # an ETRecord under construction (generate_etrecord=True)

    def get_etrecord(self):
        """The ETRecord so far: the exported and edge programs (the executorch maps come with
        `to_executorch`); needs `generate_etrecord=True`."""
        if self._etrecord is None:
            raise ExportError(
                "this program has no ETRecord; pass generate_etrecord=True to to_edge or to_edge_transform_and_lower")
        return self._etrecord.for_edge(self._programs)

    @property
    def _edge_programs(self) -> dict[str, ExportedProgram]:
        """The edge program of each method, by name (upstream's attribute of that name)."""
        return self._programs

    @property
    def methods(self) -> set[str]:
        """The program methods; constant methods are in `config_methods`."""
        return set(self._programs)

    @property
    def config_methods(self) -> set[str]:
        """The constant methods (`constant_methods=` of `to_edge`)."""
        return set(self._constant_methods)

    def exported_program(self, method_name: str = "forward") -> ExportedProgram:
        if method_name not in self._programs:
            raise ExportError(f"no method '{method_name}'; methods: {sorted(self._programs)}")
        return self._programs[method_name]

    def transform(self, passes) -> "EdgeProgramManager":
        """Run passes (callables over a GraphModule) on every method, or per method with a dict."""
        per = _per_method(passes, self._programs)
        out = {}
        for name, ep in self._programs.items():
            for p in per[name]:
                ep = _apply_pass(p, ep)
            # a pass that inserted torch operators gets their edge ops, as a retrace would give
            to_edge_targets(ep.graph_module)
            if self.compile_config._check_ir_validity:
                edge.check_edge_ops(ep.graph_module, name, _user_preserved(self.compile_config)
                                    | frozenset(self.compile_config._core_aten_ops_exception_list))
            out[name] = ep
        return EdgeProgramManager(out, self._constant_methods, self.compile_config, self._etrecord)

    def to_backend(self, partitioner) -> "EdgeProgramManager":
        """Delegate the parts each partitioner claims to its backend: one partitioner (or a list) for
        every method, or a dict method -> partitioner(s)."""
        from executorch.exir.backend.backend_api import to_backend

        per = _per_method(partitioner, self._programs)
        out = {}
        for name, ep in self._programs.items():
            for p in per[name]:
                ep = to_backend(ep, p, name)
            out[name] = ep
        return EdgeProgramManager(out, self._constant_methods, self.compile_config, self._etrecord)

    def _finish_preserved(self, config: EdgeCompileConfig, kept: list) -> "EdgeProgramManager":
        """Lower the kept-whole ops no partitioner claimed, then check against `config`."""
        kept = set(kept)
        out = {}
        for name, ep in self._programs.items():
            to_aten_targets(ep.graph_module)  # the rewrites below work on torch operators
            for sub in edge.graph_modules(ep.graph_module):
                decompose.rewrite_to_core_aten(sub, _keeper(config))
                # A custom op (torchao's dequantize of an embedding table, say) stays as to_edge keeps
                # custom ops; an ATen op must become core ATen.
                left = sorted({str(n.target) for n in sub.graph.nodes if n.op == "call_function"
                               and n.target in kept and not edge.is_edge_op(n.target)
                               and n.target not in config.preserve_ops
                               and getattr(n.target, "namespace", "aten") == "aten"})
                if left:
                    raise ExportError(
                        f"method '{name}': {left} were kept whole for a partitioner (ops_to_not_decompose) but "
                        "no partitioner claimed them and they have no direct core-ATen rewrite; claim them in "
                        "the partitioner or drop them from its ops_to_not_decompose"
                    )
                edge.to_functional_copies(sub)
                sym_ops.sizes_as_tensor_operands(sub)
                if not config._skip_dim_order:
                    edge.to_dim_order_ops(sub)
                sub.graph.eliminate_dead_code()
                sub.recompile()
            to_edge_targets(ep.graph_module)
            if config._check_ir_validity:
                edge.check_edge_ops(ep.graph_module, name,
                                    _user_preserved(config) | frozenset(config._core_aten_ops_exception_list))
            out[name] = ep
        return EdgeProgramManager(out, self._constant_methods, config, self._etrecord)

    def to_executorch(self, config: Optional[ExecutorchBackendConfig] = None) -> "ExecutorchProgramManager":
        """Out variants, memory planning and emission: the program a `.pte` file holds."""
        config = config or ExecutorchBackendConfig()
        if not isinstance(config, ExecutorchBackendConfig):
            raise ExportError(f"config must be an ExecutorchBackendConfig, not {type(config).__name__}")
        with contextlib.ExitStack() as stack:
            manager = self._lower_and_emit(config, stack)
        if self._etrecord is not None:
            manager._etrecord = self._etrecord.for_executorch(self._programs, manager)
        return manager

    def _lower_and_emit(self, config: ExecutorchBackendConfig, stack) -> "ExecutorchProgramManager":
        programs = {}
        for name, ep in self._programs.items():
            if config.passes:  # they see edge ops, and may edit the graph: on a copy
                ep = _copy_program_and_tables(ep)
                for p in config.passes:
                    ep = _apply_pass(p, ep)
            # From here on, passes and the emitter work on the torch operators the edge ops stand for;
            # the graph gets its edge ops back when `stack` closes (no copy, no recompile).
            stack.enter_context(torch_targets(ep.graph_module))
            if config.do_quant_fusion_and_const_prop:
                ep = quant_fusion_and_const_prop_pass(_copy_program_and_tables(ep))
            restore = reinplace.has_functionalized_ops(ep.graph_module)
            write = any(spec.kind in write_back.MUTATIONS for spec in ep.graph_signature.output_specs)
            devices = propagate_device_pass.names_a_device(ep.graph_module, name)
            inplace = config.reinplace_ops()
            if restore or write or devices or inplace:
                # these passes edit the graph: on a copy, so the edge program stays as it was
                ep = _copy_program(ep)
                if inplace:
                    ep = reinplace.reinplace_pass(ep, ops_to_inplace=inplace)
                if restore:
                    ep = reinplace.restore_mutating_ops(ep, name)
                if write:
                    write_back.insert_write_back(ep.graph_module, ep.graph_signature)
                if devices:
                    propagate_device_pass.propagate_device(ep.graph_module, config.enable_non_cpu_memory_planning)
            programs[name] = ep
        plan_program(programs, config)  # memory planning, before emission: the emitter reads the plan
        state = ProgramState(config)
        plans, delegate_calls, debug_handles = [], {}, {}
        for name, ep in programs.items():
            emitted, delegate_calls[name], debug_handles[name] = emit_method_with_delegates(name, ep, state)
            plans.append(emitted)
        for p in plans:
            dim_order.check_plan(p)
        plans += [emit_constant_method(name, v, state.constants) for name, v in self._constant_methods.items()]
        program = state.program(plans)
        data_files = state.data_files()
        manager = ExecutorchProgramManager(program, programs, config, delegate_calls, set(self._constant_methods),
                                           data_files, debug_handles, state.external.files)
        return manager


class ExecutorchProgramManager:
    """A lowered program: `.buffer` is the `.pte` file's bytes, `write_to_file` writes them."""

    def __init__(self, program: S.Program, programs: dict[str, ExportedProgram], config: ExecutorchBackendConfig,
                 delegate_calls: Optional[dict] = None, config_methods: Iterable[str] = (),
                 data_files: Optional[dict] = None, debug_handles: Optional[dict] = None,
                 external_constants: Optional[dict] = None):
        self._program = program
        self._external_constants = external_constants or {}  # .ptd name -> {fqn: (tensor, layout)}
        self._debug_handles = debug_handles or {}
        self._etrecord = None  # an ETRecord when the edge program was made with generate_etrecord=True
        self._data_payloads = data_files or {}
        self._programs = programs
        self._config = config
        self._config_methods = set(config_methods)
        self._buffer: Optional[bytes] = None
        self._delegate_calls = delegate_calls or {}

    @property
    def delegate_map(self) -> dict[str, dict[int, dict]]:
        """Per method, per DelegateCall instruction: the backend id and the map its `preprocess`
        returned from the backend's own event ids to debug handles ({} when it returned none)."""
        return {
            method: {pc: {"name": lowered.backend_id, "delegate_map": lowered.meta.get("debug_handle_map") or {}}
                     for pc, lowered in calls}
            for method, calls in self._delegate_calls.items()
        }

    @property
    def _emitter_output(self):
        """The emission's `EmitterOutput`, as upstream's manager keeps it."""
        from executorch.exir.emit._output import emitter_output

        return emitter_output(self.executorch_program, self.debug_handle_map, self.delegate_map, self._delegate_calls,
                              self._external_constants)

    @property
    def debug_handle_map(self) -> dict[str, dict[int, int]]:
        """Per method, per instruction: the debug handle of the edge-graph node it was emitted from."""
        return {method: dict(handles) for method, handles in self._debug_handles.items()}

    def get_etrecord(self):
        """The ETRecord of this program (edge programs, debug and delegate maps); needs
        `generate_etrecord=True` on `to_edge` / `to_edge_transform_and_lower`."""
        if self._etrecord is None:
            raise ExportError(
                "this program has no ETRecord; pass generate_etrecord=True to to_edge or "
                "to_edge_transform_and_lower, then call get_etrecord() on the manager to_executorch returns")
        return self._etrecord

    @property
    def _edge_programs(self) -> dict[str, ExportedProgram]:
        """The edge program of each method, by name (upstream's attribute of that name)."""
        return self._programs

    @property
    def methods(self) -> set[str]:
        """The program methods; constant methods are in `config_methods`."""
        return set(self._programs)

    @property
    def config_methods(self) -> set[str]:
        """The constant methods the `.pte` holds beside the program methods."""
        return set(self._config_methods)

    def dump_executorch_program(self, verbose: bool = False, out=None) -> None:
        """Print the emitted `Program`: every field when `verbose`, else one line per method and
        instruction."""
        from executorch.exir.print_program import pretty_print, print_program

        (pretty_print if verbose else print_program)(self._program, out=out)

    def save(self, path) -> None:
        """Write the `.pte` to `path`, which must end in `.pte` (atomically, like `write_to_file`)."""
        if not os.fspath(path).endswith(".pte"):
            raise ValueError(f"save() path {os.fspath(path)!r} does not end in .pte; name the file model.pte")
        self.write_to_file(path)

    @property
    def executorch_program(self) -> S.Program:
        return self._program

    def exported_program(self, method_name: str = "forward") -> ExportedProgram:
        if method_name not in self._programs:
            raise ExportError(f"no method '{method_name}'; methods: {sorted(self._programs)}")
        return self._programs[method_name]

    def _chunks(self) -> list:
        from executorch.exir._serialize import DEFAULT_CONSTANT_TENSOR_ALIGNMENT, serialize_pte_chunks

        c = self._config
        return serialize_pte_chunks(
            self._program,
            segment_alignment=c.segment_alignment,
            constant_tensor_alignment=c.constant_tensor_alignment or DEFAULT_CONSTANT_TENSOR_ALIGNMENT,
            delegate_alignment=c.delegate_alignment,
        )

    @property
    def buffer(self) -> bytes:
        """The `.pte` file's bytes."""
        if self._buffer is None:
            from executorch.exir._serialize._join import join_bytes

            self._buffer = join_bytes(self._chunks())
        return self._buffer

    def write_to_file(self, f) -> None:
        """Write the `.pte` to an open binary file, or to a path (atomically: a failed write
        leaves no file behind)."""
        from executorch.exir._serialize._atomic import write_chunks

        write_chunks(f, [self._buffer] if self._buffer is not None else self._chunks())

    def _ptd_chunks(self, name: str) -> list:
        from executorch.exir._serialize._flat_tensor import serialize_ptd_chunks

        return serialize_ptd_chunks(self._data_payloads[name], self._config.segment_alignment)

    @property
    def data_files(self) -> dict[str, bytes]:
        """Per `.ptd` file name (without extension): its bytes. Empty unless constants or named data
        were placed outside the `.pte` (`ExecutorchBackendConfig(external_constants=...)`)."""
        from executorch.exir._serialize._join import join_bytes

        return {name: join_bytes(self._ptd_chunks(name)) for name in self._data_payloads}

    @property
    def _tensor_data(self) -> dict:
        """Per `.ptd` file name: its bytes as a `Cord` (`bytes(cord)`, `cord.write_to_file(f)`), as
        ExecuTorch's manager keeps them; empty when nothing was placed outside the `.pte`."""
        from executorch.exir._serialize._cord import Cord

        return {name: Cord(self._ptd_chunks(name)) for name in self._data_payloads}

    def write_tensor_data_to_file(self, outdir) -> None:
        """Write each `.ptd` file as `outdir/<name>.ptd`, streaming tensor data from its storage
        (atomically per file)."""
        from executorch.exir._serialize._atomic import write_chunks

        for name in self._data_payloads:
            write_chunks(os.path.join(os.fspath(outdir), f"{name}.ptd"), self._ptd_chunks(name))


def to_edge_with_preserved_ops(programs: Programs, constant_methods: Optional[Mapping[str, Any]] = None,
                               compile_config: Optional[EdgeCompileConfig] = None,
                               preserve_ops: Iterable[torch._ops.OpOverload] = ()) -> "EdgeProgramManager":
    """`to_edge` keeping `preserve_ops` whole (ExecuTorch's earlier spelling of
    `EdgeCompileConfig(preserve_ops=...)`; the ops are added to the config's own)."""
    import dataclasses

    config = compile_config or EdgeCompileConfig()
    if not isinstance(config, EdgeCompileConfig):
        raise ExportError(f"compile_config must be an EdgeCompileConfig, not {type(config).__name__}")
    if isinstance(preserve_ops, torch._ops.OpOverload):
        preserve_ops = (preserve_ops,)
    ops = list(config.preserve_ops) + [op for op in preserve_ops if op not in config.preserve_ops]
    return to_edge(programs, constant_methods, dataclasses.replace(config, preserve_ops=ops))


from executorch.exir.program._transform import _transform, lift_constant_tensor_pass  # noqa: E402,F401  (vendor pass managers import them here)
from executorch.exir._program_utils import _get_updated_graph_signature  # noqa: E402,F401  (Vulkan's passes import it here)
