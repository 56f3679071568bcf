"""ExecuTorch's internal module paths that vendor backends and tools import, used as upstream's tests use them."""

from __future__ import annotations

import pytest
import torch

from executorch.exir.dialects.edge._ops import aten_op
from executorch.devtools.compare import assert_outputs_close
from executorch.exir import EdgeCompileConfig, to_edge
from executorch.runtime.python_backend import PythonBackend

from conftest import project_runtimes  # noqa: E402

RUNTIMES = project_runtimes()


class _Linear(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.fc(x))


class _MmAdd(torch.nn.Module):
    def forward(self, a, x, b):
        return a @ x + b


def _run(runtime, pte: bytes, inputs) -> list:
    return runtime.load_program(pte).load_method("forward").execute(list(inputs))


def _count(gm: torch.fx.GraphModule, target) -> int:
    # an edge op counts as the torch operator it stands for
    return sum(1 for n in gm.graph.nodes if n.op == "call_function" and aten_op(n.target) == aten_op(target))


# --- executorch.exir.program._program ----------------------------------------------------------

def test_program_module_path_holds_the_entry_points():
    import executorch.exir as exir
    from executorch.exir.program import _program

    for name in ("to_edge", "to_edge_transform_and_lower", "to_edge_with_preserved_ops", "EdgeProgramManager",
                 "ExecutorchProgramManager"):
        assert getattr(_program, name) is getattr(exir, name)


def test_to_edge_with_preserved_ops_keeps_linear_whole_and_runs():
    from executorch.exir.program._program import to_edge_with_preserved_ops

    model, x = _Linear().eval(), torch.randn(2, 4)
    ep = torch.export.export(model, (x,))
    linear = torch.ops.aten.linear.default
    assert _count(ep.graph_module, linear) == 1
    kept = to_edge_with_preserved_ops(ep, preserve_ops=(linear,))
    assert _count(kept.exported_program().graph_module, linear) == 1
    # without the option, to_edge decomposes linear: the count above is the option's doing
    assert _count(to_edge(torch.export.export(model, (x,))).exported_program().graph_module, linear) == 0
    (out,) = _run(RUNTIMES["python"], kept.to_executorch().buffer, (x,))
    assert_outputs_close([out], [model(x)])
    with pytest.raises(Exception, match="compile_config must be an EdgeCompileConfig"):
        to_edge_with_preserved_ops(ep, compile_config="strict", preserve_ops=(linear,))


# --- executorch.exir.capture._config -----------------------------------------------------------

def test_capture_config_path_is_the_same_config():
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.capture import EdgeCompileConfig as CaptureEdge
    from executorch.exir.capture._config import EdgeCompileConfig as Edge, ExecutorchBackendConfig as Backend

    assert Edge is CaptureEdge is EdgeCompileConfig and Backend is ExecutorchBackendConfig
    model, x = _Linear().eval(), torch.randn(2, 4)
    pm = to_edge(torch.export.export(model, (x,)), compile_config=Edge(_check_ir_validity=True)).to_executorch(
        Backend(segment_alignment=64))
    (out,) = _run(RUNTIMES["python"], pm.buffer, (x,))
    assert_outputs_close([out], [model(x)])


def test_sym_shape_eval_pass_constraint_based_is_honoured_hint_based_refused():
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.error import ExportError
    from executorch.exir.passes.sym_shape_eval_pass import (ConstraintBasedSymShapeEvalPass,
                                                            HintBasedSymShapeEvalPass)

    model, x = _Linear().eval(), torch.randn(5, 4)
    ep = torch.export.export(model, (x,), dynamic_shapes=({0: torch.export.Dim("n", max=8)},))
    edge = to_edge(ep)
    base = edge.to_executorch().buffer
    for choice in (ConstraintBasedSymShapeEvalPass(), {"forward": ConstraintBasedSymShapeEvalPass()}):
        assert edge.to_executorch(ExecutorchBackendConfig(sym_shape_eval_pass=choice)).buffer == base
    with pytest.raises(ExportError, match="ExecutorchBackendConfig.sym_shape_eval_pass="):
        ExecutorchBackendConfig(sym_shape_eval_pass=HintBasedSymShapeEvalPass())


