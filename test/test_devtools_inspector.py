"""Our Inspector over our ETDump and ETRecord: grouped events, op types, the pandas extra's error."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from executorch.devtools import Inspector
from executorch.exir import to_edge_transform_and_lower

from conftest import project_runtimes  # noqa: E402
from test_devtools_etdump import ConvLinear, _inputs  # noqa: E402


@pytest.mark.parametrize("engine", sorted(project_runtimes()))
def test_events_are_grouped_per_instruction_with_their_op_types(engine, tmp_path):
    inputs = _inputs()
    et = to_edge_transform_and_lower(torch.export.export(ConvLinear(), inputs), generate_etrecord=True).to_executorch()
    record = et.get_etrecord()
    record.update_representative_inputs([inputs])
    record.save(tmp_path / "r.etrecord")
    program = project_runtimes()[engine].load_program(et.buffer, enable_etdump=True, debug_buffer_size=1 << 20)
    method = program.load_method("forward")
    for _ in range(3):
        method.execute(list(inputs))
    program.write_etdump_result_to_file(tmp_path / "r.etdp", tmp_path / "r.bin")
    inspector = Inspector(tmp_path / "r.etdp", str(tmp_path / "r.etrecord"), tmp_path / "r.bin")
    assert [b.name for b in inspector.event_blocks] == ["Default", "Execute"]
    kernels = [e for e in inspector.event_blocks[1].events if e.name.startswith("native_call_")]
    assert kernels and all(len(e.perf_data) == 3 and all(t >= 0 for t in e.perf_data) for e in kernels)
    ops = {t for e in kernels for t in e.op_types}
    assert {"aten.convolution.default", "aten.addmm.default", "aten.relu.default"} <= ops
    conv = next(e for e in kernels if "convolution" in e.name)
    torch.testing.assert_close(conv.debug_data[-1], torch.nn.functional.conv2d(
        inputs[1], record.exported_program.state_dict["conv.weight"], record.exported_program.state_dict["conv.bias"]))
    if importlib.util.find_spec("pandas") is None:
        with pytest.raises(ImportError, match=r"pip install executorch\[devtools\]"):
            inspector.to_dataframe()
    else:
        gap = inspector.calculate_numeric_gap("MSE")
        assert len(gap) >= 5 and max(g[0] for g in gap["gap"]) < 1e-10


PUBLISHED_RUN = r'''
import inspect, json, sys
import torch
from executorch.devtools import Inspector
from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import Runtime

MODEL_SOURCE
out = sys.argv[1]
inputs = _inputs()
et = to_edge_transform_and_lower(torch.export.export(ConvLinear(), inputs), generate_etrecord=True).to_executorch()
record = et.get_etrecord()
record.update_representative_inputs([inputs])
record.save(f"{out}/pub.etrecord")
program = Runtime.get().load_program(et.buffer, enable_etdump=True, debug_buffer_size=1 << 20)
method = program.load_method("forward")
for _ in range(3):
    method.execute(list(inputs))
program.write_etdump_result_to_file(f"{out}/pub.etdp", f"{out}/pub.bin")
ins = Inspector(etdump_path=f"{out}/pub.etdp", etrecord=f"{out}/pub.etrecord", debug_buffer_path=f"{out}/pub.bin")
rows = [{"block": b.name, "name": e.name, "raw": list(e.perf_data.raw) if e.perf_data else [],
         "op_types": list(e.op_types), "delegated": e.is_delegated_op} for b in ins.event_blocks for e in b.events]
json.dump(rows, open(f"{out}/pub.json", "w"))
'''


def test_our_inspector_reads_the_published_runtimes_etdump_and_etrecord(tmp_path):
    """The reverse direction: the published stack exports, records and runs; our Inspector reads its files."""
    import inspect
    import json
    import os
    import subprocess

    import test_devtools_etdump

    python = os.environ.get("ET_REFERENCE_PYTHON")
    if not python:
        pytest.skip("ET_REFERENCE_PYTHON is not set; see ../shared/tools/reference-runtime/README.md")
    source = (inspect.getsource(test_devtools_etdump.ConvLinear) + "\n\n"
              + inspect.getsource(test_devtools_etdump._inputs))
    (tmp_path / "published_run.py").write_text(PUBLISHED_RUN.replace("MODEL_SOURCE", source))
    out = subprocess.run([python, str(tmp_path / "published_run.py"), str(tmp_path)], capture_output=True, text=True,
                         timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    published = json.loads((tmp_path / "pub.json").read_text())
    ours = Inspector(tmp_path / "pub.etdp", str(tmp_path / "pub.etrecord"), tmp_path / "pub.bin")
    mine = [{"block": b.name, "name": e.name, "raw": e.perf_data, "op_types": e.op_types,
             "delegated": e.is_delegated_op} for b in ours.event_blocks for e in b.events]
    key = lambda r: (r["block"], r["name"], tuple(r["op_types"]), tuple(r["raw"]))  # noqa: E731
    assert len(mine) == len(published) > 10
    for a, b in zip(sorted(mine, key=key), sorted(published, key=key)):
        assert (a["block"], a["name"], a["op_types"], a["delegated"]) == (b["block"], b["name"], b["op_types"],
                                                                          b["delegated"])
        assert a["raw"] == pytest.approx(b["raw"], rel=1e-9, abs=1e-12)
    kernels = [r for r in mine if r["name"].startswith("native_call_")]
    assert len(kernels) >= 7 and all(len(r["raw"]) == 3 for r in kernels)  # every op timed in every run
    if importlib.util.find_spec("pandas") is not None:
        gap = ours.calculate_numeric_gap("MSE")
        assert len(gap) >= 6 and max(g[0] for g in gap["gap"]) < 1e-10


def test_an_etrecord_holding_a_pickled_object_is_refused_without_running_it(tmp_path):
    from executorch.devtools.etdump import schema_flatcc as E
    from executorch.devtools.etdump.serialize import serialize_to_etdump_flatcc
    from executorch.exir._etrecord import ETRecordError

    from test_devtools_etrecord import trapped_etrecord

    path, marker = trapped_etrecord(tmp_path, "edge_dialect_exported_program/forward_state_dict")
    dump = serialize_to_etdump_flatcc(E.ETDumpFlatCC(0, [E.RunData("Execute", -1, None, [
        E.Event(profile_event=E.ProfileEvent("Method::execute", 0, 0, -1, None, None, 1000, 5000))])]))
    with pytest.raises(ETRecordError, match="entry 'edge_dialect_exported_program/forward_state_dict' holds a "
                                            "pickled object that weights_only loading refuses"):
        Inspector(etdump_data=dump, etrecord=str(path))
    assert not marker.exists(), "the Inspector ran code from the ETRecord"


# Numeric debugging: with a debug buffer, every engine logs each node's own output. The native engine
# skips its load-time rewrites (fusion, batch-norm folding, layouts) for a method loaded with an event
# tracer; a delegate's call is one row, its last output against its partition's last node.
_GAP_MODELS = ["mobilenet_v2", "resnet18", "transformer_encoder"]


def _debug_run(engine: str, et, inputs, tmp_path):
    record = et.get_etrecord()
    record.update_representative_inputs([inputs])
    record.save(tmp_path / "r.etrecord")
    program = project_runtimes()[engine].load_program(et.buffer, enable_etdump=True, debug_buffer_size=64 << 20)
    program.load_method("forward").execute(list(inputs))
    program.write_etdump_result_to_file(tmp_path / "r.etdp", tmp_path / "r.bin")
    return Inspector(tmp_path / "r.etdp", str(tmp_path / "r.etrecord"), tmp_path / "r.bin")


@pytest.fixture(scope="module")
def gap_programs():
    from conftest import load_zoo

    made = {}

    def get(name: str, xnnpack: bool):
        if (name, xnnpack) not in made:
            model, inputs = load_zoo().MODELS[name]()
            partitioner = []
            if xnnpack:
                from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

                partitioner = [XnnpackPartitioner()]
            et = to_edge_transform_and_lower(torch.export.export(model.eval(), inputs), partitioner=partitioner,
                                             generate_etrecord=True).to_executorch()
            made[name, xnnpack] = et, inputs
        return made[name, xnnpack]

    return get


@pytest.mark.skipif(importlib.util.find_spec("pandas") is None, reason="the numeric gap table needs pandas")
@pytest.mark.parametrize("xnnpack", [False, True], ids=["portable", "xnnpack"])
@pytest.mark.parametrize("name", _GAP_MODELS)
@pytest.mark.parametrize("engine", sorted(project_runtimes()))
def test_numeric_gap_against_the_etrecord_is_rounding_on_every_engine(gap_programs, engine, name, xnnpack, tmp_path):
    et, inputs = gap_programs(name, xnnpack)
    gap = _debug_run(engine, et, inputs, tmp_path).calculate_numeric_gap("MSE")
    if xnnpack:  # one delegate: one row, the call's output against the partition's last node
        assert list(gap["runtime_ops"]) == [["DELEGATE_CALL"]]
    else:  # a row per source op: a decomposition's pieces (a linear's permute and addmm) share one
        assert len(gap) >= 30
    worst = max(g[0] for g in gap["gap"])
    scale = max(float(torch.mean(t.float() ** 2)) for t in gap["aot_intermediate_output"])
    assert worst <= 1e-9 * max(scale, 1.0), (worst, scale)


def test_a_convolution_and_its_relu_each_log_their_own_output_natively(tmp_path):
    if "native" not in project_runtimes():
        pytest.skip("the native runtime is not built")

    class ConvRelu(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3)

        def forward(self, x):
            return torch.relu(self.conv(x))

    torch.manual_seed(0)
    model, inputs = ConvRelu().eval(), (torch.randn(1, 3, 10, 10),)
    et = to_edge_transform_and_lower(torch.export.export(model, inputs), generate_etrecord=True).to_executorch()
    events = {e.name: e for b in _debug_run("native", et, inputs, tmp_path).event_blocks for e in b.events}
    conv = model.conv(inputs[0]).detach()
    torch.testing.assert_close(events["native_call_convolution.out"].debug_data[-1], conv)
    torch.testing.assert_close(events["native_call_relu.out"].debug_data[-1], torch.relu(conv))
    assert not torch.equal(conv, torch.relu(conv))  # the two outputs differ, so each check means something
