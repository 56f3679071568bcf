"""Upstream's graph-tool names (backend.utils, canonical partitioners, PassManager, small helpers), used as
upstream's tests use them."""

from __future__ import annotations

import operator

import pytest
import torch

from executorch.exir.dialects._ops import ops as exir_ops
from executorch.devtools.compare import assert_outputs_close
from executorch.exir import to_edge
from executorch.exir.error import ExportError

from conftest import project_runtimes  # noqa: E402

RUNTIMES = project_runtimes()


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 4))

    def forward(self, x, y):
        a = x @ self.w
        b = a - 1.0
        c = torch.relu(b + y)
        return c * 2.0

edge_aten = exir_ops.edge.aten  # what edge graphs call


def _inputs():
    return torch.randn(3, 4), torch.randn(3, 4)


def _targets(nodes) -> list:
    return sorted(n.target.__name__ for n in nodes)  # edge ops: "aten.add.Tensor"


def test_all_node_partitioner_lowers_the_whole_graph_and_the_helpers_see_it():
    from executorch.exir.backend.canonical_partitioners.all_node_partitioner import AllNodePartitioner
    from executorch.exir.backend.utils import (format_delegated_graph, get_delegated_payload, get_delegates,
                                               get_non_lowered_nodes)
    from executorch.exir.lowered_backend_module import get_lowered_backend_modules, get_lowered_submodules

    model, inputs = _Net(), _inputs()
    edge = to_edge(torch.export.export(model, inputs)).to_backend(AllNodePartitioner("ExecutorBackend", []))
    gm = edge.exported_program().graph_module
    (holder,) = get_delegates(gm.graph)
    assert get_non_lowered_nodes(gm.graph) == []  # only the delegate call and its getitem remain
    assert [n.target for n in gm.graph.nodes if n.op == "call_function" and n.target is operator.getitem]
    ((name, lowered, call),) = get_lowered_submodules(gm)
    assert name == holder.target and call.args[0] is holder and get_lowered_backend_modules(gm) == [lowered]
    assert get_delegated_payload(gm) == {holder.name: ("ExecutorBackend", [], lowered.processed_bytes)}
    assert not [p for p in edge.exported_program().graph_signature.input_specs if p.kind.name == "PARAMETER"]
    text = format_delegated_graph(gm)
    assert "backend_id: ExecutorBackend" in text and "lowered graph():" in text and "aten.mm.default" in text
    pte = edge.to_executorch().buffer
    for runtime in RUNTIMES.values():
        assert_outputs_close(runtime.load_program(pte).load_method("forward").execute(list(inputs)), [model(*inputs)])


def test_helpers_on_a_partly_lowered_graph():
    from executorch.exir.backend.test.demos.rpc.executor_backend_partitioner import ExecutorBackendPartitioner
    from executorch.exir.backend.utils import get_delegates, get_non_lowered_nodes

    edge = to_edge(torch.export.export(_Net(), _inputs())).to_backend(
        ExecutorBackendPartitioner([torch.ops.aten.mm.default]))
    graph = edge.exported_program().graph_module.graph
    assert len(get_delegates(graph)) == 1
    assert _targets(get_non_lowered_nodes(graph)) == ["aten.add.Tensor", "aten.mul.Tensor", "aten.relu.default",
                                                     "aten.sub.Tensor"]


def test_pattern_op_partitions_from_patterns_nodes_and_op_support():
    from torch.fx.passes.operator_support import OperatorSupportBase

    from executorch.exir.backend.canonical_partitioners.pattern_op_partitioner import (
        generate_partitions_from_list_of_nodes, generate_pattern_op_partitions)

    class AddRelu(torch.nn.Module):
        def forward(self, x, y):
            return torch.relu(x + y)

    class Mm(OperatorSupportBase):
        def is_node_supported(self, submodules, node):
            return node.op == "call_function" and node.target is edge_aten.mm.default

    gm = to_edge(torch.export.export(_Net(), _inputs())).exported_program().graph_module
    pattern = to_edge(torch.export.export(AddRelu(), _inputs())).exported_program().graph_module.graph
    (found,) = generate_pattern_op_partitions(gm, patterns=[pattern])
    assert _targets(found.nodes) == ["aten.add.Tensor", "aten.relu.default"]
    both = generate_pattern_op_partitions(gm, patterns=[pattern], op_support=Mm())
    assert sorted(_targets(p.nodes) for p in both) == [["aten.add.Tensor", "aten.relu.default"], ["aten.mm.default"]]
    sub = next(n for n in gm.graph.nodes if n.target is edge_aten.sub.Tensor)
    (listed,) = generate_partitions_from_list_of_nodes(gm, [[sub]])
    assert list(listed.nodes) == [sub] and "match" not in sub.meta
    with pytest.raises(ValueError, match="needs pattern_list, op_support or both"):
        generate_partitions_from_list_of_nodes(gm)


