"""Delegation end to end: partitioners, payloads in the file, and backends running them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch

from executorch.devtools.compare import assert_outputs_close
from executorch.exir import ExecutorchBackendConfig, ExportError, to_edge, to_edge_transform_and_lower
from executorch.exir import schema as s
from executorch.exir.dialects._ops import ops as exir_ops
from executorch.exir._serialize import read_program, serialize_pte_binary
from executorch.exir.backend.backend_api import to_backend
from executorch.exir.backend.backend_details import BackendDetails
from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
from executorch.exir.backend.test.demos.rpc.executor_backend_partitioner import ExecutorBackendPartitioner
from executorch.exir.error import SerializeError
from executorch.exir.lowered_backend_module import LoweredBackendModule
from executorch.runtime import ExecuTorchError

from conftest import SHARED_TOOLS, project_runtimes  # noqa: E402

aten = torch.ops.aten
edge_aten = exir_ops.edge.aten  # what edge graphs call
RUNTIMES = project_runtimes()


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 6)
        self.scale = torch.nn.Parameter(torch.linspace(0.5, 1.5, 6))

    def forward(self, x, y):
        a = self.fc(x) + y
        b = torch.relu(a) * self.scale
        return b.sum(dim=1), torch.tanh(a) * 2.0


def _inputs():
    g = torch.Generator().manual_seed(0)
    return torch.randn(3, 8, generator=g), torch.randn(3, 6, generator=g)


def _net():
    torch.manual_seed(0)
    return Net().eval()


def assert_close_rel(got, want) -> None:
    """The project's output gate: tolerance scaled to the reference; counts, shapes, dtypes equal."""
    assert_outputs_close(list(got), list(want))


def _run_all(pte: bytes, inputs, method: str = "forward") -> dict:
    return {name: rt.load_program(pte).load_method(method).execute(list(inputs)) for name, rt in RUNTIMES.items()}


def _delegates(pte: bytes, method: int = 0) -> list:
    return read_program(pte).execution_plan[method].delegates


def _calls(pte: bytes, method: int = 0) -> list:
    plan = read_program(pte).execution_plan[method]
    return [i.instr_args for i in plan.chains[0].instructions if isinstance(i.instr_args, s.DelegateCall)]


def test_whole_model_in_one_executor_backend_partition_runs_on_every_engine():
    model, inputs = _net(), _inputs()
    ep = torch.export.export(model, inputs)
    pte = to_edge_transform_and_lower(ep, partitioner=[ExecutorBackendPartitioner()]).to_executorch().buffer
    assert [d.id for d in _delegates(pte)] == ["ExecutorBackend"]
    program = read_program(pte)
    # The weights moved into the payload: the top program keeps no constant data.
    assert all(len(b.storage) == 0 for b in program.constant_buffer)
    nested = read_program(bytes(program.segment_data[_delegates(pte)[0].processed.index]))
    assert any(len(b.storage) == 6 * 8 * 4 for b in nested.constant_buffer)
    want = list(model(*inputs))
    for name, got in _run_all(pte, inputs).items():
        assert_close_rel(got, want)


def test_a_wrong_answer_fails_the_comparison():
    model, inputs = _net(), _inputs()
    want = list(model(*inputs))
    with pytest.raises(AssertionError):
        assert_close_rel([want[0] * (1 + 1e-3), want[1]], want)


def test_several_partitions_with_portable_ops_between_them():
    model, inputs = _net(), _inputs()
    ep = torch.export.export(model, inputs)
    part = ExecutorBackendPartitioner([aten.add.Tensor, aten.mul.Tensor, aten.tanh.default])
    edge = to_edge_transform_and_lower(ep, partitioner=[part])
    pm = edge.to_executorch()
    pte = pm.buffer
    assert len(_delegates(pte)) >= 2
    calls = _calls(pte)
    assert sorted(c.delegate_index for c in calls) == list(range(len(_delegates(pte))))
    assert set(pm.delegate_map["forward"]) == {
        pc for pc, i in enumerate(read_program(pte).execution_plan[0].chains[0].instructions)
        if isinstance(i.instr_args, s.DelegateCall)}
    gm = edge.exported_program().graph_module
    assert isinstance(gm.lowered_module_0, LoweredBackendModule)
    want = list(model(*inputs))
    # The lowered graph still runs eagerly through its delegates' original programs.
    assert_close_rel(list(edge.exported_program().module()(*inputs)), want)
    for got in _run_all(pte, inputs).values():
        assert_close_rel(got, want)


