"""Device backends in Torch-TensorRT's pattern (test/device_backend): a partitioner tags a custom engine
op with a `target_device` compile spec, preprocess packs the engine into a blob; the exporter puts
et_copy host/device copies around the delegate and plans its side in device memory, as the published
1.5.1 exporter does, and both runtimes run the file with the test device backend, whose "device"
memory is an ordinary allocation behind the device allocator interface."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge_transform_and_lower
from executorch.exir import schema as S
from executorch.exir._serialize import read_program
from executorch.exir.error import ExportError

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE / "device_backend"))
from conftest import project_runtimes  # noqa: E402
from test_delegation import assert_close_rel  # noqa: E402
from device_backend import models, python_backend  # noqa: E402
from device_backend.partitioner import TestDevicePartitioner  # noqa: E402
from device_backend.preprocess import TestDeviceBackend  # noqa: E402, F401  (the backend must be loaded)

python_backend.register()
REPO = HERE.parent
RUNNER = REPO / "cmake-out" / "test" / "cpp" / "device_backend_runner"
CUDA0 = (S.DeviceType.CUDA, 0)
HOST = (S.DeviceType.CPU, 0)


def _lower(name: str, config: ExecutorchBackendConfig | None = None):
    model, inputs = models.FACTORIES[name]()
    ep = torch.export.export(model, inputs)
    edge = to_edge_transform_and_lower(ep, partitioner=[TestDevicePartitioner()],
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))
    return model, inputs, edge, edge.to_executorch(config)


def _eager(model, inputs) -> list:
    with torch.no_grad():
        return list(model(*inputs))


def _device(t: S.Tensor) -> tuple:
    e = t.extra_tensor_info
    return (e.device_type, e.device_index) if e is not None else HOST


def _args(plan: S.ExecutionPlan, instr) -> list[int]:
    return list(instr.instr_args.args)


def _signature(program: S.Program) -> list:
    """Per instruction: the op (or delegate id) and, per tensor argument, its device and arena; sorted,
    so two writers that order independent instructions differently still compare equal."""
    plan = program.execution_plan[0]
    out = []
    for instr in plan.chains[0].instructions:
        a = instr.instr_args
        if isinstance(a, S.KernelCall):
            op = plan.operators[a.op_index]
            name = f"{op.name}.{op.overload}"
        else:
            name = plan.delegates[a.delegate_index].id
        where = [(_device(v.val), v.val.allocation_info.memory_id if v.val.allocation_info else 0)
                 for v in (plan.values[i] for i in a.args) if isinstance(v.val, S.Tensor)]
        out.append((name, tuple(where)))
    return sorted(out, key=repr)


def _summary(program: S.Program) -> dict:
    plan = program.execution_plan[0]
    return {
        "operators": sorted(f"{o.name}.{o.overload}" for o in plan.operators),
        "delegates": [(d.id, [(c.key, bytes(c.value)) for c in d.compile_specs]) for d in plan.delegates],
        "arenas": len(plan.non_const_buffer_sizes),
        "buffer_devices": [(d.buffer_idx, d.device_type, d.device_index) for d in plan.non_const_buffer_device or ()],
        "instructions": _signature(program),
    }


def test_copies_surround_the_delegate_and_its_side_is_planned_on_the_device():
    _, _, edge, program = _lower("one_engine")
    p = read_program(program.buffer)
    plan = p.execution_plan[0]
    assert plan.non_const_buffer_device == [S.NonConstBufferDevice(2, S.DeviceType.CUDA, 0)]
    ops = [f"{o.name}.{o.overload}" for o in plan.operators]
    assert ops.count("et_copy::_h2d_copy.out") == 1 and ops.count("et_copy::_d2h_copy.out") == 1
    names = {"et_copy::_h2d_copy.out": [], "et_copy::_d2h_copy.out": [], "delegate": [], "other": []}
    for instr in plan.chains[0].instructions:
        a = instr.instr_args
        key = "delegate" if isinstance(a, S.DelegateCall) else ops[a.op_index]
        names.get(key, names["other"]).append([plan.values[i].val for i in a.args])
    # every delegate argument (2 inputs, 2 outputs) is a device tensor in the device's arena
    (call,) = names["delegate"]
    assert [(_device(t), t.allocation_info.memory_id) for t in call] == [(CUDA0, 2)] * 4
    assert len(names["et_copy::_h2d_copy.out"]) == 2 and len(names["et_copy::_d2h_copy.out"]) == 2
    for src, dst, _ in names["et_copy::_h2d_copy.out"]:
        assert (_device(src), _device(dst), dst.allocation_info.memory_id) == (HOST, CUDA0, 2)
    for src, dst, _ in names["et_copy::_d2h_copy.out"]:
        assert (_device(src), _device(dst), dst.allocation_info.memory_id) == (CUDA0, HOST, 1)
    # host kernels read host tensors only
    assert all(_device(t) == HOST for args in names["other"] for t in args if isinstance(t, S.Tensor))
    # lowering to ExecuTorch leaves the edge program as it was
    assert not any("et_copy" in str(n.target) for n in edge.exported_program().graph.nodes)


def test_two_delegates_on_one_device_pass_the_result_without_a_round_trip():
    _, _, _, program = _lower("two_engines")
    plan = read_program(program.buffer).execution_plan[0]
    calls = [i.instr_args for i in plan.chains[0].instructions if isinstance(i.instr_args, S.DelegateCall)]
    assert len(calls) == 2
    assert calls[0].args[1] == calls[1].args[0]  # the second engine reads the first one's device output
    ops = [plan.operators[i.instr_args.op_index].name for i in plan.chains[0].instructions
           if isinstance(i.instr_args, S.KernelCall)]
    assert ops.count("et_copy::_h2d_copy") == 1 and ops.count("et_copy::_d2h_copy") == 2


def test_without_non_cpu_memory_planning_values_are_only_marked():
    _, _, _, program = _lower("one_engine", ExecutorchBackendConfig(enable_non_cpu_memory_planning=False))
    plan = read_program(program.buffer).execution_plan[0]
    assert plan.non_const_buffer_device is None and len(plan.non_const_buffer_sizes) == 2
    assert not any(o.name.startswith("et_copy") for o in plan.operators)
    (call,) = [i.instr_args for i in plan.chains[0].instructions if isinstance(i.instr_args, S.DelegateCall)]
    assert [_device(plan.values[i].val) for i in call.args] == [CUDA0] * 4


def test_device_options_are_honoured_or_refused():
    from executorch.exir.passes.propagate_device_pass import PropagateDeviceConfig, parse_device

    assert parse_device(b"CUDA:1") == (S.DeviceType.CUDA, 1) and parse_device(b"cuda") == CUDA0
    with pytest.raises(ExportError, match="target_device='tpu:0'"):
        parse_device(b"tpu:0")
    with pytest.raises(ExportError, match="skip_h2d_for_method_inputs"):
        ExecutorchBackendConfig(propagate_device_config=PropagateDeviceConfig(skip_h2d_for_method_inputs=True))
    with pytest.raises(ExportError, match="skip_d2h_for_method_outputs"):
        ExecutorchBackendConfig(propagate_device_config={"forward": PropagateDeviceConfig(
            skip_d2h_for_method_outputs={"forward": True})})
    ExecutorchBackendConfig(propagate_device_config=PropagateDeviceConfig())


@pytest.mark.parametrize("name", sorted(models.FACTORIES))
def test_the_python_runtime_runs_the_file_through_the_device(name):
    model, inputs, _, program = _lower(name)
    runtime = project_runtimes()["python"]
    before = dict(python_backend.MEMORY.copies)
    got = runtime.load_program(program.buffer).load_method("forward").execute(list(inputs))
    want = _eager(model, inputs)
    assert_close_rel(got, want)
    moved = {k: python_backend.MEMORY.copies[k] - before[k] for k in before}
    plan = program.executorch_program.execution_plan[0]
    copies = [plan.operators[i.instr_args.op_index].name for i in plan.chains[0].instructions
              if isinstance(i.instr_args, S.KernelCall)]
    assert moved == {"h2d": copies.count("et_copy::_h2d_copy"), "d2h": copies.count("et_copy::_d2h_copy")}
    with pytest.raises(AssertionError):
        assert_close_rel([got[0] * 1.001, *got[1:]], want)


def test_a_backend_given_host_memory_is_caught():
    # Without device planning the delegate's values stay in host memory: the test device refuses them,
    # which is what a GPU runtime would do with a host pointer, and why the default plans them apart.
    _, inputs, _, program = _lower("one_engine", ExecutorchBackendConfig(enable_non_cpu_memory_planning=False))
    method = project_runtimes()["python"].load_program(program.buffer).load_method("forward")
    with pytest.raises(Exception, match="handed host memory"):
        method.execute(list(inputs))


def test_the_python_runtime_names_a_missing_device_allocator(monkeypatch):
    from executorch.runtime import device

    _, _, _, program = _lower("one_engine")
    monkeypatch.delitem(device._registry, S.DeviceType.CUDA)
    with pytest.raises(Exception,
                       match="memory arena 2 of method 'forward' lives on cuda:0.*register_device_allocator"):
        project_runtimes()["python"].load_program(program.buffer).load_method("forward")


def _run_native(pte: bytes, inputs, want: list, tmp_path: Path) -> list:
    (tmp_path / "m.pte").write_bytes(pte)
    args = [str(RUNNER), str(tmp_path / "m.pte")]
    for i, x in enumerate(inputs):
        (tmp_path / f"in{i}.bin").write_bytes(x.contiguous().numpy().tobytes())
        args.append(str(tmp_path / f"in{i}.bin"))
    proc = subprocess.run(args + ["--out", str(tmp_path / "out")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [torch.frombuffer(bytearray((tmp_path / f"out{j}.bin").read_bytes()), dtype=torch.float32).reshape(w.shape)
            for j, w in enumerate(want)]


native = pytest.mark.skipif(not RUNNER.exists(), reason="device_backend_runner is not built (tools/run_tests.sh "
                                                         "builds it with the C++ tests)")


@native
@pytest.mark.parametrize("name", sorted(models.FACTORIES))
def test_the_native_runtime_runs_the_file_with_the_test_device_backend(name, tmp_path):
    model, inputs, _, program = _lower(name)
    want = _eager(model, inputs)
    got = _run_native(program.buffer, inputs, want, tmp_path)
    assert_close_rel(got, want)


@native
def test_the_native_test_device_refuses_host_memory(tmp_path):
    _, inputs, _, program = _lower("one_engine", ExecutorchBackendConfig(enable_non_cpu_memory_planning=False))
    (tmp_path / "m.pte").write_bytes(program.buffer)
    paths = []
    for i, x in enumerate(inputs):
        (tmp_path / f"in{i}.bin").write_bytes(x.numpy().tobytes())
        paths.append(str(tmp_path / f"in{i}.bin"))
    proc = subprocess.run([str(RUNNER), str(tmp_path / "m.pte"), *paths, "--out", str(tmp_path / "o")],
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "in host memory, not the device's" in proc.stderr


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> dict:
    python = os.environ.get("ET_REFERENCE_PYTHON")
    if not python:
        pytest.skip("ET_REFERENCE_PYTHON is not set; see ../shared/tools/reference-runtime/README.md")
    out = tmp_path_factory.mktemp("published_device")
    files = {}
    for name in models.FACTORIES:
        proc = subprocess.run([python, str(HERE / "device_backend" / "device_backend" / "export_reference.py"), name,
                               str(out / f"{name}.pte")], capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr[-3000:]
        files[name] = (out / f"{name}.pte").read_bytes()
    return files


@pytest.mark.parametrize("name", sorted(models.FACTORIES))
def test_the_file_matches_the_published_exporters(name, published):
    _, _, _, program = _lower(name)
    ours, theirs = _summary(read_program(program.buffer)), _summary(read_program(published[name]))
    assert ours == theirs
    assert theirs["buffer_devices"] == [(2, S.DeviceType.CUDA, 0)]


@pytest.mark.parametrize("name", sorted(models.FACTORIES))
def test_both_runtimes_run_the_published_file(name, published, tmp_path):
    model, inputs = models.FACTORIES[name]()
    want = _eager(model, inputs)
    got = project_runtimes()["python"].load_program(published[name]).load_method("forward").execute(list(inputs))
    assert_close_rel(got, want)
    if RUNNER.exists():
        assert_close_rel(_run_native(published[name], inputs, want, tmp_path), want)


def test_tensor_data_holds_each_ptd_file_as_published():
    from executorch.exir._serialize._cord import Cord

    model = torch.nn.Linear(4, 3)
    ep = torch.export.export(model, (torch.randn(2, 4),))
    lowered = to_edge_transform_and_lower(ep).to_executorch(ExecutorchBackendConfig(external_constants=True))
    data = lowered._tensor_data
    assert list(data) == ["_default_external_constant"] == list(lowered.data_files)
    cord = data["_default_external_constant"]
    assert isinstance(cord, Cord) and bytes(cord) == lowered.data_files["_default_external_constant"]
    assert len(cord) == len(bytes(cord)) > 4 * 3 * 4
    assert to_edge_transform_and_lower(ep).to_executorch()._tensor_data == {}


def test_the_native_bindings_refuse_a_device_they_have_no_allocator_for():
    runtime = project_runtimes().get("native")
    if runtime is None:
        pytest.skip("the native runtime is not built (tools/run_tests.sh builds it)")
    _, _, _, program = _lower("one_engine")
    # The shipped bindings link no device backend: the method does not load, rather than hand the
    # delegate host memory.
    with pytest.raises(Exception, match="cannot load method 'forward'"):
        runtime.load_program(program.buffer).load_method("forward")
