"""ETRecord: generate_etrecord on the managers, the zip layout, and reading it back (ours and the published one)."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import zipfile
from pathlib import Path

import pytest
import torch

from executorch.devtools.compare import assert_outputs_close
from executorch.devtools.etrecord import generate_etrecord, parse_etrecord
from executorch.exir import to_edge, to_edge_transform_and_lower
from executorch.exir._etrecord import ETRecordError
from executorch.exir.error import ExportError
from executorch.exir.schema import KernelCall

from test_devtools_etdump import ConvLinear, _inputs  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared" / "tools" / "reference-runtime"


def _lowered(generate=True):
    inputs = _inputs()
    ep = torch.export.export(ConvLinear(), inputs)
    edge = to_edge_transform_and_lower(ep, generate_etrecord=generate)
    return ep, edge, edge.to_executorch(), inputs


def test_without_the_flag_there_is_no_etrecord():
    _, edge, et, _ = _lowered(generate=False)
    for manager in (edge, et):
        with pytest.raises(ExportError, match="generate_etrecord=True"):
            manager.get_etrecord()
    with pytest.raises(ExportError, match="generate_etrecord must be True or False"):
        to_edge(torch.export.export(ConvLinear(), _inputs()), generate_etrecord="yes")


def test_debug_handle_map_names_each_kernel_instructions_node():
    _, edge, et, _ = _lowered()
    handles = et.debug_handle_map["forward"]
    plan = et.executorch_program.execution_plan[0]
    kernels = [pc for pc, i in enumerate(plan.chains[0].instructions) if isinstance(i.instr_args, KernelCall)]
    assert sorted(handles) == kernels
    by_handle: dict = {}  # the pieces of one decomposition (a linear's permute and addmm) share a handle
    for n in edge.exported_program().graph.nodes:
        if "debug_handle" in n.meta:
            by_handle.setdefault(n.meta["debug_handle"], []).append(str(n.target))
    assert any(len(targets) > 1 for targets in by_handle.values())
    for pc in kernels:  # the instruction runs the out variant of one of its handle's nodes' ops
        op = plan.operators[plan.chains[0].instructions[pc].instr_args.op_index].name
        assert any(op.split("::")[1] in target for target in by_handle[handles[pc]])


def test_save_writes_the_published_layout_and_parse_reads_it_back(tmp_path):
    _, _, et, inputs = _lowered()
    record = et.get_etrecord()
    record.update_representative_inputs([inputs])
    record.update_reference_outputs([list(record.exported_program.module()(*inputs))])
    record.save(tmp_path / "r.etrecord")
    with zipfile.ZipFile(tmp_path / "r.etrecord") as z:
        names = set(z.namelist())
        assert {"ETRECORD_V0", "exported_program", "edge_dialect_exported_program/forward", "debug_handle_map",
                "delegate_map", "instruction_id_to_num_outs_map", "representative_inputs", "reference_outputs",
                "export_graph_id"} <= names
        assert json.loads(z.read("debug_handle_map")) == {
            "forward": {str(k): v for k, v in et.debug_handle_map["forward"].items()}}
        layout = json.loads(z.read("edge_dialect_exported_program/forward"))
        assert layout["schema_version"] == {"major": 5, "minor": 4} and layout["dialect"] == "EDGE"
        assert all(n["target"].startswith("executorch.exir.dialects.edge.ops.")
                   for n in layout["graph_module"]["graph"]["nodes"])
    back = parse_etrecord(tmp_path / "r.etrecord")
    assert back._debug_handle_map == json.loads(json.dumps({"forward": et.debug_handle_map["forward"]}))
    edge = back.edge_dialect_program
    assert {n.meta.get("debug_handle") for n in edge.graph.nodes if n.op == "call_function"} == \
        set(et.debug_handle_map["forward"].values())
    assert_outputs_close(list(edge.module()(*back._representative_inputs[0])), back._reference_outputs["forward"][0])


def test_generate_etrecord_function_and_bad_files(tmp_path):
    ep, edge, et, _ = _lowered(generate=False)
    generate_etrecord(tmp_path / "g.etrecord", edge, et, ep)
    assert parse_etrecord(tmp_path / "g.etrecord").exported_program is not None
    (tmp_path / "bad.etrecord").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="is not an ETRecord"):
        parse_etrecord(tmp_path / "bad.etrecord")
    with pytest.raises(ValueError, match="ExecutorchProgramManager"):
        generate_etrecord(tmp_path / "x.etrecord", edge, object())
    assert not (tmp_path / "x.etrecord").exists()


REFERENCE_SCRIPT = r"""
import sys
from executorch.devtools import Inspector
ins = Inspector(etdump_path=sys.argv[1], etrecord=sys.argv[2], debug_buffer_path=sys.argv[3])
df = ins.to_dataframe()
ops = sorted({t for ts in df["op_types"] for t in ts})
print("OPS", ",".join(ops))
delegated = df[df["is_delegated_op"]]
if len(delegated):
    print("DELEGATED", ",".join(sorted(set(delegated["delegate_backend_name"]))))