def test_multi_method_program_with_a_partitioner_per_method():
    model, inputs = _net(), _inputs()
    eps = {"forward": torch.export.export(model, inputs),
           "double": torch.export.export(torch.nn.Sequential(torch.nn.ReLU()), (inputs[1],))}
    edge = to_edge(eps).to_backend({"forward": ExecutorBackendPartitioner(), "double": []})
    pte = edge.to_executorch().buffer
    program = read_program(pte)
    by_name = {p.name: p for p in program.execution_plan}
    assert len(by_name["forward"].delegates) == 1 and by_name["double"].delegates == []
    for rt in RUNTIMES.values():
        loaded = rt.load_program(pte)
        assert_close_rel(loaded.load_method("forward").execute(list(inputs)), list(model(*inputs)))
        assert_close_rel(loaded.load_method("double").execute([inputs[1]]), [torch.relu(inputs[1])])


def test_inline_payloads_when_segments_are_not_extracted():
    model, inputs = _net(), _inputs()
    ep = torch.export.export(model, inputs)
    edge = to_edge_transform_and_lower(ep, partitioner=[ExecutorBackendPartitioner()])
    pte = edge.to_executorch(ExecutorchBackendConfig(extract_delegate_segments=False)).buffer
    program = read_program(pte)
    (delegate,) = program.execution_plan[0].delegates
    assert delegate.processed.location == s.DataLocation.INLINE
    assert bytes(program.backend_delegate_data[0].data[4:8]) == b"ET12"
    for got in _run_all(pte, inputs).values():
        assert_close_rel(got, list(model(*inputs)))


def test_to_backend_on_a_whole_program_returns_a_lowered_module():
    model, inputs = _net(), _inputs()
    edge = to_edge(torch.export.export(model, inputs))
    lowered = to_backend("ExecutorBackend", edge.exported_program(), [])
    assert isinstance(lowered, LoweredBackendModule) and lowered.backend_id == "ExecutorBackend"
    for rt in RUNTIMES.values():
        got = rt.load_program(lowered.processed_bytes).load_method("forward").execute(list(inputs))
        assert_close_rel(got, list(model(*inputs)))


class Explodes(BackendDetails):
    @staticmethod
    def preprocess(edge_program, compile_specs):
        raise ValueError("unsupported layout")


class ClaimsAdds(Partitioner):
    def __init__(self, backend_id: str) -> None:
        super().__init__()
        self.backend_id = backend_id

    def partition(self, ep):
        for node in ep.graph.nodes:
            if node.target is edge_aten.add.Tensor:
                node.meta["delegation_tag"] = "adds"
        return PartitionResult(ep, {"adds": DelegationSpec(self.backend_id)})


def test_a_failing_preprocess_names_the_backend_and_the_partition():
    ep = torch.export.export(_net(), _inputs())
    with pytest.raises(ExportError, match=r"backend 'Explodes' failed to preprocess partition 'adds' of method "
                                          r"'forward' \(1 nodes: aten_add_tensor.*unsupported layout"):
        to_edge_transform_and_lower(ep, partitioner=[ClaimsAdds("Explodes")])


def test_a_backend_with_no_preprocess_loaded_is_named():
    ep = torch.export.export(_net(), _inputs())
    with pytest.raises(ExportError, match="no BackendDetails subclass named 'NoSuchNPU'"):
        to_edge_transform_and_lower(ep, partitioner=[ClaimsAdds("NoSuchNPU")])


