"""`.ptd` external weights and `.bpte` bundled programs: writing, reading, running, interop, bad input."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from executorch.devtools import BundledProgram
from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
from executorch.devtools.bundled_program.run import run_bundled_program
from executorch.devtools.bundled_program.serialize import (
    deserialize_from_flatbuffer_to_bundled_program,
    serialize_from_bundled_program_to_flatbuffer,
)
from executorch.devtools.compare import assert_outputs_close
from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
from executorch.exir._tensor_data import tensor_bytes
from executorch.exir.error import ExportError, SerializeError
from executorch.extension.flat_tensor.serialize.serialize import FlatTensorSerializer, read_ptd
from executorch.runtime import ExecuTorchError

from conftest import REPO, load_zoo, project_runtimes  # noqa: E402
from ptd_models import TwoLinear, TwoOut  # noqa: E402

RUNTIMES = project_runtimes()
DEFAULT_PTD = "_default_external_constant.ptd"


def _export(model, inputs, **config):
    ep = torch.export.export(model.eval(), inputs)
    return to_edge_transform_and_lower(ep).to_executorch(ExecutorchBackendConfig(**config))


def _small(tmp_path: Path, **config):
    torch.manual_seed(0)
    model, inputs = TwoLinear(), (torch.randn(4, 6),)
    program = _export(model, inputs, **config)
    program.write_to_file(tmp_path / "m.pte")
    program.write_tensor_data_to_file(tmp_path)
    return model, inputs, program


# .ptd ------------------------------------------------------------------------------------------

def test_external_constants_leave_the_pte(tmp_path):
    model, inputs, program = _small(tmp_path, external_constants=True)
    inline = _export(model, inputs)
    assert list(program.data_files) == [DEFAULT_PTD[:-4]]
    entries = read_ptd((tmp_path / DEFAULT_PTD).read_bytes())
    assert sorted(entries) == ["first.bias", "first.weight", "second.bias", "second.weight"]
    weight = entries["first.weight"]
    assert bytes(weight.data) == bytes(tensor_bytes(model.first.weight.detach()))
    assert list(weight.tensor_layout.sizes) == [5, 6]
    for name, value in model.state_dict().items():
        data = bytes(tensor_bytes(value))
        assert data in inline.buffer and data not in program.buffer, name
    assert (tmp_path / DEFAULT_PTD).read_bytes() == program.data_files[DEFAULT_PTD[:-4]]


@pytest.mark.parametrize("engine", sorted(RUNTIMES))
def test_pte_and_ptd_run_on_each_engine(engine, tmp_path):
    model, inputs, _ = _small(tmp_path, external_constants=True)
    rt = RUNTIMES[engine]
    out = (rt.load_program(tmp_path / "m.pte", data_path=tmp_path / DEFAULT_PTD).load_method("forward")
           .execute(list(inputs)))
    assert_outputs_close(out, [model(*inputs)])
    with pytest.raises(ExecuTorchError, match="first.weight"):
        rt.load_program(tmp_path / "m.pte").load_method("forward")


@pytest.mark.parametrize("name", ["mobilenet_v2", "resnet18", "transformer_encoder", "multi_io", "vit_tiny",
                                  "llama_decoder"])
def test_zoo_model_with_ptd_matches_eager_on_both_engines(name, tmp_path):
    model, inputs = load_zoo().MODELS[name]()
    program = _export(model, inputs, external_constants=True)
    program.write_to_file(tmp_path / "m.pte")
    program.write_tensor_data_to_file(tmp_path)
    expected = model(*inputs)
    for engine, rt in RUNTIMES.items():
        out = rt.load_program(tmp_path / "m.pte", data_path=tmp_path / DEFAULT_PTD).load_method("forward").execute(
            list(inputs))
        assert_outputs_close(out, expected if isinstance(expected, (list, tuple)) else [expected])


def test_callable_picks_tensors_and_files(tmp_path):
    def tag(node):
        return "firsts" if "first" in node.name else None

    model, inputs, program = _small(tmp_path, external_constants=tag)
    assert sorted(read_ptd((tmp_path / "firsts.ptd").read_bytes())) == ["first.bias", "first.weight"]
    for rt in RUNTIMES.values():
        out = rt.load_program(tmp_path / "m.pte", data_path=tmp_path / "firsts.ptd").load_method("forward").execute(
            list(inputs))
        assert_outputs_close(out, [model(*inputs)])


def test_bad_external_constants_values_are_refused():
    with pytest.raises(ExportError, match="external_constants"):
        ExecutorchBackendConfig(external_constants="yes")
    with pytest.raises(ExportError, match="external_constants returned"):
        _export(TwoLinear(), (torch.randn(1, 6),), external_constants=lambda n: 3)


def test_ptd_round_trip_is_byte_identical(tmp_path):
    _small(tmp_path, external_constants=True)
    data = (tmp_path / DEFAULT_PTD).read_bytes()
    serializer = FlatTensorSerializer()
    assert serializer.serialize(serializer.deserialize(data)) == data


def _rewrite(tmp_path: Path, change) -> Path:
    """The small model's .ptd with one entry changed by `change(payload)`."""
    serializer = FlatTensorSerializer()
    payload = serializer.deserialize((tmp_path / DEFAULT_PTD).read_bytes())
    payload.buffers = [bytes(b) for b in payload.buffers]
    change(payload)
    out = tmp_path / "changed.ptd"
    out.write_bytes(serializer.serialize(payload))
    return out


