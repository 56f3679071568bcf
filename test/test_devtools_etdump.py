"""ETDump: the writer and reader, and what each engine records (`load_program(enable_etdump=True)`)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from executorch.devtools.compare import assert_outputs_close
from executorch.devtools.etdump import schema_flatcc as E
from executorch.devtools.etdump.serialize import (
    ETDumpError,
    deserialize_from_etdump_flatcc,
    serialize_to_etdump_flatcc,
)
from executorch.exir import to_edge, to_edge_transform_and_lower
from executorch.exir.schema import ScalarType

from conftest import project_runtimes  # noqa: E402

RUNTIMES = project_runtimes()


class ConvLinear(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 2, 3)
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x, y):
        z = self.conv(y).sum()
        return torch.relu(self.lin(x)) * 2 + z, z


def _inputs():
    torch.manual_seed(0)
    return (torch.randn(2, 4), torch.randn(1, 2, 5, 5))


def _sample() -> E.ETDumpFlatCC:
    tensor = E.Tensor(ScalarType.FLOAT, [2, 3], [3, 1], 128)
    return E.ETDumpFlatCC(0, [
        E.RunData("Default", -1, None, [E.Event(profile_event=E.ProfileEvent(
            "Method::init", -1, 0, -1, None, None, 10, 20))]),
        E.RunData("Execute", -1, [E.Allocator("planned")], [
            E.Event(debug_event=E.DebugEvent(None, 0, 3, -1, None, E.Value("Tensor", tensor=tensor))),
            E.Event(debug_event=E.DebugEvent(None, 0, 4, -1, None, E.Value(
                "TensorList", tensor_list=E.TensorList([tensor, tensor]), output=E.Bool(True)))),
            E.Event(debug_event=E.DebugEvent(None, 0, 5, -1, None, E.Value("Int", int_value=E.Int(-7)))),
            E.Event(profile_event=E.ProfileEvent(None, 0, 5, 2, None, b"\x01\x02", 1 << 40, (1 << 40) + 5)),
            E.Event(profile_event=E.ProfileEvent(None, 0, 5, -1, "conv#0", None, 30, 40)),
            E.Event(allocation_event=E.AllocationEvent(0, 4096)),
        ]),
    ])


def test_writer_and_reader_round_trip_every_table():
    data = serialize_to_etdump_flatcc(_sample())
    assert data[8:12] == b"ED00" and int.from_bytes(data[:4], "little") == len(data) - 4
    assert deserialize_from_etdump_flatcc(data) == _sample()


def test_reader_refuses_foreign_and_damaged_files():
    data = serialize_to_etdump_flatcc(_sample())
    with pytest.raises(ETDumpError, match="identifier"):
        deserialize_from_etdump_flatcc(data[:8] + b"XX00" + data[12:])
    with pytest.raises(ETDumpError, match="size prefix"):
        deserialize_from_etdump_flatcc(data[:-8])
    with pytest.raises(ETDumpError, match="too short"):
        deserialize_from_etdump_flatcc(b"\x04\x00")
    rng = random.Random(1)
    failures = 0
    for _ in range(300):  # any damage gives ETDumpError or a readable dump, never another exception
        damaged = bytearray(data)
        for _ in range(3):
            damaged[rng.randrange(12, len(damaged))] = rng.randrange(256)
        try:
            deserialize_from_etdump_flatcc(bytes(damaged))
        except ETDumpError:
            failures += 1
    assert failures > 0


def _profile(runtime, pte: bytes, inputs, tmp_path: Path, debug: int):
    program = runtime.load_program(pte, enable_etdump=True, debug_buffer_size=debug)
    method = program.load_method("forward")
    outputs = [method.execute(list(inputs)) for _ in range(2)][-1]
    program.write_etdump_result_to_file(tmp_path / "run.etdp", tmp_path / "run.bin")
    dump = deserialize_from_etdump_flatcc((tmp_path / "run.etdp").read_bytes())
    return dump, (tmp_path / "run.bin").read_bytes(), outputs


@pytest.mark.parametrize("engine", sorted(RUNTIMES))
def test_every_instruction_is_timed_and_outputs_are_in_the_debug_buffer(engine, tmp_path):
    from executorch.exir import schema as S
    from executorch.exir._serialize import read_program

    inputs = _inputs()
    pte = to_edge(torch.export.export(ConvLinear(), inputs)).to_executorch().buffer
    dump, debug, outputs = _profile(RUNTIMES[engine], pte, inputs, tmp_path, 1 << 16)
    assert [r.name for r in dump.run_data] == ["Default", "Execute", "Execute"]
    load = {e.profile_event.name for e in dump.run_data[0].events}
    assert load == {"Program::load_method", "Method::init"}
    plan = read_program(pte).execution_plan[0]
    kernels = [pc for pc, i in enumerate(plan.chains[0].instructions) if isinstance(i.instr_args, S.KernelCall)]
    # With a debug buffer every engine runs every kernel as written (the native one does not fold a
    # linear's weight transpose at load then), so each logs its own output.
    for block in dump.run_data[1:]:
        prof = [e.profile_event for e in block.events if e.profile_event]
        calls = [p for p in prof if p.name == "OPERATOR_CALL"]
        assert [p.instruction_id for p in calls] == kernels
        inner = [p for p in prof if p.name.startswith("native_call_")]
        assert [p.instruction_id for p in inner] == kernels
        for outer, call in zip(calls, inner):  # the kernel's own time lies inside its instruction's
            assert outer.start_time <= call.start_time <= call.end_time <= outer.end_time
        (run,) = [p for p in prof if p.name == "Method::execute"]
        assert all(run.start_time <= p.start_time and p.end_time <= run.end_time for p in prof if p is not run)
    last = dump.run_data[-1].events
    logged = [e.debug_event for e in last if e.debug_event and e.debug_event.debug_entry.output is None]
    assert [d.instruction_id for d in logged] == kernels
    finals = [e.debug_event.debug_entry.tensor for e in last if e.debug_event and e.debug_event.debug_entry.output]
    assert len(finals) == len(outputs)
    for t, want in zip(finals, outputs):
        got = torch.frombuffer(bytearray(debug[t.offset:t.offset + want.numel() * 4]), dtype=torch.float32)
        assert_outputs_close([got.reshape(t.sizes)], [want])


@pytest.mark.parametrize("engine", sorted(RUNTIMES))
def test_executor_backend_nodes_are_delegate_events_inside_their_call(engine, tmp_path):
    from executorch.exir.backend.test.demos.rpc.executor_backend_partitioner import ExecutorBackendPartitioner

    inputs = _inputs()
    model = ConvLinear()
    edge = to_edge_transform_and_lower(torch.export.export(model, inputs),
                                       partitioner=[ExecutorBackendPartitioner()])
    pte = edge.to_executorch().buffer
    dump, _, outputs = _profile(RUNTIMES[engine], pte, inputs, tmp_path, 0)
    assert_outputs_close(outputs, list(model(*inputs)))
    prof = [e.profile_event for e in dump.run_data[-1].events if e.profile_event]
    calls = [p for p in prof if p.name == "DELEGATE_CALL"]
    assert calls
    nodes = [p for p in prof if p.delegate_debug_id_str]
    assert nodes and all("#" in p.delegate_debug_id_str for p in nodes)
    names = {p.delegate_debug_id_str.split("#")[0] for p in nodes}
    assert "convolution.out" in names
    for p in nodes:
        (call,) = [c for c in calls if c.instruction_id == p.instruction_id]
        assert call.start_time <= p.start_time <= p.end_time <= call.end_time


def test_no_etdump_means_no_tracer(tmp_path):
    inputs = _inputs()
    pte = to_edge(torch.export.export(ConvLinear(), inputs)).to_executorch().buffer
    for runtime in RUNTIMES.values():
        program = runtime.load_program(pte)
        program.load_method("forward").execute(list(inputs))
        with pytest.raises(Exception, match="records no ETDump"):
            program.write_etdump_result_to_file(tmp_path / "x.etdp")
        assert not (tmp_path / "x.etdp").exists()


RUNNER = Path(__file__).resolve().parents[1] / "cmake-out" / "examples" / "executor_runner" / "executor_runner"


@pytest.mark.skipif(not RUNNER.exists(), reason="executor_runner is not built (tools/run_tests.sh builds it)")
def test_executor_runner_writes_etdump_and_debug_buffer(tmp_path):
    import subprocess

    from executorch.devtools import Inspector

    ones = tuple(torch.ones_like(t) for t in _inputs())  # what the runner feeds by default (--fill ones)
    et = to_edge_transform_and_lower(torch.export.export(ConvLinear(), ones), generate_etrecord=True).to_executorch()
    et.write_to_file(tmp_path / "m.pte")
    et.get_etrecord().save(tmp_path / "m.etrecord")
    run = lambda *a: subprocess.run([str(RUNNER), "--model_path", str(tmp_path / "m.pte"), *a],  # noqa: E731
                                    capture_output=True, text=True, timeout=120)
    out = run("--iterations", "3", "--etdump_path", str(tmp_path / "m.etdp"),
              "--debug_output_path", str(tmp_path / "m.bin"), "--debug_buffer_size", str(1 << 16))
    assert out.returncode == 0, out.stderr
    assert "4 event blocks" in out.stdout
    dump = deserialize_from_etdump_flatcc((tmp_path / "m.etdp").read_bytes())
    assert [r.name for r in dump.run_data] == ["Default", "Execute", "Execute", "Execute"]
    inspector = Inspector(tmp_path / "m.etdp", str(tmp_path / "m.etrecord"), tmp_path / "m.bin")
    kernels = [e for e in inspector.event_blocks[1].events if e.name.startswith("native_call_")]
    assert len(kernels) >= 6 and all(len(e.perf_data) == 3 and e.op_types for e in kernels)
    # The debug buffer holds each kernel's output: the last one is the program's first output.
    want = RUNTIMES["python"].load_program(et.buffer).load_method(
        "forward").execute(list(ones))
    assert_outputs_close([kernels[-1].debug_data[-1]], [want[0]])
    conv = next(e for e in kernels if "convolution" in e.name)
    ep = et.get_etrecord().exported_program
    assert_outputs_close([conv.debug_data[-1]], [torch.nn.functional.conv2d(
        ones[1], ep.state_dict["conv.weight"], ep.state_dict["conv.bias"])])
    # The debug options need each other and --etdump_path; an unwritable path is an error, not a crash.
    out = run("--debug_output_path", str(tmp_path / "x.bin"), "--debug_buffer_size", "64")
    assert out.returncode != 0 and "--etdump_path" in out.stderr
    out = run("--etdump_path", str(tmp_path / "no" / "such" / "dir.etdp"))
    assert out.returncode != 0 and "cannot write" in out.stderr