def test_pass_manager_runs_nested_pass_lists_and_checks_the_module():
    from executorch.exir.pass_manager import PassManager
    from executorch.exir.passes import dead_code_elimination_pass

    class Dead(torch.nn.Module):
        def forward(self, x):
            torch.sin(x)  # unused
            return x + 1.0

    gm = torch.export.export(Dead(), (torch.randn(3),)).graph_module
    seen = []
    result = PassManager(passes=[[lambda g: seen.append(len(g.graph.nodes))], dead_code_elimination_pass])(gm)
    assert seen and result.modified
    assert "aten.sin.default" not in _targets(n for n in result.graph_module.graph.nodes if n.op == "call_function")
    traced = torch.fx.symbolic_trace(lambda x: x.relu())
    with pytest.raises(ExportError, match="calls method 'relu'"):
        PassManager(passes=[dead_code_elimination_pass], run_checks_after_each_pass=True)(traced)


def test_small_helpers_at_upstream_paths():
    import executorch.exir as exir
    from executorch.exir import passes, schema
    from executorch.exir._serialize.padding import aligned_size, pad_to, padding_required
    from executorch.exir.capture._capture import patch_forward
    from executorch.exir.passes import sym_shape_eval_pass
    from executorch.exir.scalar_type import ScalarType

    assert ScalarType is schema.ScalarType and ScalarType.FLOAT == 6
    assert (aligned_size(5, 4), aligned_size(8, 4), padding_required(5, 4), padding_required(8, 4)) == (8, 8, 3, 0)
    assert pad_to(b"ab", 4) == b"ab\0\0"
    with pytest.raises(ValueError, match="longer than the padded length 2"):
        pad_to(b"abc", 2)
    assert passes.HintBasedSymShapeEvalPass is sym_shape_eval_pass.HintBasedSymShapeEvalPass
    assert passes.ConstraintBasedSymShapeEvalPass is sym_shape_eval_pass.ConstraintBasedSymShapeEvalPass
    assert torch.Tensor in exir.Value.__args__

    class Two(torch.nn.Module):
        def forward(self, x):
            return x + 1.0

        def other(self, x):
            return x * 3.0

    m, x = Two(), torch.ones(2)
    with patch_forward(m, m.other):
        assert torch.equal(m(x), x * 3.0)
    assert torch.equal(m(x), x + 1.0)
    edge = to_edge(torch.export.export(m, (x,)))
    assert edge._edge_programs["forward"] is edge.exported_program()


class _Composite(torch.nn.Module):
    """A module calling a lowered module, as upstream's examples compose them."""

    def __init__(self, lowered) -> None:
        super().__init__()
        self.lowered = lowered

    def forward(self, x, y):
        return torch.sin(self.lowered(x, y)) + 1.0


def test_a_module_calling_a_lowered_module_exports_and_runs():
    from executorch.exir.backend.backend_api import to_backend
    from executorch.exir.delegate import executorch_call_delegate
    from executorch.exir.lowered_backend_module import get_lowered_submodules

    class MulAdd(torch.nn.Module):
        def forward(self, x, y):
            return x * y + y

    inputs = (torch.randn(3, 4), torch.randn(3, 4))
    lowered = to_backend("ExecutorBackend", to_edge(torch.export.export(MulAdd(), inputs)).exported_program(), [])
    model = _Composite(lowered)
    assert_outputs_close([model(*inputs)], [torch.sin(MulAdd()(*inputs)) + 1.0])  # eager runs the partition's graph
    ep = torch.export.export(model, inputs)
    calls = [n for n in ep.graph.nodes if n.target is executorch_call_delegate]
    assert len(calls) == 1 and isinstance(calls[0].meta["val"], torch.Tensor)  # one tensor out, no getitem
    edge = to_edge(ep)
    ((_, inner, _),) = get_lowered_submodules(edge.exported_program().graph_module)
    assert inner.backend_id == "ExecutorBackend"
    pte = edge.to_executorch().buffer
    for runtime in RUNTIMES.values():
        out = runtime.load_program(pte).load_method("forward").execute(list(inputs))
        assert_outputs_close(out, [model(*inputs)])