# --- executorch.exir.emit.emit_program ---------------------------------------------------------

def test_emit_program_gives_the_program_to_executorch_writes():
    from executorch.exir._serialize._program import PTEFile, serialize_pte_binary
    from executorch.exir.emit import EmitterOutput, emit_program

    model, x = _Linear().eval(), torch.randn(2, 4)
    edge = to_edge(torch.export.export(model, (x,)))
    out = emit_program(edge.exported_program())
    assert isinstance(out, EmitterOutput)
    assert [p.name for p in out.program.execution_plan] == ["forward"]
    assert out.debug_handle_map["forward"] and out.method_to_delegate_debug_id_map == {"forward": {}}
    data = serialize_pte_binary(pte_file=PTEFile(out.program))
    assert data == edge.to_executorch().buffer
    (y,) = _run(RUNTIMES["python"], data, (x,))
    assert_outputs_close([y], [model(x)])
    with_getter = emit_program({"forward": edge.exported_program()}, prim_getters={"get_n": 3})
    assert [p.name for p in with_getter.program.execution_plan] == ["forward", "get_n"]


# --- executorch.exir.passes --------------------------------------------------------------------

def test_spec_prop_pass_gives_every_value_a_tensor_spec():
    from executorch.exir.passes import SpecPropPass
    from executorch.exir.tensor import TensorSpec

    class TopK(torch.nn.Module):
        def forward(self, x):
            values, indices = torch.topk(x, 2)
            return values * 2, indices

    gm = to_edge(torch.export.export(TopK(), (torch.randn(3, 5),))).exported_program().graph_module
    result = SpecPropPass()(gm)
    assert result.modified
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "call_function") and isinstance(node.meta.get("val"), torch.Tensor):
            spec = node.meta["spec"]
            assert isinstance(spec, TensorSpec)
            assert list(spec.shape) == list(node.meta["val"].shape) and spec.dtype == node.meta["val"].dtype
    topk = next(n for n in gm.graph.nodes if n.op == "call_function" and "topk" in str(n.target))
    getitems = [u for u in topk.users]
    assert {id(u.meta["spec"]) for u in getitems} == {id(s) for s in topk.meta["spec"]}
    assert topk.meta["spec"][1].dtype == torch.int64


def test_sym_shape_eval_passes_make_specs_concrete():
    from executorch.exir.passes import SpecPropPass
    from executorch.exir.passes.sym_shape_eval_pass import (ConstraintBasedSymShapeEvalPass,
                                                            HintBasedSymShapeEvalPass)

    def specs(pass_):
        ep = torch.export.export(_Linear().eval(), (torch.randn(5, 4),),
                                 dynamic_shapes=({0: torch.export.Dim("n", max=8)},))
        gm = to_edge(ep).exported_program().graph_module
        SpecPropPass()(gm)
        pass_(gm)
        return [n.meta["spec"] for n in gm.graph.nodes if n.name == "x"][0]

    assert specs(ConstraintBasedSymShapeEvalPass()).shape == [8, 4]
    assert specs(HintBasedSymShapeEvalPass()).shape == [5, 4]
    assert specs(ConstraintBasedSymShapeEvalPass()).stride == (4, 1)


def test_constant_prop_pass_folds_weight_only_work():
    from executorch.exir.passes.constant_prop_pass import constant_prop_pass

    class Folded(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(4, 4))

        def forward(self, x):
            return x @ (self.w.t() * 2.0)

    model, x = Folded().eval(), torch.randn(2, 4)
    edge = to_edge(torch.export.export(model, (x,)))
    before = edge.exported_program()
    assert _count(before.graph_module, torch.ops.aten.mul.Tensor) == 1
    folded = constant_prop_pass(before)
    assert _count(folded.graph_module, torch.ops.aten.mul.Tensor) == 0
    from executorch.exir import EdgeProgramManager

    pm = EdgeProgramManager({"forward": folded}).to_executorch()
    (out,) = _run(RUNTIMES["python"], pm.buffer, (x,))
    assert_outputs_close([out], [model(x)])