def _drop(p):
    del p.named_data["second.weight"]


def _reshape(p):
    p.named_data["second.weight"].tensor_layout.sizes = [5, 3]


def _retype(p):
    p.named_data["second.weight"].tensor_layout.scalar_type = 7  # DOUBLE


def _shrink(p):
    e = p.named_data["second.weight"]
    e.tensor_layout = None
    p.buffers[e.buffer_index] = p.buffers[e.buffer_index][:-4]


@pytest.mark.parametrize("change", [_drop, _reshape, _retype, _shrink])
@pytest.mark.parametrize("engine", sorted(RUNTIMES))
def test_mismatched_ptd_names_the_tensor(engine, change, tmp_path):
    _small(tmp_path, external_constants=True)
    bad = _rewrite(tmp_path, change)
    with pytest.raises((ExecuTorchError, SerializeError), match="second.weight"):
        RUNTIMES[engine].load_program(tmp_path / "m.pte", data_path=bad).load_method("forward")


@pytest.mark.parametrize("engine", sorted(RUNTIMES))
def test_truncated_and_corrupt_ptd_are_errors(engine, tmp_path):
    _small(tmp_path, external_constants=True)
    data = (tmp_path / DEFAULT_PTD).read_bytes()
    bad = tmp_path / "bad.ptd"
    cases = [data[:n] for n in (1, 20, 47, 100, len(data) - 1)]
    cases += [data[:4] + b"XX01" + data[8:], data[:8] + b"\xff" * 40 + data[48:]]
    flipped = bytearray(data)
    for i in range(56, 300, 7):
        flipped[i] ^= 0xA5
    cases.append(bytes(flipped))
    for case in cases:
        bad.write_bytes(case)
        with pytest.raises((ExecuTorchError, SerializeError)):
            RUNTIMES[engine].load_program(tmp_path / "m.pte", data_path=bad).load_method("forward")


# Loads m.pte with its .ptd on one engine, truncates the .ptd in place (at `when`), runs, saves the output.
_TRUNCATE_SCRIPT = """
import os, sys, torch
from executorch.runtime import Runtime
pte, ptd, x, out, when = sys.argv[1:]
program = Runtime.get().load_program(pte, data_path=ptd)
if when == "before_method_load":
    os.truncate(ptd, 0)
method = program.load_method("forward")
if when == "between_runs":
    method.execute([torch.load(x)])
    os.truncate(ptd, 0)
torch.save(method.execute([torch.load(x)])[0], out)
"""


