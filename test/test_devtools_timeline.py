"""The timeline: an ETDump as Trace Event Format JSON, checked against the format's rules and the Inspector."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from executorch.devtools import Inspector
from executorch.devtools.etdump.serialize import deserialize_from_etdump_flatcc
from executorch.devtools.timeline import build_trace
from executorch.exir import to_edge_transform_and_lower

from conftest import project_runtimes  # noqa: E402
from test_devtools_etdump import ConvLinear, _inputs  # noqa: E402

RUNTIMES = project_runtimes()
# Phases the Trace Event Format defines (duration, complete, instant, counter, async, flow, sample,
# object, metadata, memory dump, mark, clock sync, context).
PHASES = set("BEXiIC") | set("bne") | set("STFp") | {"s", "t", "f", "P", "N", "O", "D", "M", "V", "v", "R", "c",
                                                       "(", ")"}
METADATA = {"process_name": "name", "thread_name": "name", "process_sort_index": "sort_index",
            "thread_sort_index": "sort_index", "process_labels": "labels"}


def check_trace_event_format(trace) -> None:
    """Raise AssertionError where `trace` breaks the Trace Event Format's rules for what we write:
    the JSON object form, known phases, complete events with non-negative microsecond times,
    metadata events with their argument, and complete events that nest within each (pid, tid)."""
    assert isinstance(trace, dict) and isinstance(trace.get("traceEvents"), list), "not the JSON object form"
    assert trace.get("displayTimeUnit", "ms") in ("ms", "ns"), "displayTimeUnit is ms or ns"
    named_threads, tracks = set(), {}
    for e in trace["traceEvents"]:
        assert isinstance(e, dict) and e.get("ph") in PHASES, f"unknown phase in {e}"
        assert isinstance(e.get("name"), str) and isinstance(e.get("pid"), int) and isinstance(e.get("tid"), int), e
        if e["ph"] == "M":
            assert e["name"] in METADATA and METADATA[e["name"]] in e.get("args", {}), f"bad metadata event {e}"
            if e["name"] == "thread_name":
                named_threads.add((e["pid"], e["tid"]))
            continue
        assert e["ph"] == "X", f"this writer emits complete events only, got {e}"
        for key in ("ts", "dur"):
            v = e.get(key)
            assert isinstance(v, (int, float)) and math.isfinite(v) and v >= 0, f"{key} of {e}"
        tracks.setdefault((e["pid"], e["tid"]), []).append(e)
    for track, events in tracks.items():
        assert track in named_threads, f"track {track} has no thread_name"
        # Whole nanoseconds: ts and dur are microseconds with at most three decimals.
        spans = sorted((round(e["ts"] * 1000), -round(e["dur"] * 1000), e["name"]) for e in events)
        stack: list = []
        for start, neg_dur, name in spans:
            end = start - neg_dur
            while stack and stack[-1][1] <= start:
                stack.pop()
            assert not stack or end <= stack[-1][1], \
                f"{name} [{start}, {end}] ns overlaps {stack[-1][2]} [{stack[-1][0]}, {stack[-1][1]}] on track {track}"
            stack.append((start, end, name))


def test_the_checker_rejects_broken_traces():
    ok = {"traceEvents": [
        {"name": "thread_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "t"}},
        {"name": "a", "ph": "X", "pid": 1, "tid": 0, "ts": 0.0, "dur": 10.0},
        {"name": "b", "ph": "X", "pid": 1, "tid": 0, "ts": 2.0, "dur": 3.0}]}
    check_trace_event_format(ok)
    broken = [
        lambda t: t["traceEvents"][2].update(dur=9.0),    # b ends after a: not nested
        lambda t: t["traceEvents"][1].update(ph="Q"),     # no such phase
        lambda t: t["traceEvents"][1].update(ts=-1.0),    # negative time
        lambda t: t["traceEvents"].pop(0),                # a track without a name
        lambda t: t["traceEvents"][0]["args"].clear(),    # metadata without its argument
    ]
    for damage in broken:
        trace = json.loads(json.dumps(ok))
        damage(trace)
        with pytest.raises(AssertionError):
            check_trace_event_format(trace)


def _profiled(engine: str, tmp_path: Path, partitioner=None, runs: int = 3):
    inputs = _inputs()
    et = to_edge_transform_and_lower(torch.export.export(ConvLinear(), inputs), generate_etrecord=partitioner is None,
                                     partitioner=partitioner).to_executorch()
    etrecord = None
    if partitioner is None:
        et.get_etrecord().save(tmp_path / "r.etrecord")
        etrecord = tmp_path / "r.etrecord"
    program = RUNTIMES[engine].load_program(et.buffer, enable_etdump=True)
    method = program.load_method("forward")
    for _ in range(runs):
        method.execute(list(inputs))
    program.write_etdump_result_to_file(tmp_path / "r.etdp")
    return tmp_path / "r.etdp", etrecord


def _check_against_inspector(trace: dict, inspector: Inspector, dump) -> None:
    timed = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    # One track per event block, named after it.
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert names == {i: f"{b.name} #{i}" for i, b in enumerate(dump.run_data)}
    # Microseconds from the dump's first event: every event's recorded ticks (ns) come back exactly.
    t0 = min(p.start_time for b in dump.run_data for ev in b.events if (p := ev.profile_event))
    recorded = sorted((i, p.start_time - t0, p.end_time - p.start_time) for i, b in enumerate(dump.run_data)
                      for ev in b.events if (p := ev.profile_event))
    assert sorted((e["tid"], round(e["ts"] * 1000), round(e["dur"] * 1000)) for e in timed) == recorded
    # The Inspector's table: each row's per-run durations are its trace events', track by track.
    rows = {}
    for block in inspector.event_blocks:
        for ev in block.events:
            rows[(block.name, ev.name, ev._instruction_id)] = ev.perf_data
    got: dict = {}
    for e in sorted(timed, key=lambda e: e["tid"]):
        got.setdefault((e["args"]["event_block"], e["name"], e["args"].get("instruction_id")), []).append(e["dur"])
    assert got.keys() == rows.keys()
    for key, durations in got.items():
        assert durations == pytest.approx([ms * 1000 for ms in rows[key]], abs=1e-3), key
    if importlib.util.find_spec("pandas") is not None:
        df = inspector.to_dataframe()
        assert sum(len(r) for r in df["raw"]) == len(timed)


@pytest.mark.parametrize("engine", sorted(RUNTIMES))
def test_timeline_is_trace_event_format_and_matches_the_inspector(engine, tmp_path):
    etdp, etrecord = _profiled(engine, tmp_path)
    out = subprocess.run([sys.executable, "-m", "executorch.devtools", "timeline", str(etdp), "--etrecord",
                          str(etrecord), "-o", str(tmp_path / "trace.json")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "on 4 tracks" in out.stdout
    trace = json.loads((tmp_path / "trace.json").read_text())
    check_trace_event_format(trace)
    inspector = Inspector(etdp, str(etrecord))
    _check_against_inspector(trace, inspector, deserialize_from_etdump_flatcc(etdp.read_bytes()))
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    assert kernels and all(e["args"]["op_types"] for e in kernels)
    assert {"aten.convolution.default", "aten.addmm.default"} <= {t for e in kernels for t in e["args"]["op_types"]}


@pytest.mark.parametrize("engine", sorted(RUNTIMES))
def test_delegate_nodes_nest_under_their_call(engine, tmp_path):
    from executorch.exir.backend.test.demos.rpc.executor_backend_partitioner import ExecutorBackendPartitioner

    etdp, _ = _profiled(engine, tmp_path, partitioner=[ExecutorBackendPartitioner()], runs=2)
    inspector = Inspector(etdp)
    trace = build_trace(inspector)
    check_trace_event_format(trace)
    _check_against_inspector(trace, inspector, deserialize_from_etdump_flatcc(etdp.read_bytes()))
    for tid in {e["tid"] for e in trace["traceEvents"] if e["name"] == "DELEGATE_CALL"}:
        (call,) = [e for e in trace["traceEvents"] if e["name"] == "DELEGATE_CALL" and e["tid"] == tid]
        nodes = [e for e in trace["traceEvents"] if e.get("cat") == "delegate" and e["tid"] == tid]
        assert len(nodes) >= 5
        for n in nodes:
            assert call["ts"] <= n["ts"] and n["ts"] + n["dur"] <= call["ts"] + call["dur"] + 1e-9


def test_an_overrunning_delegate_event_is_clipped_to_its_call():
    from executorch.devtools.etdump import schema_flatcc as E
    from executorch.devtools.etdump.serialize import serialize_to_etdump_flatcc

    dump = E.ETDumpFlatCC(0, [E.RunData("Execute", -1, None, [
        E.Event(profile_event=E.ProfileEvent("DELEGATE_CALL", 0, 0, -1, None, None, 1000, 5000)),
        E.Event(profile_event=E.ProfileEvent(None, 0, 0, 3, None, None, 2000, 7000)),  # ends after its call
    ])])
    trace = build_trace(Inspector(etdump_data=serialize_to_etdump_flatcc(dump)))
    check_trace_event_format(trace)
    node = next(e for e in trace["traceEvents"] if e.get("cat") == "delegate")
    assert (node["ts"], node["dur"], node["args"]["recorded_dur_us"]) == (1.0, 3.0, 5.0)


def test_timeline_command_errors_are_one_line(tmp_path):
    (tmp_path / "bad.etdp").write_bytes(b"\x10\x00\x00\x00not an etdump....")
    for argv, want in ((["missing.etdp"], "does not exist"), ([str(tmp_path / "bad.etdp")], "ETDump is malformed")):
        out = subprocess.run([sys.executable, "-m", "executorch.devtools", "timeline", *argv, "-o",
                              str(tmp_path / "t.json")], capture_output=True, text=True)
        assert out.returncode == 1 and want in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert not (tmp_path / "t.json").exists()


def test_timeline_command_refuses_an_etrecord_holding_a_pickled_object(tmp_path):
    from executorch.devtools.etdump import schema_flatcc as E
    from executorch.devtools.etdump.serialize import serialize_to_etdump_flatcc

    from test_devtools_etrecord import trapped_etrecord

    etrecord, marker = trapped_etrecord(tmp_path)
    (tmp_path / "r.etdp").write_bytes(serialize_to_etdump_flatcc(E.ETDumpFlatCC(0, [E.RunData("Execute", -1, None, [
        E.Event(profile_event=E.ProfileEvent("Method::execute", 0, 0, -1, None, None, 1000, 5000))])])))
    out = subprocess.run([sys.executable, "-m", "executorch.devtools", "timeline", str(tmp_path / "r.etdp"),
                          "--etrecord", str(etrecord), "-o", str(tmp_path / "t.json")], capture_output=True, text=True)
    assert not marker.exists(), "the timeline command ran code from the ETRecord"
    assert out.returncode == 1 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "entry 'exported_program_state_dict' holds a pickled object that weights_only loading refuses" in out.stderr
    assert not (tmp_path / "t.json").exists()


@pytest.mark.parametrize("engine", sorted(RUNTIMES))
def test_xnnpack_nodes_are_named_delegate_events_under_their_call(engine, tmp_path):
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.backends.xnnpack.serialization.event_names import event_names
    from executorch.backends.xnnpack.serialization.xnnpack_graph_serialize import deserialize_xnnpack_binary
    from executorch.devtools.compare import assert_outputs_close

    inputs = _inputs()
    model = ConvLinear()
    et = to_edge_transform_and_lower(torch.export.export(model, inputs), partitioner=[XnnpackPartitioner()],
                                     generate_etrecord=True).to_executorch()
    et.get_etrecord().save(tmp_path / "x.etrecord")
    program = RUNTIMES[engine].load_program(et.buffer, enable_etdump=True)
    method = program.load_method("forward")
    for _ in range(2):
        outputs = method.execute(list(inputs))
    assert_outputs_close(outputs, list(model(*inputs)))
    program.write_etdump_result_to_file(tmp_path / "x.etdp")
    inspector = Inspector(tmp_path / "x.etdp", str(tmp_path / "x.etrecord"))
    events = inspector.event_blocks[1].events
    # Each delegate event is one payload node, named as event_names() names the payload's nodes.
    lowered = [m for _, m in et.exported_program().graph_module.named_children() if hasattr(m, "processed_bytes")]
    names = {n for m in lowered for n in event_names(deserialize_xnnpack_binary(m.processed_bytes).graph.xnodes)}
    nodes = [e for e in events if e.is_delegated_op]
    assert {e.name for e in nodes} <= names and {"Conv2d #1", "FullyConnected #1"} <= {e.name for e in nodes}
    assert all(e.delegate_backend_name == "XnnpackBackend" and len(e.perf_data) == 2 for e in nodes)
    # The ahead-of-time map gives the compute nodes their edge ops.
    by_name = {e.name: e.op_types for e in nodes}
    assert by_name["Conv2d #1"] == ["aten.convolution.default"]
    assert by_name["FullyConnected #1"] == ["aten.linear.default"]
    trace = build_trace(inspector)
    check_trace_event_format(trace)
    for e in trace["traceEvents"]:
        if e.get("cat") == "delegate":
            (call,) = [c for c in trace["traceEvents"] if c["name"] == "DELEGATE_CALL" and c["tid"] == e["tid"]
                       and c["args"]["instruction_id"] == e["args"]["instruction_id"]]
            assert call["ts"] <= e["ts"] and e["ts"] + e["dur"] <= call["ts"] + call["dur"]