def test_quant_fusion_pass_is_a_graph_pass():
    from torch.fx.passes.infra.pass_base import PassResult

    from executorch.exir.passes.quant_fusion_pass import QuantFusionPass

    gm = to_edge(torch.export.export(_Linear().eval(), (torch.randn(2, 4),))).exported_program().graph_module
    nodes = [str(n.target) for n in gm.graph.nodes]
    result = QuantFusionPass()(gm)
    assert isinstance(result, PassResult) and not result.modified  # no quantized pattern in a float graph
    assert [str(n.target) for n in result.graph_module.graph.nodes] == nodes


class _Scatter(torch.nn.Module):
    def forward(self, x, idx, v):
        y = x * 2.0
        return torch.index_put(y, (idx,), v)


class _ScatterKeepsOld(torch.nn.Module):
    def forward(self, x, idx, v):
        y = x * 2.0
        return torch.index_put(y, (idx,), v) + y


def test_reinplace_pass_writes_index_put_in_place_only_when_safe():
    from executorch.exir.passes.reinplace import reinplace_pass

    inputs = (torch.randn(4, 3), torch.tensor([0, 2]), torch.randn(2, 3))
    edge = to_edge(torch.export.export(_Scatter(), inputs))
    ep = reinplace_pass(edge.exported_program())
    assert _count(ep.graph_module, torch.ops.aten.index_put_.default) == 1
    assert _count(ep.graph_module, torch.ops.aten.index_put.default) == 0
    pm = edge.to_executorch()
    operators = [(op.name, op.overload) for op in pm.executorch_program.execution_plan[0].operators]
    assert ("aten::index_put_", "") in operators and ("aten::index_put", "out") not in operators
    for runtime in RUNTIMES.values():
        (out,) = _run(runtime, pm.buffer, inputs)
        assert_outputs_close([out], [_Scatter()(*inputs)])
    # here the copy's source is read afterwards, so writing it in place would change the result
    kept = reinplace_pass(to_edge(torch.export.export(_ScatterKeepsOld(), inputs)).exported_program())
    assert _count(kept.graph_module, torch.ops.aten.index_put_.default) == 0


class _Cache(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("k", torch.zeros(4, 3))

    def forward(self, idx, v):
        self.k[idx] = v
        return self.k * 1.0


def test_run_reinplace_pass_updates_a_cache_buffer_in_place():
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.error import ExportError

    calls = [(torch.tensor([1, 3]), torch.randn(2, 3)), (torch.tensor([0, 3]), torch.randn(2, 3))]
    edge = to_edge(torch.export.export(_Cache(), calls[0]))

    def operators(pm):
        return {(op.name, op.overload) for op in pm.executorch_program.execution_plan[0].operators}

    plain = edge.to_executorch()
    assert {("aten::index_put", "out"), ("aten::copy_", "")} <= operators(plain)
    for config in (ExecutorchBackendConfig(run_reinplace_pass=True),
                   ExecutorchBackendConfig(reinplace_extra_ops=frozenset({torch.ops.aten.mul.Tensor}))):
        pm = edge.to_executorch(config)
        ops = operators(pm)
        assert ("aten::index_put_", "") in ops and ("aten::index_put", "out") not in ops
        assert ("aten::copy_", "") not in ops  # the op wrote the buffer: no write-back copy
        for runtime in RUNTIMES.values():
            eager, method = _Cache(), runtime.load_program(pm.buffer).load_method("forward")
            for idx, v in calls:  # the buffer keeps its rows across calls
                assert_outputs_close(method.execute([idx, v]), [eager(idx, v)])
    assert ("aten::index_put", "out") in operators(edge.to_executorch())  # the edge program is unchanged
    with pytest.raises(ExportError, match="ExecutorchBackendConfig.reinplace_extra_ops="):
        ExecutorchBackendConfig(reinplace_extra_ops={"aten::add"})
    with pytest.raises(ExportError, match="ExecutorchBackendConfig.run_reinplace_pass must be True or False"):
        ExecutorchBackendConfig(run_reinplace_pass="yes")


# --- executorch.exir.memory_planning -----------------------------------------------------------

def _buffers():
    from executorch.exir.memory_planning import Buffer

    return [Buffer(64, 0, 1), Buffer(64, 2, 3), Buffer(32, 1, 2), Buffer(16, 0, 3)]


def test_algorithm_suite_keeps_the_smallest_plan_in_the_older_buffer_form():
    from executorch.exir.memory_planning import MemoryPlanningAlgorithmSuite, greedy, naive, verify

    sizes = {algo.__name__: algo(_buffers(), 16) for algo in (greedy, naive)}
    assert sizes["greedy"] < sizes["naive"]
    for algos, expected in (([naive, greedy], sizes["greedy"]), ([naive], sizes["naive"]), (None, sizes["greedy"])):
        buffers = _buffers()
        assert MemoryPlanningAlgorithmSuite(algo_list=algos)(buffers, 16) == expected
        verify(buffers)
        assert max(b.offset + b.size for b in buffers) <= expected


def test_algorithm_suite_as_the_memory_planning_algo():
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.memory_planning import MemoryPlanningAlgorithmSuite, greedy, naive
    from executorch.exir.passes import MemoryPlanningPass

    model, x = _Linear().eval(), torch.randn(2, 4)
    edge = to_edge(torch.export.export(model, (x,)))

    def arena(algo):
        config = ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(memory_planning_algo=algo))
        pm = edge.to_executorch(config)
        return pm.executorch_program.execution_plan[0].non_const_buffer_sizes[1], pm.buffer

    suite_size, pte = arena(MemoryPlanningAlgorithmSuite(algo_list=[naive, greedy]))
    assert suite_size == arena("greedy")[0] < arena("naive")[0]
    (out,) = _run(RUNTIMES["python"], pte, (x,))
    assert_outputs_close([out], [model(x)])


