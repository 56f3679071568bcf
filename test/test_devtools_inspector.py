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
    source = inspect.getsource(test_devtools_etdump.ConvLinear) + "\n\n" + inspect.getsource(test_devtools_etdump._inputs)
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
