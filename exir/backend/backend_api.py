"""`to_backend`: lower a whole program to one backend, or the partitions a partitioner tags."""

from __future__ import annotations

import copy
from functools import singledispatch

from torch.export import ExportedProgram

from executorch.exir.backend._lowering import Partition
from executorch.exir.backend.backend_details import PreprocessResult, find_backend
from executorch.exir.backend.partitioner import Partitioner, PartitionResult
from executorch.exir.error import ExportError
from executorch.exir.lowered_backend_module import LoweredBackendModule
from executorch.exir.passes._graph import _copy_program, _copy_program_and_tables


@singledispatch
def to_backend(*args, **kwargs):
    """`to_backend(backend_id, edge_program, compile_specs) -> LoweredBackendModule`, or
    `to_backend(edge_program, partitioner) -> ExportedProgram` with each tagged partition lowered."""
    raise ExportError(
        f"to_backend takes (backend_id: str, edge_program, compile_specs) or (edge_program, partitioner), "
        f"not a {type(args[0]).__name__ if args else 'missing'} first argument"
    )


@to_backend.register(str)
def _(backend_id: str, edge_program: ExportedProgram, compile_specs: list) -> LoweredBackendModule:
    return lower_program(backend_id, edge_program, list(compile_specs), "the whole program")


def lower_program(backend_id: str, edge_program: ExportedProgram, compile_specs: list,
                  partition: str) -> LoweredBackendModule:
    """Run the backend's `preprocess` on one program; a failure names the backend and the partition."""
    backend = find_backend(backend_id)
    try:
        # A backend's preprocess may rewrite the program it is given (Arm's runs its passes on it); the
        # lowered module keeps the edge program as it was, for the ETRecord and for retracing.
        result = backend.preprocess(_copy_program_and_tables(edge_program), compile_specs)
    except ExportError:
        raise
    except Exception as exc:
        raise ExportError(
            f"backend {backend_id!r} failed to preprocess {partition}: {type(exc).__name__}: {exc}; fix the "
            "backend's preprocess or leave these nodes out of the partition"
        ) from exc
    if isinstance(result, (bytes, bytearray)):
        result = PreprocessResult(bytes(result))
    if not isinstance(result, PreprocessResult) or not isinstance(result.processed_bytes, (bytes, bytearray)):
        raise ExportError(
            f"backend {backend_id!r}: preprocess of {partition} returned {type(result).__name__}; it must return "
            "PreprocessResult(processed_bytes=<bytes>)"
        )
    return LoweredBackendModule(edge_program, backend_id, bytes(result.processed_bytes), compile_specs,
                                result.data_store_output, {"debug_handle_map": result.debug_handle_map})


@to_backend.register(ExportedProgram)
def _(edge_program: ExportedProgram, partitioner: Partitioner, method: str = "forward") -> ExportedProgram:
    if not hasattr(partitioner, "partition"):
        raise ExportError(
            f"partitioner {partitioner!r} has no partition(exported_program) method; subclass "
            "executorch.exir.backend.partitioner.Partitioner"
        )
    result = partitioner.partition(_copy_program(edge_program))
    if not isinstance(result, PartitionResult):
        raise ExportError(
            f"{type(partitioner).__name__}.partition returned {type(result).__name__}; return a PartitionResult"
        )
    ep = result.tagged_exported_program
    if not result.partition_tags:
        return ep
    from executorch.exir.passes.edge import graph_modules

    moved: list = []
    # Branches first: a tag inside a torch.cond branch lowers within that branch's graph.
    branches = graph_modules(ep.graph_module)[1:]
    for tag, spec in result.partition_tags.items():
        where = [gm for gm in branches if any(n.meta.get("delegation_tag") == tag for n in gm.graph.nodes)]
        part = Partition(ep, tag, method, where[0] if where else None)
        if not part.nodes:
            continue
        sub = part.exported_program()
        what = (f"partition {tag!r} of method '{method}' ({len(part.nodes)} nodes: "
                f"{', '.join(n.name for n in part.nodes[:4])}{', ...' if len(part.nodes) > 4 else ''})")
        lowered = lower_program(spec.backend_id, sub, list(spec.compile_specs), what)
        part.replace_with(lowered)
        moved += part.moved
    return _without_moved(ep, moved)


def _without_moved(ep: ExportedProgram, moved: list) -> ExportedProgram:
    """The program after its partitions were replaced and their constants moved into them."""
    gone = {node.name for node, _ in moved}
    targets = {spec.target for _, spec in moved}
    ep.graph_module.recompile()
    sig = copy.deepcopy(ep.graph_signature)
    sig.input_specs[:] = [s for s in sig.input_specs if getattr(s.arg, "name", None) not in gone]
    out_node = next(n for n in reversed(ep.graph.nodes) if n.op == "output")
    for spec, arg in zip(sig.output_specs, out_node.args[0]):
        if hasattr(arg, "name") and hasattr(spec.arg, "name"):
            spec.arg.name = arg.name
    return ExportedProgram(
        root=ep.graph_module, graph=ep.graph_module.graph, graph_signature=sig,
        state_dict={k: v for k, v in ep.state_dict.items() if k not in targets},
        range_constraints=ep.range_constraints, module_call_graph=ep.module_call_graph,
        example_inputs=ep.example_inputs,
        constants={k: v for k, v in ep.constants.items() if k not in targets}, verifiers=[ep.verifier],
    )