def _planned_graph():
    """An edge graph whose specs carry a greedy plan from `lifetimes`, as upstream's planners leave them."""
    from executorch.exir.memory_planning import Buffer, greedy, lifetimes
    from executorch.exir.passes import SpecPropPass
    from executorch.exir.tensor import TensorSpec

    class Chain(torch.nn.Module):
        def forward(self, x):
            a = x + 1.0
            b = a * 2.0
            c = b - 3.0
            return c * c

    gm = to_edge(torch.export.export(Chain(), (torch.randn(4, 4),))).exported_program().graph_module
    SpecPropPass()(gm)
    life = lifetimes(gm)
    specs, buffers = [], []
    for node in gm.graph.nodes:
        spec = node.meta.get("spec")
        if isinstance(spec, TensorSpec):
            spec.lifetime = list(life[node])
            specs.append(spec)
            buffers.append(Buffer(spec.allocated_memory, *life[node]))
    greedy(buffers, 16)
    for spec, buf in zip(specs, buffers):
        spec.mem_id, spec.mem_offset = 1, buf.offset
    return gm, specs


def test_verifier_counts_reuse_and_catches_an_overlap():
    from executorch.exir.memory_planning import Verifier

    gm, specs = _planned_graph()
    verifier = Verifier(gm, alloc_graph_input=True, alloc_graph_output=True)
    assert verifier.verify_storage_reuse() >= 1  # the chain's dead temporaries are reused
    verifier.verify_graph_input_output()
    with pytest.raises(AssertionError, match="alloc_graph_input=False"):
        Verifier(gm, alloc_graph_input=False, alloc_graph_output=True).verify_graph_input_output()
    live_together = next((a, b) for a in specs for b in specs if a is not b and a.lifetime[0] <= b.lifetime[1]
                         and b.lifetime[0] <= a.lifetime[1] and a.mem_offset != b.mem_offset)
    live_together[1].mem_offset = live_together[0].mem_offset
    with pytest.raises(AssertionError, match="memory plan overlap"):
        verifier.verify_storage_reuse()
    assert verifier.verify_storage_reuse(allow_lifetime_and_storage_overlap=True) >= 1


def test_filter_nodes_finds_nodes_at_any_depth():
    from executorch.exir.memory_planning import filter_nodes

    gm, _ = _planned_graph()
    x, a = list(gm.graph.nodes)[:2]
    assert list(filter_nodes([x, (3, {"k": [a]}), None])) == [x, a]