class ClaimsAroundRelu(Partitioner):
    """Claims the add and the mul but not the relu between them: not convex."""

    def partition(self, ep):
        for node in ep.graph.nodes:
            if node.target in (edge_aten.add.Tensor, edge_aten.mul.Tensor):
                node.meta["delegation_tag"] = "t"
        return PartitionResult(ep, {"t": DelegationSpec("ExecutorBackend")})


def test_a_non_convex_partition_is_refused():
    ep = torch.export.export(_net(), _inputs())
    with pytest.raises(ExportError, match="partition 't' is not convex: node 'aten_relu_default'"):
        to_edge_transform_and_lower(ep, partitioner=[ClaimsAroundRelu()])


class KeepsLinear(ExecutorBackendPartitioner):
    def __init__(self, claim: bool) -> None:
        super().__init__([aten.linear.default] if claim else [aten.tanh.default])

    def ops_to_not_decompose(self, ep):
        return [aten.linear.default], None


@pytest.mark.parametrize("claim", [True, False])
def test_ops_to_not_decompose_reach_the_partitioner_whole(claim):
    model, inputs = _net(), _inputs()
    ep = torch.export.export(model, inputs)
    edge = to_edge_transform_and_lower(ep, partitioner=[KeepsLinear(claim)])
    top = [n.target for n in edge.exported_program().graph.nodes if n.op == "call_function"]
    assert edge_aten.linear.default not in top  # unclaimed, it is lowered to core ATen after partitioning
    lowered = edge.exported_program().graph_module.lowered_module_0
    inside = [n.target for n in lowered.original_module.graph.nodes if n.op == "call_function"]
    assert (edge_aten.linear.default in inside) == claim
    for got in _run_all(edge.to_executorch().buffer, inputs).values():
        assert_close_rel(got, list(model(*inputs)))


def _malformed(mutate) -> bytes:
    model, inputs = _net(), _inputs()
    ep = torch.export.export(model, inputs)
    program = read_program(
        to_edge_transform_and_lower(ep, partitioner=[ExecutorBackendPartitioner()]).to_executorch().buffer)
    mutate(program)
    return serialize_pte_binary(program)


def test_a_delegate_index_out_of_range_is_an_error_on_every_engine():
    def bad(p):
        for i in p.execution_plan[0].chains[0].instructions:
            if isinstance(i.instr_args, s.DelegateCall):
                i.instr_args.delegate_index = 7
    pte = _malformed(bad)
    for rt in RUNTIMES.values():
        with pytest.raises((ExecuTorchError, SerializeError), match="delegate"):
            rt.load_program(pte).load_method("forward")


def test_a_payload_segment_out_of_range_is_an_error():
    def bad(p):
        p.execution_plan[0].delegates[0].processed.index = 9
    with pytest.raises(SerializeError, match=r"delegates\[0\] \('ExecutorBackend'\) refers to segment 9"):
        read_program(_malformed(bad))


@pytest.fixture(scope="module")
def reference_python():
    import os

    python = os.environ.get("ET_REFERENCE_PYTHON")
    if not python:
        pytest.skip("ET_REFERENCE_PYTHON is not set; see ../shared/tools/reference-runtime/README.md")
    return python


def test_the_published_reader_decodes_our_delegates(reference_python, tmp_path):
    model, inputs = _net(), _inputs()
    ep = torch.export.export(model, inputs)
    part = ExecutorBackendPartitioner([aten.add.Tensor, aten.mul.Tensor, aten.tanh.default])
    pte = to_edge_transform_and_lower(ep, partitioner=[part]).to_executorch().buffer
    (tmp_path / "d.pte").write_bytes(pte)
    subprocess.run([reference_python, str(SHARED_TOOLS / "dump_pte.py"), str(tmp_path / "d.pte"), "--out",
                    str(tmp_path / "d.json")], check=True, capture_output=True)
    dumped = json.loads((tmp_path / "d.json").read_text())
    ours = _delegates(pte)
    theirs = dumped["execution_plan"][0]["delegates"]
    assert [d["id"] for d in theirs] == [d.id for d in ours]
    # The published reader moves segment payloads inline; each must be our nested program.
    payloads = [bytes(d["data"]) for d in dumped["backend_delegate_data"]]
    program = read_program(pte)
    assert payloads == [bytes(program.segment_data[d.processed.index]) for d in ours]