@pytest.mark.parametrize("when", ["before_method_load", "between_runs"])
@pytest.mark.parametrize("engine", sorted(RUNTIMES))
def test_a_ptd_truncated_after_load_does_not_reach_the_program(engine, when, tmp_path):
    """The engines read the .ptd into their own memory at load: a file changed afterwards (here truncated
    in place, which faults, SIGBUS, every page of a mapping of it) does not reach a loaded program."""
    model, (x,), _ = _small(tmp_path, external_constants=True)
    torch.save(x, tmp_path / "x.pt")
    env = dict(os.environ, EXECUTORCH_RUNTIME=engine)
    proc = subprocess.run([sys.executable, "-c", _TRUNCATE_SCRIPT, str(tmp_path / "m.pte"), str(tmp_path / DEFAULT_PTD),
                           str(tmp_path / "x.pt"), str(tmp_path / "y.pt"), when],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    assert (tmp_path / DEFAULT_PTD).stat().st_size == 0
    assert_outputs_close([torch.load(tmp_path / "y.pt")], [model(x)])


def test_delegate_named_data_with_an_external_tag_goes_to_the_ptd():
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.emit._program_state import ProgramState

    state = ProgramState(ExecutorchBackendConfig())
    state.delegates.named.add_named_data("blob", b"\x01\x02\x03", alignment=64, external_tag="weights")
    files = state.data_files()
    data = b"".join(FlatTensorSerializer().serialize_chunks(files["weights"]))
    entry = read_ptd(data)["blob"]
    assert bytes(entry.data) == b"\x01\x02\x03" and entry.tensor_layout is None


def _runner() -> Path:
    return REPO / "cmake-out" / "examples" / "executor_runner" / "executor_runner"


@pytest.mark.skipif(not _runner().exists(), reason="executor_runner is not built (tools/run_tests.sh builds it)")
def test_executor_runner_data_path(tmp_path):
    model, inputs, _ = _small(tmp_path, external_constants=True)
    (tmp_path / "x.bin").write_bytes(bytes(tensor_bytes(inputs[0])))
    run = [str(_runner()), "--model_path", str(tmp_path / "m.pte"), "--inputs", str(tmp_path / "x.bin"),
           "--output_dir", str(tmp_path)]
    ok = subprocess.run(run + ["--data_path", str(tmp_path / DEFAULT_PTD)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    out = torch.frombuffer(bytearray((tmp_path / "output_0.bin").read_bytes()), dtype=torch.float32).reshape(4, 3)
    assert_outputs_close([out], [model(*inputs)])
    missing = subprocess.run(run, capture_output=True, text=True)
    assert missing.returncode == 1 and "first.weight" in missing.stderr
    (tmp_path / "bad.ptd").write_bytes(b"\0" * 10)
    bad = subprocess.run(run + ["--data_path", str(tmp_path / "bad.ptd")], capture_output=True, text=True)
    assert bad.returncode == 1 and "bad.ptd" in bad.stderr


def _reference(reference_runtime, script: str, *args) -> subprocess.CompletedProcess:
    proc = subprocess.run([reference_runtime.python, "-c", script, *map(str, args)], capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


_REF_RUN_WITH_PTD = """
import sys, torch
from executorch.runtime import Runtime
pte, ptd, inp, out = sys.argv[1:5]
program = Runtime.get().load_program(pte, data_path=ptd)
torch.save(list(program.load_method("forward").execute(list(torch.load(inp)))), out)
"""


@pytest.mark.parametrize("name", ["mobilenet_v2", "multi_io"])
def test_published_runtime_runs_our_pte_and_ptd(name, reference_runtime, tmp_path):
    model, inputs = load_zoo().MODELS[name]()
    program = _export(model, inputs, external_constants=True)
    program.write_to_file(tmp_path / "m.pte")
    program.write_tensor_data_to_file(tmp_path)
    torch.save(list(inputs), tmp_path / "in.pt")
    _reference(reference_runtime, _REF_RUN_WITH_PTD, tmp_path / "m.pte", tmp_path / DEFAULT_PTD, tmp_path / "in.pt",
               tmp_path / "out.pt")
    expected = model(*inputs)
    assert_outputs_close(torch.load(tmp_path / "out.pt"),
                         expected if isinstance(expected, (list, tuple)) else [expected])


_REF_EXPORT_WITH_PTD = """
import sys, torch
sys.path.insert(0, sys.argv[1])
from ptd_models import TwoLinear
from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
torch.manual_seed(0)
model, inputs = TwoLinear().eval(), (torch.randn(4, 6),)
p = to_edge_transform_and_lower(torch.export.export(model, inputs)).to_executorch(
    ExecutorchBackendConfig(external_constants=True))
with open(sys.argv[2] + "/ref.pte", "wb") as f:
    p.write_to_file(f)
p.write_tensor_data_to_file(sys.argv[2])
torch.save([inputs, model(*inputs)], sys.argv[2] + "/io.pt")
"""


def test_published_pte_and_ptd_load_here(reference_runtime, tmp_path):
    _reference(reference_runtime, _REF_EXPORT_WITH_PTD, Path(__file__).parent, tmp_path)
    inputs, expected = torch.load(tmp_path / "io.pt")
    for rt in RUNTIMES.values():
        out = rt.load_program(tmp_path / "ref.pte", data_path=tmp_path / DEFAULT_PTD).load_method("forward").execute(
            list(inputs))
        assert_outputs_close(out, [expected])


# .bpte -----------------------------------------------------------------------------------------

def _bundle(expected_fn=None):
    torch.manual_seed(0)
    model = TwoOut().eval()
    cases = [(torch.randn(2, 3), torch.randn(2, 5)) for _ in range(3)]
    program = _export(model, cases[0])
    expected_fn = expected_fn or (lambda c, m: list(m(*c)))
    suites = [MethodTestSuite("forward", [MethodTestCase(c, expected_fn(c, model)) for c in cases])]
    return BundledProgram(program, suites), cases, model


def test_bpte_round_trip_is_byte_identical():
    bundle, _, _ = _bundle()
    data = serialize_from_bundled_program_to_flatbuffer(bundle)
    back = deserialize_from_flatbuffer_to_bundled_program(data)
    assert serialize_from_bundled_program_to_flatbuffer(back) == data
    assert bytes(back.program) == bundle.executorch_program.buffer
    case = back.method_test_suites[0].test_cases[1]
    assert list(case.inputs[1].val.sizes) == [2, 5]


@pytest.mark.parametrize("estimate", ["exact", "too small"])
def test_written_bpte_equals_the_serialized_bytes(estimate, tmp_path, monkeypatch):
    from executorch.devtools.bundled_program import serialize as bps

    if estimate == "too small":  # the Builder then grows, moving the hole left for the program
        monkeypatch.setattr(bps, "_estimated_size", lambda p: 64)
    bundle, _, _ = _bundle()
    data = serialize_from_bundled_program_to_flatbuffer(bundle)
    bps.write_bundled_program(bundle, tmp_path / "a.bpte")
    assert (tmp_path / "a.bpte").read_bytes() == data
    # A schema object whose program is one view (as the reader returns it), to an open file.
    back = deserialize_from_flatbuffer_to_bundled_program(data)
    with open(tmp_path / "b.bpte", "wb") as f:
        bps.write_bundled_program(back, f)
    assert (tmp_path / "b.bpte").read_bytes() == data
    assert bytes(deserialize_from_flatbuffer_to_bundled_program(data).program) == bundle.executorch_program.buffer


def test_failed_bpte_write_leaves_no_file(tmp_path):
    from executorch.devtools.bundled_program import serialize as bps

    back = deserialize_from_flatbuffer_to_bundled_program(serialize_from_bundled_program_to_flatbuffer(_bundle()[0]))
    back.program = [bytes(back.program), 12345]  # a program piece that is not bytes
    with pytest.raises(SerializeError, match="BundledProgram.program is a int"):
        bps.write_bundled_program(back, tmp_path / "m.bpte")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("engine", sorted(RUNTIMES))
def test_bundled_cases_pass_and_a_wrong_answer_fails(engine, monkeypatch):
    monkeypatch.setenv("EXECUTORCH_RUNTIME", engine)
    from executorch.runtime import Runtime

    Runtime.get.cache_clear()
    try:
        good, _, _ = _bundle()
        results = run_bundled_program(serialize_from_bundled_program_to_flatbuffer(good))
        assert len(results) == 3 and all(r.ok for r in results)
        wrong, _, _ = _bundle(lambda c, m: [out * 1.001 for out in m(*c)])
        results = run_bundled_program(serialize_from_bundled_program_to_flatbuffer(wrong))
        assert not any(r.ok for r in results)
        assert all(r.comparison.max_rel_err > 1e-4 for r in results)
    finally:
        Runtime.get.cache_clear()


def test_a_case_expecting_another_output_count_says_both_counts(tmp_path):
    back = deserialize_from_flatbuffer_to_bundled_program(serialize_from_bundled_program_to_flatbuffer(_bundle()[0]))
    for case in back.method_test_suites[0].test_cases:
        case.expected_outputs = case.expected_outputs[:1]  # the method returns two
    path = tmp_path / "m.bpte"
    path.write_bytes(serialize_from_bundled_program_to_flatbuffer(back))
    results = run_bundled_program(path)
    assert [str(r) for r in results] == [
        f"FAIL forward[{i}]: the method returned 2 outputs; the test case expects 1" for i in range(3)]
    proc = subprocess.run([sys.executable, "-m", "executorch.cli", "bundled", str(path)], capture_output=True,
                          text=True)
    assert proc.returncode == 1 and proc.stdout.splitlines()[-1] == "FAIL: 0/3 test cases passed", proc.stdout
    if _runner().exists():
        native = subprocess.run([str(_runner()), "--bundled", str(path)], capture_output=True, text=True)
        assert native.returncode == 1
        assert native.stdout.count("  the method returned 2 outputs; the case expects 1\n") == 3, native.stdout


def test_cli_runs_a_bpte(tmp_path):
    bundle, _, _ = _bundle()
    path = tmp_path / "m.bpte"
    path.write_bytes(serialize_from_bundled_program_to_flatbuffer(bundle))
    proc = subprocess.run([sys.executable, "-m", "executorch.cli", "bundled", str(path)], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1].startswith("OK: 3/3 test cases passed")
    path.write_bytes(path.read_bytes()[:100])
    proc = subprocess.run([sys.executable, "-m", "executorch.cli", "bundled", str(path)], capture_output=True,
                          text=True)
    assert proc.returncode == 1 and "m.bpte" in proc.stderr


def test_corrupt_bpte_is_a_clear_error():
    data = serialize_from_bundled_program_to_flatbuffer(_bundle()[0])
    for bad in (data[:3], data[:4] + b"XXXX" + data[8:], data[:200]):
        with pytest.raises(SerializeError, match=r"\.bpte"):
            deserialize_from_flatbuffer_to_bundled_program(bad)


@pytest.mark.parametrize("damage, named", [
    (lambda t: setattr(t, "sizes", [2, 8]), "sizes [2, 8] of float32 make 64 bytes; its data holds 40"),
    (lambda t: setattr(t, "data", bytes(t.data)[:-4]), "sizes [2, 5] of float32 make 40 bytes; its data holds 36"),
    (lambda t: setattr(t, "sizes", [-2, -5]), "sizes [-2, -5]"),
    (lambda t: setattr(t, "dim_order", [0, 0]), "dim_order [0, 0] is not an order of its 2 dimensions"),
], ids=["sizes", "data", "negative", "dim_order"])
def test_a_tensor_whose_data_does_not_fit_its_sizes_is_a_clear_error(tmp_path, damage, named):
    back = deserialize_from_flatbuffer_to_bundled_program(serialize_from_bundled_program_to_flatbuffer(_bundle()[0]))
    damage(back.method_test_suites[0].test_cases[2].inputs[1].val)
    data = serialize_from_bundled_program_to_flatbuffer(back)
    with pytest.raises(SerializeError) as info:
        deserialize_from_flatbuffer_to_bundled_program(data)
    message = str(info.value)
    assert "method 'forward' test case 2 input 1" in message and named in message, message
    (tmp_path / "m.bpte").write_bytes(data)
    proc = subprocess.run([sys.executable, "-m", "executorch.cli", "bundled", str(tmp_path / "m.bpte")],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr and named in proc.stderr, proc.stderr


def test_bundle_checks_the_cases_against_the_program():
    torch.manual_seed(0)
    program = _export(TwoOut(), (torch.randn(2, 3), torch.randn(2, 5)))
    with pytest.raises(ExportError, match="takes 2"):
        BundledProgram(program, [MethodTestSuite("forward", [MethodTestCase([torch.randn(2, 3)])])])
    with pytest.raises(ExportError, match="'other'"):
        BundledProgram(program, [MethodTestSuite("other", [])])


_REF_READ_BPTE = """
import sys, torch
from executorch.devtools.bundled_program.serialize import (
    deserialize_from_flatbuffer_to_bundled_program, serialize_from_bundled_program_to_flatbuffer)
data = open(sys.argv[1], "rb").read()
b = deserialize_from_flatbuffer_to_bundled_program(data)
case = b.method_test_suites[0].test_cases[0]
print(b.method_test_suites[0].method_name, len(b.method_test_suites[0].test_cases),
      bytes(case.inputs[0].val.data).hex(), bytes(case.expected_outputs[1].val.data).hex(), len(b.program))
"""


def test_published_reader_reads_our_bpte_bit_for_bit(reference_runtime, tmp_path):
    bundle, _, _ = _bundle()
    path = tmp_path / "ours.bpte"
    path.write_bytes(serialize_from_bundled_program_to_flatbuffer(bundle))
    fields = _reference(reference_runtime, _REF_READ_BPTE, path).stdout.split()
    ours = deserialize_from_flatbuffer_to_bundled_program(path.read_bytes())
    case = ours.method_test_suites[0].test_cases[0]
    assert fields == ["forward", "3", bytes(case.inputs[0].val.data).hex(),
                      bytes(case.expected_outputs[1].val.data).hex(), str(len(ours.program))]


_REF_WRITE_BPTE = """
import sys, torch
sys.path.insert(0, sys.argv[1])
from ptd_models import TwoOut
from executorch.exir import to_edge_transform_and_lower
from executorch.devtools import BundledProgram
from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
from executorch.devtools.bundled_program.serialize import serialize_from_bundled_program_to_flatbuffer
torch.manual_seed(0)
model = TwoOut().eval()
cases = [(torch.randn(2, 3), torch.randn(2, 5)) for _ in range(3)]
p = to_edge_transform_and_lower(torch.export.export(model, cases[0])).to_executorch()
open(sys.argv[2] + "/ref.pte", "wb").write(p.buffer)
torch.save(cases, sys.argv[2] + "/cases.pt")
suites = [MethodTestSuite("forward", [MethodTestCase(c, list(model(*c))) for c in cases])]
open(sys.argv[2] + "/ref.bpte", "wb").write(serialize_from_bundled_program_to_flatbuffer(BundledProgram(p, suites)))
"""


def test_we_read_and_rewrite_the_published_bpte_exactly(reference_runtime, tmp_path):
    _reference(reference_runtime, _REF_WRITE_BPTE, Path(__file__).parent, tmp_path)
    ref = (tmp_path / "ref.bpte").read_bytes()
    back = deserialize_from_flatbuffer_to_bundled_program(ref)
    assert serialize_from_bundled_program_to_flatbuffer(back) == ref
    assert all(r.ok for r in run_bundled_program(ref))
    # The same program and cases bundled here give the published writer's bytes.
    torch.manual_seed(0)
    model = TwoOut().eval()
    cases = torch.load(tmp_path / "cases.pt")
    suites = [MethodTestSuite("forward", [MethodTestCase(c, list(model(*c))) for c in cases])]
    ours = serialize_from_bundled_program_to_flatbuffer(
        BundledProgram(None, suites, pte_file_path=str(tmp_path / "ref.pte")))
    assert ours == ref


# config options ----------------------------------------------------------------------------------

@torch.library.custom_op("ptd_test::twice", mutates_args=())
def _twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@_twice.register_fake
def _(x):
    return torch.empty_like(x)


class CallsCustomOp(torch.nn.Module):
    def forward(self, x):
        return torch.ops.ptd_test.twice(x) + 1


def test_core_aten_ops_exception_list_lets_a_listed_op_through_the_edge_check():
    from executorch.exir import EdgeCompileConfig, to_edge
    from executorch.exir.dialects._ops import ops as exir_ops

    ep = torch.export.export(CallsCustomOp(), (torch.randn(3),))
    with pytest.raises(ExportError, match="ptd_test::twice"):
        to_edge(ep)
    edge = to_edge(ep, compile_config=EdgeCompileConfig(
        _core_aten_ops_exception_list=[torch.ops.ptd_test.twice.default]))
    targets = [n.target for n in edge.exported_program().graph.nodes if n.op == "call_function"]
    assert exir_ops.edge.ptd_test.twice.default in targets
    with pytest.raises(ExportError, match="_core_aten_ops_exception_list"):
        EdgeCompileConfig(_core_aten_ops_exception_list=["ptd_test::twice"])


@pytest.mark.parametrize("option", [dict(external_mutable_weights=True), dict(do_quant_fusion_and_const_prop="yes"),
                                    dict(emit_stacktrace=1), dict(extract_delegate_segments="no")])
def test_unsupported_backend_config_values_are_refused_by_name(option):
    with pytest.raises(ExportError, match=f"ExecutorchBackendConfig.{next(iter(option))}"):
        ExecutorchBackendConfig(**option)


@pytest.mark.skipif(not _runner().exists(), reason="executor_runner is not built (tools/run_tests.sh builds it)")
def test_executor_runner_bundled(tmp_path):
    good, bad = tmp_path / "good.bpte", tmp_path / "bad.bpte"
    good.write_bytes(serialize_from_bundled_program_to_flatbuffer(_bundle()[0]))
    bad.write_bytes(serialize_from_bundled_program_to_flatbuffer(_bundle(lambda c, m: [o * 1.001 for o in m(*c)])[0]))
    ok = subprocess.run([str(_runner()), "--bundled", str(good)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines()[-1].startswith("OK: 3/3 test cases passed")
    failed = subprocess.run([str(_runner()), "--bundled", str(bad)], capture_output=True, text=True)
    assert failed.returncode == 1 and failed.stdout.count("FAIL forward[") == 3
    bad.write_bytes(good.read_bytes()[:300])
    cut = subprocess.run([str(_runner()), "--bundled", str(bad)], capture_output=True, text=True)
    assert cut.returncode == 1 and "not a well-formed .bpte" in cut.stderr