# --- executorch.exir._serialize._program -------------------------------------------------------

def _delegated(extract: bool):
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.backend.test.demos.rpc.executor_backend_partitioner import ExecutorBackendPartitioner
    from executorch.exir import to_edge_transform_and_lower

    model, x = _Linear().eval(), torch.randn(2, 4)
    edge = to_edge_transform_and_lower(torch.export.export(model, (x,)), partitioner=[ExecutorBackendPartitioner()])
    return model, x, edge.to_executorch(ExecutorchBackendConfig(extract_delegate_segments=extract))


def test_serialize_pte_binary_round_trip_through_the_extended_header():
    from executorch.exir._serialize._program import (PTEFile, _ExtendedHeader, _get_extended_header,
                                                     deserialize_pte_binary, serialize_pte_binary)
    from executorch.exir.schema import DataLocation

    model, x, pm = _delegated(extract=False)
    program = pm.executorch_program
    assert program.execution_plan[0].delegates[0].processed.location == DataLocation.INLINE
    data = serialize_pte_binary(pte_file=PTEFile(program=program), segment_alignment=256,
                                constant_tensor_alignment=32, extract_delegate_segments=True)
    header = _ExtendedHeader.from_bytes(data[8:_ExtendedHeader.NUM_HEAD_BYTES])
    assert header.is_valid() and header == _get_extended_header(data)
    assert header.segment_base_offset % 256 == 0 and header.program_size <= header.segment_base_offset
    assert header.segment_base_offset + header.segment_data_size == len(data)
    assert _ExtendedHeader.from_bytes(header.to_bytes()) == header and len(header.to_bytes()) == 32
    back = deserialize_pte_binary(data).program
    (delegate,) = back.execution_plan[0].delegates
    assert delegate.processed.location == DataLocation.SEGMENT and back.backend_delegate_data == []
    # the payload moved, byte for byte, and the file still runs
    assert bytes(back.segment_data[delegate.processed.index]) == bytes(program.backend_delegate_data[0].data)
    for runtime in RUNTIMES.values():
        (out,) = _run(runtime, data, (x,))
        assert_outputs_close([out], [model(x)])
    kept = serialize_pte_binary(PTEFile(program), extract_delegate_segments=False)
    assert kept == pm.buffer and (deserialize_pte_binary(kept).program.execution_plan[0].delegates[0]
                                  .processed.location == DataLocation.INLINE)


def test_extended_header_absent_or_malformed_is_none():
    from executorch.exir._serialize._program import _ExtendedHeader, _get_extended_header

    model, x = _Linear().eval(), torch.randn(2, 4)
    data = to_edge(torch.export.export(model, (x,))).to_executorch().buffer
    good = _get_extended_header(data)
    assert good is not None and good.program_size <= len(data)
    assert _get_extended_header(data[:8] + b"XXXX" + data[12:]) is None
    assert _get_extended_header(data[:20]) is None
    with pytest.raises(ValueError, match="needs 32 bytes"):
        _ExtendedHeader.from_bytes(b"eh00")


def test_program_json_round_trip_keeps_the_bytes():
    from executorch.exir._serialize._program import _json_to_program, _program_to_json, serialize_pte_binary
    from executorch.exir.error import SerializeError

    _, _, pm = _delegated(extract=True)
    program = pm.executorch_program
    text = _program_to_json(program)
    assert '"val_type": "Tensor"' in text and '"instr_args_type": "DelegateCall"' in text
    assert serialize_pte_binary(_json_to_program(text)) == pm.buffer
    with pytest.raises(SerializeError, match="union tag"):
        _json_to_program(text.replace('"val_type": "Tensor"', '"val_type": "Tensr"', 1))


# --- executorch.exir.backend.test.op_partitioner_demo ------------------------------------------