# The published exporter's XNNPACK partitioner needs torchao, which its environment lacks; this
# writes the same kind of file through the same published delegate path: a partition whose
# payload only an "XnnpackBackend" runtime can read. It also writes an ExecutorBackend file with
# the published exporter's own ExecutorBackend partitioner.
PUBLISHED_EXPORT = '''
import sys, torch
from executorch.exir import to_edge_transform_and_lower
from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
from executorch.exir.backend.test.demos.rpc.executor_backend_partitioner import ExecutorBackendPartitioner
from executorch.exir.backend.test.demos.rpc.executor_backend_preprocess import ExecutorBackend

class XnnpackBackend(BackendDetails):
    @staticmethod
    def preprocess(edge_program, compile_specs):
        return PreprocessResult(processed_bytes=b"XN01" + bytes(60))

class ClaimsLinear(Partitioner):
    def partition(self, ep):
        for n in ep.graph.nodes:
            if n.op == "call_function" and "addmm" in str(n.target):
                n.meta["delegation_tag"] = "xnn"
        return PartitionResult(ep, {"xnn": DelegationSpec("XnnpackBackend", [])})

torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
ep = torch.export.export(m, (torch.randn(2, 4),))
open(sys.argv[1], "wb").write(to_edge_transform_and_lower(ep, partitioner=[ClaimsLinear()]).to_executorch().buffer)
open(sys.argv[2], "wb").write(
    to_edge_transform_and_lower(ep, partitioner=[ExecutorBackendPartitioner()]).to_executorch().buffer)
torch.save(m, sys.argv[3])
'''


