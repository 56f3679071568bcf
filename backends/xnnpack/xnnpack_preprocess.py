"""`XnnpackBackend.preprocess`: one partition's edge program -> the XNNPACK payload and its named weights."""

from __future__ import annotations

from typing import List, final

from torch import fx
from torch.export import ExportedProgram

from executorch.backends.xnnpack._passes import XNNPACK_PASSES
from executorch.backends.xnnpack.operators import visitor_for
from executorch.backends.xnnpack.operators.node_visitor import DEFAULT_DEBUG_HANDLE, XnnGraphBuilder
from executorch.backends.xnnpack.serialization.event_names import event_names
from executorch.backends.xnnpack.serialization.xnnpack_graph_serialize import serialize_xnnpack_binary
from executorch.backends.xnnpack.utils.utils import get_param_tensor, is_param_node
from executorch.exir.dialects.edge._ops import aten_op
from executorch.exir._serialize._named_data_store import NamedDataStore
from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec, read_compile_specs
from executorch.exir.error import ExportError


def _private_graph(ep: ExportedProgram) -> tuple[fx.Graph, dict]:
    """A copy of the partition's graph (the passes edit it; the lowered module keeps the original)
    and its constant placeholders' tensors."""
    graph = fx.Graph()
    env: dict = {}
    out = graph.graph_copy(ep.graph, env)
    graph.output(out)
    for node in graph.nodes:  # the node visitors name torch operators, not their edge ops
        if node.op == "call_function":
            node.target = aten_op(node.target)
    consts = {env[n]: get_param_tensor(ep, n) for n in ep.graph.nodes if n.op == "placeholder" and is_param_node(ep, n)}
    return graph, consts


@final
class XnnpackBackend(BackendDetails):
    """ExecuTorch's CPU backend; its payload is an `XH00`-headed XNNGraph with weights as named data."""

    @staticmethod
    def preprocess(edge_program: ExportedProgram, compile_specs: List[CompileSpec]) -> PreprocessResult:
        # `dqlinear_partitioner` (upstream's dynamic-quantized-linear partitioner sends it) asks that
        # linear patterns be converted to linear, which these passes always do; other keys are not ours.
        read_compile_specs("XnnpackBackend", compile_specs, known=("dqlinear_partitioner",))
        graph, consts = _private_graph(edge_program)
        for rewrite in XNNPACK_PASSES:
            rewrite(graph, consts)
        store = NamedDataStore()
        builder = XnnGraphBuilder(graph, consts, store)
        for node in graph.nodes:
            if node.op != "call_function":
                continue
            visit = visitor_for(node)
            if visit is None:
                raise ExportError(f"XnnpackBackend: node '{node.name}' ({node.target}) has no XNNPACK form; the "
                                  "partitioner should not have claimed it, please report this")
            visit(builder, node)
        xnn_graph = builder.finish()
        payload = serialize_xnnpack_binary(xnn_graph)
        return PreprocessResult(processed_bytes=payload, debug_handle_map=_event_handles(xnn_graph.xnodes),
                                data_store_output=store.get_named_data_store_output())


def _event_handles(xnodes) -> dict:
    """Each node's runtime event name -> the debug handle of the edge node it came from."""
    return {name: [node.debug_handle] for name, node in zip(event_names(xnodes), xnodes)
            if node.debug_handle != DEFAULT_DEBUG_HANDLE}