else:
    gap = ins.calculate_numeric_gap("MSE")
    print("GAP", max(float(g[0]) for g in gap["gap"]))
"""


@pytest.mark.parametrize("delegated", [None, "ExecutorBackend", "XnnpackBackend"])
@pytest.mark.parametrize("engine", ["python", "native"])
def test_published_inspector_reads_our_etdump_and_etrecord(engine, delegated, tmp_path):
    python = os.environ.get("ET_REFERENCE_PYTHON")
    if not python:
        pytest.skip("ET_REFERENCE_PYTHON is not set; see ../shared/tools/reference-runtime/README.md")
    from conftest import project_runtimes

    runtime = project_runtimes().get(engine)
    if runtime is None:
        pytest.skip(f"the {engine} runtime is not built")
    _, _, et, inputs = _delegated(backend=delegated) if delegated else _lowered()
    record = et.get_etrecord()
    record.update_representative_inputs([inputs])
    record.save(tmp_path / "r.etrecord")
    program = runtime.load_program(et.buffer, enable_etdump=True, debug_buffer_size=1 << 20)
    program.load_method("forward").execute(list(inputs))
    program.write_etdump_result_to_file(tmp_path / "r.etdp", tmp_path / "r.bin")
    (tmp_path / "published_inspector.py").write_text(REFERENCE_SCRIPT)
    out = subprocess.run([python, str(tmp_path / "published_inspector.py"), str(tmp_path / "r.etdp"),
                          str(tmp_path / "r.etrecord"), str(tmp_path / "r.bin")],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if line.startswith(("OPS", "GAP", "DELEGATED")))
    ops = set(lines["OPS"].split(","))
    want = {"aten.convolution.default", "aten.sum.dim_IntList", "aten.mul.Tensor", "aten.add.Tensor"}
    assert want | ({"aten.linear.default"} if delegated == "XnnpackBackend" else {"aten.addmm.default",
                                                                                 "aten.relu.default"}) <= ops
    if delegated:  # the delegate's own events, named by its backend, carry their op types too
        assert set(lines["DELEGATED"].split(",")) == {delegated}
    else:
        assert float(lines["GAP"]) < 1e-10


def _delegated(generate=True, backend="ExecutorBackend"):
    if backend == "ExecutorBackend":
        from executorch.exir.backend.test.demos.rpc.executor_backend_partitioner import (
            ExecutorBackendPartitioner as Partitioner,
        )
    else:
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner as Partitioner

    inputs = _inputs()
    ep = torch.export.export(ConvLinear(), inputs)
    edge = to_edge_transform_and_lower(ep, partitioner=[Partitioner()], generate_etrecord=generate)
    return ep, edge, edge.to_executorch(), inputs


def test_a_delegated_program_is_stored_in_the_published_layout_and_read_back(tmp_path):
    ep, edge, et, inputs = _delegated(generate=False)
    lowered_ep = edge.exported_program()
    generate_etrecord(tmp_path / "d.etrecord", edge, et, ep)
    with zipfile.ZipFile(tmp_path / "d.etrecord") as z:
        layout = json.loads(z.read("edge_dialect_exported_program/forward"))
    (call,) = [n for n in layout["graph_module"]["graph"]["nodes"] if "call_delegate" in n["target"]]
    assert call["target"] == "torch.ops.higher_order.executorch_call_delegate"
    assert call["inputs"][0]["name"] == "lowered_module_0" and "as_string" in call["inputs"][0]["arg"]
    assert [a["name"] for a in call["inputs"][1:]] == ["delegate_arg_0", "delegate_arg_1"]
    lowered = json.loads(call["inputs"][0]["arg"]["as_string"])
    assert lowered["backend_id"] == "ExecutorBackend" and lowered["original_module"]["schema_version"] == {
        "major": 5, "minor": 4}
    back = parse_etrecord(tmp_path / "d.etrecord").edge_dialect_program
    module = back.graph_module.lowered_module_0
    original = lowered_ep.graph_module.lowered_module_0
    assert module.backend_id == original.backend_id and module.processed_bytes == original.processed_bytes
    inner = {n.meta.get("debug_handle") for n in module.original_module.graph.nodes if n.op == "call_function"}
    assert inner == {n.meta.get("debug_handle") for n in original.original_module.graph.nodes
                     if n.op == "call_function"} and None not in inner
    # The program read back runs (the delegate's own graph, eagerly) and computes what the lowered one does.
    assert_outputs_close(list(back.module()(*inputs)), list(lowered_ep.module()(*inputs)))


@pytest.mark.parametrize("engine", ["python", "native"])
def test_delegate_events_get_op_types_from_the_etrecord(engine, tmp_path):
    from conftest import project_runtimes

    from executorch.devtools import Inspector

    runtime = project_runtimes().get(engine)
    if runtime is None:
        pytest.skip(f"the {engine} runtime is not built")
    _, _, et, inputs = _delegated()
    et.get_etrecord().save(tmp_path / "d.etrecord")
    program = runtime.load_program(et.buffer, enable_etdump=True)
    program.load_method("forward").execute(list(inputs))
    program.write_etdump_result_to_file(tmp_path / "d.etdp")
    events = Inspector(tmp_path / "d.etdp", str(tmp_path / "d.etrecord")).event_blocks[1].events
    nodes = [e for e in events if e.is_delegated_op]
    assert len(nodes) >= 6 and all(e.delegate_backend_name == "ExecutorBackend" for e in nodes)
    for e in nodes:  # `<op>.<overload>#<i>` is the edge node of that op, its op types those of its handle's nodes
        assert e.name.split(".")[0] in [t.split(".")[1] for t in e.op_types], (e.name, e.op_types)
    # The pieces of one decomposition share a handle, as the published to_edge gives them: the linear's.
    assert {tuple(e.op_types) for e in nodes if len(e.op_types) > 1} == {
        ("aten.permute_copy.default", "aten.addmm.default")}
    (call,) = [e for e in events if e.name == "DELEGATE_CALL"]
    assert call.delegate_backend_name == "ExecutorBackend"


class _CreatesMarker:
    """Unpickled, it would create the file `path`: the observable side effect of running code."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self):
        return open, (self.path, "w")


