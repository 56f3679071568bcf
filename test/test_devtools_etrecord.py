"""ETRecord: generate_etrecord on the managers, the zip layout, and reading it back (ours and the published one)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from executorch.devtools.compare import assert_outputs_close
from executorch.devtools.etrecord import ETRecord, generate_etrecord, parse_etrecord
from executorch.exir import to_edge, to_edge_transform_and_lower
from executorch.exir.error import ExportError
from executorch.exir.schema import KernelCall

sys.path.insert(0, str(Path(__file__).parent))
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
    by_handle = {n.meta["debug_handle"]: n for n in edge.exported_program().graph.nodes if "debug_handle" in n.meta}
    for pc in kernels:  # the instruction runs the out variant of its node's op
        op = plan.operators[plan.chains[0].instructions[pc].instr_args.op_index].name
        node = by_handle[handles[pc]]
        assert op.split("::")[1] in str(node.target)


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
gap = ins.calculate_numeric_gap("MSE")
print("OPS", ",".join(ops))
print("GAP", max(float(g[0]) for g in gap["gap"]))
"""


@pytest.mark.parametrize("engine", ["python", "native"])
def test_published_inspector_reads_our_etdump_and_etrecord(engine, tmp_path):
    python = os.environ.get("ET_REFERENCE_PYTHON")
    if not python:
        pytest.skip("ET_REFERENCE_PYTHON is not set; see ../shared/tools/reference-runtime/README.md")
    from conftest import project_runtimes

    runtime = project_runtimes().get(engine)
    if runtime is None:
        pytest.skip(f"the {engine} runtime is not built")
    _, _, et, inputs = _lowered()
    record = et.get_etrecord()
    record.update_representative_inputs([inputs])
    record.save(tmp_path / "r.etrecord")
    program = runtime.load_program(et.buffer, enable_etdump=True, debug_buffer_size=1 << 20)
    program.load_method("forward").execute(list(inputs))
    program.write_etdump_result_to_file(tmp_path / "r.etdp", tmp_path / "r.bin")
    (tmp_path / "published_inspector.py").write_text(REFERENCE_SCRIPT)
    out = subprocess.run([python, str(tmp_path / "published_inspector.py"), str(tmp_path / "r.etdp"), str(tmp_path / "r.etrecord"),
                          str(tmp_path / "r.bin")], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if line.startswith(("OPS", "GAP")))
    ops = set(lines["OPS"].split(","))
    assert {"aten.convolution.default", "aten.sum.dim_IntList", "aten.addmm.default", "aten.relu.default",
            "aten.mul.Tensor", "aten.add.Tensor"} <= ops
    assert float(lines["GAP"]) < 1e-10