class _DemoRuntimeBackend(PythonBackend):
    """The demo backend's runtime half, as ExecuTorch's C++ test library implements it: a 2x2
    float matmul of the first two values into the output, then the third value added to it."""

    def init(self, processed, compile_specs, named_data):
        text = bytes(processed).decode()
        count, rest = text.split("version:", 1)
        version, ops = rest.split("#", 1)
        assert version == "0"
        names = [entry.split(",")[0][len("op:demo::"):] for entry in ops.split("#") if entry]
        assert len(names) == int(count)
        assert {s.key: bytes(s.value) for s in compile_specs} == {"max_value": bytes([4])}
        return names

    def execute(self, names, args):
        a, x, b, out = args
        for name in names:
            if name == "aten.mm.default":
                out.copy_(a @ x)
            elif name == "aten.add.Tensor":
                out.copy_(b + out)

    def destroy(self, handle):
        pass


def test_add_mul_partitioner_demo_lowers_mm_add_and_runs():
    from executorch.exir import to_edge_transform_and_lower
    from executorch.exir.backend.test.op_partitioner_demo import AddMulPartitionerDemo
    from executorch.runtime import python_backend

    model = _MmAdd()
    inputs = (torch.randn(2, 2), torch.randn(2, 2), torch.randn(2, 2))
    edge = to_edge(torch.export.export(model, inputs)).to_backend(AddMulPartitionerDemo())
    gm = edge.exported_program().graph_module
    lowered = [getattr(gm, n.target) for n in gm.graph.nodes if n.op == "get_attr"]
    assert [m.backend_id for m in lowered] == ["BackendWithCompilerDemo"]
    payload = bytes(lowered[0].processed_bytes).decode()
    assert payload.startswith("2version:0#op:demo::aten.mm.default, numel:4, dtype:torch.float32<debug_handle>")
    assert "op:demo::aten.add.Tensor" in payload
    assert not [n for n in gm.graph.nodes if n.op == "call_function" and n.target in
                (torch.ops.aten.mm.default, torch.ops.aten.add.Tensor)]
    pm = to_edge_transform_and_lower(torch.export.export(model, inputs), partitioner=[AddMulPartitionerDemo()]
                                     ).to_executorch()
    assert pm.executorch_program.execution_plan[0].delegates[0].id == "BackendWithCompilerDemo"
    if "BackendWithCompilerDemo" not in python_backend.registered_backend_names():
        python_backend.register_backend("BackendWithCompilerDemo", _DemoRuntimeBackend())
    (out,) = _run(RUNTIMES["python"], pm.buffer, inputs)
    assert_outputs_close([out], [model(*inputs)])


def test_demo_backend_refuses_ops_it_cannot_run():
    from executorch.exir.backend.backend_api import to_backend
    from executorch.exir.backend.test.backend_with_compiler_demo import BackendWithCompilerDemo  # noqa: F401

    class Sub(torch.nn.Module):
        def forward(self, x):
            return x - 1.0

    ep = to_edge(torch.export.export(Sub(), (torch.randn(2),))).exported_program()
    with pytest.raises(Exception, match="BackendWithCompilerDemo cannot run node"):
        to_backend("BackendWithCompilerDemo", ep, [])


# --- executorch.extension.pybindings.portable_lib ----------------------------------------------

@pytest.mark.skipif("native" not in RUNTIMES, reason="native runtime not built (cmake -DEXECUTORCH_BUILD_PYBIND=ON)")
def test_portable_lib_method_meta_and_step_by_step_execution():
    from executorch.extension.pybindings.portable_lib import _load_program_from_buffer

    model, x = _Linear().eval(), torch.randn(2, 4)
    program = _load_program_from_buffer(to_edge(torch.export.export(model, (x,))).to_executorch().buffer)
    meta = program.method_meta("forward")
    assert meta.name() == "forward" and meta.num_inputs() == 1 and meta.num_outputs() == 1
    assert tuple(meta.input_tensor_meta(0).sizes()) == (2, 4)
    method = program.load_method("forward")
    with pytest.raises(RuntimeError, match="call execute"):
        method.get_outputs()
    with pytest.raises(RuntimeError, match="set_inputs"):
        method.execute()
    method.set_inputs([x])
    expected = model(x)
    x.add_(100.0)  # set_inputs copied the input, as into the method's memory
    method.execute()
    (out,) = method.get_outputs()
    assert_outputs_close([out], [expected])
    assert_outputs_close(method.get_outputs(clone_outputs=False), method.call([x - 100.0]))