def _trapped_state_dict(marker: Path) -> bytes:
    buf = io.BytesIO()
    torch.save({"conv.weight": _CreatesMarker(marker)}, buf)
    return buf.getvalue()


def trapped_etrecord(tmp_path: Path, entry: str = "exported_program_state_dict", delegated: bool = False) -> tuple:
    """An ETRecord written the normal way, then its `entry` rewritten to hold a pickle that creates a
    marker file when unpickled (or for `entry` = "<program entry>:<delegate>", the state dict stored
    inside that program's delegate call); returns (record path, marker path)."""
    ep, edge, et, _ = _delegated(generate=False) if delegated else _lowered(generate=False)
    clean, path, marker = tmp_path / "clean.etrecord", tmp_path / "trapped.etrecord", tmp_path / "ran-code"
    generate_etrecord(clean, edge, et, ep)
    with zipfile.ZipFile(clean) as z:
        entries = {name: z.read(name) for name in z.namelist()}
    program, _, holder = entry.partition(":")
    if holder:
        layout = json.loads(entries[program])
        (call,) = [n for n in layout["graph_module"]["graph"]["nodes"] if "call_delegate" in n["target"]]
        lowered = json.loads(call["inputs"][0]["arg"]["as_string"])
        lowered["original_state_dict"] = base64.b64encode(_trapped_state_dict(marker)).decode()
        call["inputs"][0]["arg"]["as_string"] = json.dumps(lowered)
        entries[program] = json.dumps(layout).encode()
    else:  # a program's part, or an optional entry (reference_outputs) the record then gains
        entries[entry] = _trapped_state_dict(marker)
    with zipfile.ZipFile(path, "w") as z:
        for name, data in entries.items():
            z.writestr(name, data)
    return path, marker


@pytest.mark.parametrize("entry, named", [
    ("exported_program_state_dict", "'exported_program_state_dict'"),
    ("edge_dialect_exported_program/forward_constants", "'edge_dialect_exported_program/forward_constants'"),
    ("edge_dialect_exported_program/forward_example_inputs", "'edge_dialect_exported_program/forward_example_inputs'"),
    ("reference_outputs", "'reference_outputs'"),
    ("edge_dialect_exported_program/forward:lowered_module_0",
     "delegate 'lowered_module_0' in entry 'edge_dialect_exported_program/forward'"),
])
def test_a_pickled_object_in_an_etrecord_is_refused_without_running_it(tmp_path, entry, named):
    path, marker = trapped_etrecord(tmp_path, entry, delegated=":" in entry)
    with pytest.raises(ETRecordError) as info:
        parse_etrecord(path)
    assert not marker.exists(), "reading the ETRecord ran code from it"
    message = str(info.value)
    assert named in message and "weights_only" in message and "re-generate" in message, message
    assert str(path) in message and "\n" not in message