@pytest.fixture(scope="module")
def published_files(reference_python, tmp_path_factory):
    root = tmp_path_factory.mktemp("published")
    script = root / "export.py"
    script.write_text(PUBLISHED_EXPORT)
    outs = [root / "xnn.pte", root / "executor.pte", root / "model.pt"]
    proc = subprocess.run([reference_python, str(script), *map(str, outs)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(f"the published exporter failed: {proc.stderr[-1500:]}")
    return outs


def test_published_xnnpack_files_load_up_to_the_backend_lookup(published_files):
    pte = published_files[0].read_bytes()
    assert [d.id for d in _delegates(pte)] == ["XnnpackBackend"]
    for name, rt in RUNTIMES.items():
        program = rt.load_program(pte)
        assert program.method_names == {"forward"}
        with pytest.raises(ExecuTorchError, match="XnnpackBackend") as info:
            program.load_method("forward")
        assert "\n" not in str(info.value).strip()


def test_published_executor_backend_files_run_here(published_files):
    pte = published_files[1].read_bytes()
    assert [d.id for d in _delegates(pte)] == ["ExecutorBackend"]
    model = torch.load(published_files[2], weights_only=False)
    x = torch.randn(2, 4)
    for got in _run_all(pte, [x]).values():
        assert_close_rel(got, [model(x).detach()])


def test_inspect_shows_delegates_their_callers_and_the_delegated_share(tmp_path, capsys):
    from executorch.cli.main import main

    model, inputs = _net(), _inputs()
    ep = torch.export.export(model, inputs)
    part = ExecutorBackendPartitioner([aten.add.Tensor, aten.mul.Tensor, aten.tanh.default])
    pte = to_edge_transform_and_lower(ep, partitioner=[part]).to_executorch().buffer
    path = tmp_path / "d.pte"
    path.write_bytes(pte)
    main(["inspect", str(path)])
    out = capsys.readouterr().out
    calls = _calls(pte)
    program = read_program(pte)
    pcs = [pc for pc, i in enumerate(program.execution_plan[0].chains[0].instructions)
           if isinstance(i.instr_args, s.DelegateCall)]
    size = len(program.segment_data[_delegates(pte)[0].processed.index])
    assert (f"[0] ExecutorBackend: {size:,} bytes (segment 1), compile specs: none, "
            f"called by instruction {pcs[0]}") in out
    nested = sum(
        sum(isinstance(i.instr_args, s.KernelCall) for i in read_program(
            bytes(program.segment_data[d.processed.index])).execution_plan[0].chains[0].instructions)
        for d in _delegates(pte))
    portable = sum(isinstance(i.instr_args, s.KernelCall) for i in program.execution_plan[0].chains[0].instructions)
    assert len(calls) == len(_delegates(pte))
    assert (f"delegated: {nested} of {nested + portable} operator calls "
            f"({100 * nested / (nested + portable):.0f}%)") in out


class CondNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.linspace(-1.0, 1.0, 4))

    def forward(self, p, x):
        return torch.cond(p.sum() > 0, lambda x: (x + self.w) * 2.0, lambda x: x * x - 1.0, (x,))


def test_delegates_inside_cond_branches_run_on_every_engine():
    torch.manual_seed(0)
    model, x = CondNet().eval(), torch.randn(4)
    ep = torch.export.export(model, (torch.ones(1), x))
    part = ExecutorBackendPartitioner([aten.add.Tensor, aten.mul.Tensor, aten.sub.Tensor])
    edge = to_edge_transform_and_lower(ep, partitioner=[part])
    gm = edge.exported_program().graph_module
    branches = [m for name, m in gm.named_children() if isinstance(m, torch.fx.GraphModule)]
    assert all(any(isinstance(c, LoweredBackendModule) for c in b.children()) for b in branches)
    pte = edge.to_executorch().buffer
    assert [d.id for d in _delegates(pte)] == ["ExecutorBackend"] * 2
    for p in (torch.ones(1), -torch.ones(1)):
        want = [model(p, x).detach()]
        for got in _run_all(pte, [p, x]).values():
            assert_close_rel(got, want)


def test_corrupted_delegate_files_are_errors_never_crashes():
    fixture = Path(__file__).parent / "fixtures" / "native" / "delegate_executor.pte"
    files = [fixture.read_bytes()]
    x = torch.randn(2, 3)
    outcomes = {"ok": 0, "error": 0}
    for data in files:
        for pos in range(0, len(data), 5):
            bad = bytearray(data)
            bad[pos] ^= 0xA5
            for rt in RUNTIMES.values():
                try:
                    rt.load_program(bytes(bad)).load_method("forward").execute([x])
                    outcomes["ok"] += 1
                except (ExecuTorchError, SerializeError):
                    outcomes["error"] += 1
    assert outcomes["error"] > 0


class SharedScale(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.linspace(0.5, 1.5, 6))

    def forward(self, x):
        return x * self.scale + self.scale


class MulsNoCopy(ExecutorBackendPartitioner):
    def partition(self, exported_program):
        for n in exported_program.graph.nodes:
            if n.op == "placeholder":
                n.meta["no_copy"] = True
        return super().partition(exported_program)


@pytest.mark.parametrize("no_copy", [False, True])
def test_a_constant_read_inside_and_outside_a_partition_is_copied_in_unless_no_copy(no_copy):
    # As upstream's lowering: the delegate owns its copy of a parameter the program reads too (a
    # backend needs its weights at init), and a parameter marked meta["no_copy"] is passed in instead.
    model, x = SharedScale().eval(), torch.randn(3, 6)
    part = (MulsNoCopy if no_copy else ExecutorBackendPartitioner)([aten.mul.Tensor])
    edge = to_edge_transform_and_lower(torch.export.export(model, (x,)), partitioner=[part])
    lowered = edge.exported_program().graph_module.lowered_module_0
    assert list(lowered.original_module.graph_signature.parameters) == ([] if no_copy else ["scale"])
    assert list(edge.exported_program().graph_signature.parameters) == ["scale"]  # the add still reads it
    pte = edge.to_executorch().buffer
    assert [len(c.args) for c in _calls(pte)] == [3 if no_copy else 2]
    for got in _run_all(pte, [x]).values():
        assert_close_rel(got, [model(x).detach()])


# Compile specs are a bag: a vendor partitioner may hand one list to several backends, and each
# backend reads the keys it knows (ExecutorBackend: external_constants) and warns once about the rest.
SHARED_SPECS = [s.CompileSpec("level", b"\x02"), s.CompileSpec("external_constants", b"")]


class SpecsPartitioner(ExecutorBackendPartitioner):
    def __init__(self, ops, specs) -> None:
        super().__init__(ops)
        self.delegation_spec = DelegationSpec("ExecutorBackend", list(specs))


def test_one_compile_spec_list_sent_to_two_backends_exports_and_runs_on_every_engine():
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    model, inputs = _net(), _inputs()
    xnn = XnnpackPartitioner()
    xnn.delegation_spec = DelegationSpec("XnnpackBackend", list(SHARED_SPECS))
    ep = torch.export.export(model, inputs)
    with pytest.warns(UserWarning) as caught:
        edge = to_edge_transform_and_lower(ep, partitioner=[SpecsPartitioner([aten.mul.Tensor], SHARED_SPECS), xnn])
    said = sorted({str(w.message) for w in caught if "compile specs" in str(w.message)})
    assert said == [
        "ExecutorBackend ignores the compile specs ['level']: it reads only ['external_constants']",
        "XnnpackBackend ignores the compile specs ['level', 'external_constants']: "
        "it reads only ['dqlinear_partitioner']",
    ]
    pte = edge.to_executorch().buffer
    program = read_program(pte)
    delegates = _delegates(pte)
    assert sorted(d.id for d in delegates) == ["ExecutorBackend", "XnnpackBackend"]
    assert all([c.key for c in d.compile_specs] == ["level", "external_constants"] for d in delegates)
    # external_constants: the nested program names `scale` instead of holding it; the bytes are the
    # outer program's named data, where the runtime's ExecutorBackend finds them.
    nested_ref = next(d for d in delegates if d.id == "ExecutorBackend").processed
    nested = read_program(bytes(program.segment_data[nested_ref.index]))
    assert 6 * 4 not in [len(b.storage) for b in nested.constant_buffer]  # (the scalar 2.0 stays)
    external = [v.val.extra_tensor_info.fully_qualified_name for v in nested.execution_plan[0].values
                if isinstance(v.val, s.Tensor) and v.val.extra_tensor_info is not None
                and v.val.extra_tensor_info.location == s.TensorDataLocation.EXTERNAL]
    assert external == ["scale"]
    named = {e.key: bytes(program.segment_data[e.segment_index]) for e in program.named_data}
    assert named["scale"] == model.scale.detach().numpy().tobytes()
    want = list(model(*inputs))
    for got in _run_all(pte, inputs).values():
        assert_close_rel(got, want)


def test_a_nested_program_whose_named_weights_are_missing_is_an_error_on_every_engine():
    model, inputs = _net(), _inputs()
    ep = torch.export.export(model, inputs)
    pte = to_edge_transform_and_lower(
        ep, partitioner=[SpecsPartitioner([aten.mul.Tensor], [s.CompileSpec("external_constants", b"")])]
    ).to_executorch().buffer
    program = read_program(pte)
    program.named_data = [e for e in program.named_data if e.key != "scale"]
    broken = serialize_pte_binary(program)
    for name, rt in RUNTIMES.items():
        with pytest.raises(ExecuTorchError):
            rt.load_program(broken).load_method("forward").execute(list(inputs))


def test_compile_specs_a_backend_knows_are_read_without_a_warning():
    import warnings

    from executorch.exir.backend.compile_spec_schema import read_compile_specs

    specs = [s.CompileSpec("a", b"1"), s.CompileSpec("b", b"2"), s.CompileSpec("a", b"3")]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_compile_specs("Demo", specs, known=("a", "b", "c")) == {"a": b"3", "b": b"2"}
    with pytest.warns(UserWarning, match=r"Demo ignores the compile specs \['b'\]: it reads only \['a'\]") as caught:
        assert read_compile_specs("Demo", specs, known=("a",)) == {"a": b"3"}
    assert len(caught) == 1