def test_is_identical_graph_and_the_demo_support_classes():
    from torch.fx.passes.operator_support import any_chain

    from executorch.exir.backend.canonical_partitioners.pattern_op_partitioner import generate_pattern_op_partitions
    from executorch.exir.backend.test.demos.rpc.executor_backend_partitioner import AnyOperatorSupport
    from executorch.exir.backend.test.op_partitioner_demo import AddOperatorSupport, MatmulOperatorSupport
    from executorch.exir.backend.utils import is_identical_graph

    def edge_gm(model):
        return to_edge(torch.export.export(model, _inputs())).exported_program().graph_module

    class Other(_Net):
        def forward(self, x, y):
            return torch.relu((x @ self.w - 1.0) - y) * 2.0  # a sub where _Net adds

    assert is_identical_graph(edge_gm(_Net()), edge_gm(_Net()))
    assert not is_identical_graph(edge_gm(_Net()), edge_gm(Other()))
    gm = edge_gm(_Net())
    (mm,) = generate_pattern_op_partitions(gm, op_support=MatmulOperatorSupport())
    assert _targets(mm.nodes) == ["aten.mm.default"]
    both = generate_pattern_op_partitions(gm, op_support=any_chain(AddOperatorSupport(), MatmulOperatorSupport()))
    assert sorted(_targets(p.nodes) for p in both) == [["aten.add.Tensor"], ["aten.mm.default"]]
    (everything,) = generate_pattern_op_partitions(gm, op_support=AnyOperatorSupport())
    assert _targets(everything.nodes) == ["aten.add.Tensor", "aten.mm.default", "aten.mul.Tensor",
                                          "aten.relu.default", "aten.sub.Tensor"]


def test_inspect_node_points_at_the_node_and_its_source():
    from executorch.exir.print_program import inspect_node

    graph = to_edge(torch.export.export(_Net(), _inputs())).exported_program().graph
    relu = next(n for n in graph.nodes if n.target is edge_aten.relu.default)
    text = inspect_node(graph, relu)
    marked = [line for line in text.splitlines() if line.startswith("-->")]
    assert len(marked) == 1 and "%aten_relu_default" in marked[0] and "aten.relu.default" in marked[0]
    assert "Traceback (most recent call last):" in text and "torch.relu(b + y)" in text  # the line of _Net.forward
    placeholder = next(iter(graph.nodes))
    assert "Traceback" not in inspect_node(graph, placeholder)


def test_exported_program_pass_manager_runs_graph_and_program_passes():
    from executorch.exir import EdgeProgramManager
    from executorch.exir.pass_base import ExportedProgramPassBase, ExportedProgramPassResult, ExportPassBaseError
    from executorch.exir.pass_manager import ExportedProgramPassManager

    class AddToMul:  # a graph pass, returning None: changed in place
        def __call__(self, gm):
            for n in gm.graph.nodes:
                if n.target is edge_aten.add.Tensor:
                    n.target = edge_aten.mul.Tensor

    class DoubleWeight(ExportedProgramPassBase):
        def call(self, ep):
            ep.state_dict["w"] = torch.nn.Parameter(ep.state_dict["w"].detach() * 2.0)
            return ExportedProgramPassResult(ep, True)

    class NeedsNoAdd(ExportedProgramPassBase):
        def requires(self, ep):
            if any(n.target is edge_aten.add.Tensor for n in ep.graph.nodes):
                raise ExportPassBaseError("add still in the graph")

        def call(self, ep):
            return ExportedProgramPassResult(ep, False)

    model, inputs = _Net(), _inputs()
    edge = to_edge(torch.export.export(model, inputs)).exported_program()
    before = [str(n.target) for n in edge.graph.nodes]
    result = ExportedProgramPassManager(passes=[[AddToMul()], NeedsNoAdd(), DoubleWeight()])(edge)
    assert isinstance(result, ExportedProgramPassResult) and result.modified
    assert [str(n.target) for n in edge.graph.nodes] == before  # the program given keeps its graph
    ops = [n.target for n in result.exported_program.graph.nodes if n.op == "call_function"]
    assert edge_aten.add.Tensor not in ops and ops.count(edge_aten.mul.Tensor) == 2
    w = model.w.detach() * 2.0
    x, y = inputs
    want = torch.relu((x @ w - 1.0) * y) * 2.0
    pte = EdgeProgramManager({"forward": result.exported_program}).to_executorch().buffer
    assert_outputs_close(RUNTIMES["python"].load_program(pte).load_method("forward").execute(list(inputs)), [want])
    with pytest.raises(ExportPassBaseError, match="add still in the graph"):
        ExportedProgramPassManager(passes=[NeedsNoAdd()])(edge)
    assert not ExportedProgramPassManager(passes=[NeedsNoAdd()])(result.exported_program).modified
