"""`ExecutorBackend.preprocess`: the partition becomes a whole `.pte` program, its payload."""

from __future__ import annotations

from typing import final

from torch.export import ExportedProgram

from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec


@final
class ExecutorBackend(BackendDetails):
    """Lowers a partition to a nested program with method `forward` (inputs and outputs those of
    the partition); the runtime's ExecutorBackend loads it and runs it on its own kernels.

    Compile specs: `external_constants` (any value) moves the nested program's weights out of the
    payload into named data; other keys are ignored with a warning."""

    @staticmethod
    def preprocess(edge_program: ExportedProgram, compile_specs: list[CompileSpec]) -> PreprocessResult:
        from executorch.exir.backend.compile_spec_schema import read_compile_specs
        from executorch.exir.config import ExecutorchBackendConfig
        from executorch.exir.program import EdgeProgramManager

        specs = read_compile_specs("ExecutorBackend", compile_specs, known=("external_constants",))
        config = ExecutorchBackendConfig(external_constants="external_constants" in specs)
        nested = EdgeProgramManager({"forward": _core_aten(edge_program)}).to_executorch(config)
        store = _external_constants_as_named_data(nested)
        return PreprocessResult(processed_bytes=nested.buffer, debug_handle_map=_event_handles(nested),
                                data_store_output=store)


def _external_constants_as_named_data(nested):
    """The nested program's external weights as the delegate's named data (None if it has none)."""
    from executorch.exir._serialize._named_data_store import NamedDataStore
    from executorch.exir._tensor_data import tensor_bytes

    tables = nested._external_constants
    if not tables:
        return None
    store = NamedDataStore()
    for table in tables.values():
        for fqn, (tensor, layout) in table.items():
            store.add_named_data(fqn, tensor_bytes(tensor.detach().contiguous()), 16, tensor_layout=layout)
    return store.get_named_data_store_output()


def _event_handles(nested) -> dict:
    """Debug handles per delegate event: the runtime names each nested kernel call
    `<op>.<overload>#<instruction>` (op without its namespace), as both engines report it."""
    from executorch.exir import schema

    plan = nested.executorch_program.execution_plan[0]
    out = {}
    for pc, handle in nested.debug_handle_map["forward"].items():
        call = plan.chains[0].instructions[pc].instr_args
        if isinstance(call, schema.KernelCall):
            op = plan.operators[call.op_index]
            out[f"{op.name.split('::')[-1]}.{op.overload}#{pc}"] = (list(handle) if isinstance(handle, list)
                                                                    else [handle])
    return out


def _core_aten(ep: ExportedProgram) -> ExportedProgram:
    """The runtime runs the payload on its portable kernels, so ops a partitioner kept whole
    (ops_to_not_decompose) are lowered to core ATen here."""
    from executorch.exir.dialects.edge._ops import to_aten_targets
    from executorch.exir.passes import decompose, edge
    from executorch.exir.passes._graph import _copy_program, _sync_output_names

    ep = _copy_program(ep)
    to_aten_targets(ep.graph_module)  # the rewrites work on torch operators; to_executorch takes either
    for gm in edge.graph_modules(ep.graph_module):
        decompose.rewrite_to_core_aten(gm)
        edge.to_functional_copies(gm)
        edge.to_dim_order_ops(gm)
        gm.graph.eliminate_dead_code()
        gm.recompile()
    _sync_output_names(ep)
    edge.check_edge_ops(ep.graph_module, "forward")
    return ep
