"""Stateful programs: mutated buffers and inputs, the ops that write into tensors, bad cache positions."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path

import pytest
import torch

from executorch.devtools.compare import assert_outputs_close, compare_outputs
from executorch.exir import ExecutorchBackendConfig, to_edge, to_edge_transform_and_lower
from executorch.exir import ExportError
from executorch.exir import schema as S
from executorch.exir.passes import MemoryPlanningPass
from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass
from executorch.runtime import ExecuTorchError

import stateful_models as sm  # noqa: E402
from conftest import project_runtimes  # noqa: E402

RUNTIMES = project_runtimes()
ENGINES = pytest.mark.parametrize("engine", sorted(RUNTIMES))


def _lower(model, inputs, config=None):
    ep = torch.export.export(copy.deepcopy(model), tuple(t.clone() for t in inputs))
    return to_edge(ep).to_executorch(config)


def _eager_steps(model, steps) -> list:
    model = copy.deepcopy(model)
    outs = []
    for s in steps:
        out = model(*[t.clone() for t in s])
        outs.append(list(out) if isinstance(out, tuple) else [out])
    return outs


def _run_steps(runtime, buffer: bytes, steps) -> list:
    method = runtime.load_program(buffer).load_method("forward")
    return [list(method.execute([t.clone() for t in s])) for s in steps]


def _kv_steps(n: int) -> list:
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(1, 1, 4, generator=g), torch.tensor([i])) for i in range(n)]


def _narrow_steps() -> list:
    g = torch.Generator().manual_seed(3)
    return [(torch.randn(1, 2, 3, 4, generator=g), torch.tensor([p])) for p in (0, 3, 5, 1)]


CASES = {
    "accumulate": (sm.Accumulate, lambda: [(torch.ones(2, 3),), (torch.full((2, 3), 2.0),), (torch.ones(2, 3),)], None),
    "counter_initialized": (sm.Counter, lambda: [(torch.ones(4),), (torch.full((4,), 3.0),)],
                            ExecutorchBackendConfig(passes=[InitializedMutableBufferPass(["count"])])),
    "kv_cache": (lambda: sm.make_kv_cache()[0], lambda: _kv_steps(5), None),
    "mutate_input": (sm.MutateInput, lambda: [(torch.ones(3), torch.arange(3.0))], None),
    # narrow().copy_() / slice assignment at the input position, the written views read by composite ops
    "narrow_kv_cache": (lambda: sm.make_narrow_kv_cache()[0], _narrow_steps, None),
    "slice_kv_cache": (lambda: sm.make_narrow_kv_cache(slice_v=True)[0], _narrow_steps, None),
}


@ENGINES
@pytest.mark.parametrize("case", sorted(CASES))
def test_state_persists_across_calls(case, engine):
    make, steps, config = CASES[case]
    model = make()
    program = _lower(model, steps()[0], config)
    got = _run_steps(RUNTIMES[engine], program.buffer, steps())
    for i, (g, w) in enumerate(zip(got, _eager_steps(model, steps()))):
        assert_outputs_close(g, w)


@ENGINES
def test_narrow_copy_cache_lowers_with_to_edge_transform_and_lower(engine):
    model, example = sm.make_narrow_kv_cache()
    ep = torch.export.export(copy.deepcopy(model), example)
    program = to_edge_transform_and_lower(ep).to_executorch()
    ops = {op.name for op in program.executorch_program.execution_plan[0].operators}
    assert "aten::copy_" in ops or "aten::slice_scatter" in ops
    got = _run_steps(RUNTIMES[engine], program.buffer, _narrow_steps())
    for g, w in zip(got, _eager_steps(model, _narrow_steps())):
        assert_outputs_close(g, w)


@pytest.fixture(scope="module")
def published_narrow(tmp_path_factory, reference_runtime) -> Path:
    """The narrow().copy_() cache lowered by the published exporter."""
    root = tmp_path_factory.mktemp("narrow_published")
    model, example = sm.make_narrow_kv_cache()
    torch.export.save(torch.export.export(copy.deepcopy(model), example), root / "narrow.pt2")
    runner = Path(__file__).with_name("reference_stateful.py")
    proc = subprocess.run([reference_runtime.python, str(runner), str(root), "narrow"], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    err = root / "narrow.published.err.txt"
    assert not err.exists(), err.read_text()
    return root / "narrow.published.pte"


@ENGINES
def test_published_narrow_copy_cache_file_runs_here(published_narrow, engine):
    model, _ = sm.make_narrow_kv_cache()
    got = _run_steps(RUNTIMES[engine], published_narrow.read_bytes(), _narrow_steps())
    for g, w in zip(got, _eager_steps(model, _narrow_steps())):
        assert_outputs_close(g, w)


def test_state_check_fails_without_state():
    # The gate's own check: a program reloaded for each call restarts from its initial state.
    model = sm.Accumulate()
    steps = CASES["accumulate"][1]()
    program = _lower(model, steps[0])
    fresh = [_run_steps(RUNTIMES["python"], program.buffer, [s])[0] for s in steps]
    assert not compare_outputs(fresh[1], _eager_steps(model, steps)[1]).ok


def test_write_back_is_copy_and_buffer_is_planned_state():
    program = _lower(sm.Accumulate(), (torch.ones(2, 3),))
    plan = program.executorch_program.execution_plan[0]
    ops = [f"{op.name}.{op.overload}" if op.overload else op.name for op in plan.operators]
    assert ops[-1] == "aten::copy_"
    copy_call = plan.chains[0].instructions[-1].instr_args
    buffer = plan.values[copy_call.args[0]].val
    assert copy_call.args[0] == copy_call.args[-1] and copy_call.args[0] not in plan.inputs
    assert buffer.allocation_info is not None and buffer.data_buffer_idx == 0  # state, not a constant
    assert len(plan.outputs) == 1  # the mutation is not a method output


def test_initial_contents_only_when_asked():
    inputs = (torch.ones(4),)
    plain = _lower(sm.Counter(), inputs).executorch_program
    kept = _lower(sm.Counter(), inputs, CASES["counter_initialized"][2]).executorch_program
    assert plain.mutable_data_segments is None
    assert kept.mutable_data_segments is not None
    # Without the mark the buffer starts zeroed here (its initial state is undefined in ExecuTorch).
    out = _run_steps(RUNTIMES["python"], _lower(sm.Counter(), inputs).buffer, [inputs])[0]
    assert torch.equal(out[1], torch.ones(4))


def test_mutable_buffer_names():
    config = ExecutorchBackendConfig(emit_mutable_buffer_names=True)
    model = sm.make_kv_cache()[0]
    program = _lower(model, _kv_steps(1)[0], config)
    names = {v.val.extra_tensor_info.fully_qualified_name for v in program.executorch_program.execution_plan[0].values
             if isinstance(v.val, S.Tensor) and v.val.extra_tensor_info is not None}
    assert names == {"k", "v"}
    got = _run_steps(RUNTIMES["python"], program.buffer, _kv_steps(3))
    assert_outputs_close(got, _eager_steps(model, _kv_steps(3)))


@ENGINES
def test_cache_position_past_the_end_is_an_error(engine):
    model, inputs = sm.make_kv_cache()
    method = RUNTIMES[engine].load_program(_lower(model, inputs).buffer).load_method("forward")
    with pytest.raises(ExecuTorchError, match="index_put"):
        method.execute([torch.randn(1, 1, 4), torch.tensor([8])])
    with pytest.raises(ExecuTorchError, match="index_put"):
        method.execute([torch.randn(1, 1, 4), torch.tensor([-9])])
    for bad in (torch.tensor([0], dtype=torch.int32), torch.tensor([0.0])):
        with pytest.raises(ExecuTorchError, match="input 1 .* must have dtype torch.int64"):
            method.execute([torch.randn(1, 1, 4), bad])
    # The method still works after the refused calls.
    assert method.execute([torch.randn(1, 1, 4), torch.tensor([7])])[0].shape == (1, 1, 4)


def _shared_counter(shared: bool):
    model = sm.Counter()
    eps = {name: torch.export.export(copy.deepcopy(model), (torch.ones(4),)) for name in ("bump", "read")}
    plan = MemoryPlanningPass(share_mutable_buffers=shared)
    config = ExecutorchBackendConfig(passes=[InitializedMutableBufferPass(["count"])], memory_planning_pass=plan)
    return to_edge(eps).to_executorch(config).buffer


@ENGINES
@pytest.mark.parametrize("shared", [True, False])
def test_loading_a_method_keeps_shared_state(engine, shared):
    # `read` loads after `bump` has run twice: with shared buffers it sees the bumped count, not
    # the initial contents again (and planned apart it has its own count, from the start).
    program = RUNTIMES[engine].load_program(_shared_counter(shared))
    bump = program.load_method("bump")
    for _ in range(2):
        bump.execute([torch.ones(4)])
    count = program.load_method("read").execute([torch.zeros(4)])[1]
    start = torch.arange(4.0) + 10
    assert torch.equal(count, start + 2 if shared else start)
    assert torch.equal(bump.execute([torch.ones(4)])[1], start + 3)


def _shared_kv_calls() -> list:
    g = torch.Generator().manual_seed(2)
    return [("prefill", [torch.randn(1, 3, 4, generator=g), torch.arange(3)])] + [
        ("decode", [torch.randn(1, 1, 4, generator=g), torch.tensor([p])]) for p in (3, 4)]


@pytest.fixture(scope="module")
def shared_kv(tmp_path_factory, reference_runtime) -> dict:
    """Prefill and decode sharing a KV cache: our file run on the published runtime, and the
    published exporter's file (share_mutable_buffers=True) written for our runtimes, in one process."""
    root = tmp_path_factory.mktemp("shared_kv")
    model, _ = sm.make_kv_cache()
    calls = _shared_kv_calls()
    eps = {}
    for method in ("prefill", "decode"):
        example = next(inputs for m, inputs in calls if m == method)
        eps[method] = torch.export.export(copy.deepcopy(model), tuple(example))
        torch.export.save(eps[method], root / f"kv@{method}.pt2")
    config = ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(share_mutable_buffers=True))
    (root / "kv.pte").write_bytes(to_edge(eps).to_executorch(config).buffer)
    torch.save(calls, root / "kv.calls.pt")
    runner = Path(__file__).with_name("reference_stateful.py")
    proc = subprocess.run([reference_runtime.python, str(runner), str(root), "kv"], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    eager = _eager_steps(model, [inputs for _, inputs in calls])
    return {"root": root, "eager": eager, "calls": calls}


def test_shared_cache_file_runs_on_the_published_runtime(shared_kv):
    root = shared_kv["root"]
    assert not (root / "kv.err.txt").exists(), (root / "kv.err.txt").read_text()
    for i, (got, want) in enumerate(zip(torch.load(root / "kv.out.pt"), shared_kv["eager"])):
        assert_outputs_close(got, want)


@ENGINES
def test_published_shared_cache_file_runs_here(shared_kv, engine):
    root = shared_kv["root"]
    assert not (root / "kv.published.err.txt").exists(), (root / "kv.published.err.txt").read_text()
    program = RUNTIMES[engine].load_program(root / "kv.published.pte")
    methods = {}
    for (name, inputs), want in zip(shared_kv["calls"], shared_kv["eager"]):
        methods.setdefault(name, program.load_method(name))
        assert_outputs_close(list(methods[name].execute(inputs)), want)


def test_shared_buffers_refuse_different_shapes():
    class Cache(torch.nn.Module):
        def __init__(self, n):
            super().__init__()
            self.register_buffer("cache", torch.zeros(n))

        def forward(self, x):
            self.cache.add_(x)
            return self.cache + 0

    eps = {f"m{n}": torch.export.export(Cache(n), (torch.ones(n),)) for n in (3, 4)}
    config = ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(share_mutable_buffers=True))
    with pytest.raises(ExportError, match="method 'm4' holds mutable buffer 'cache' as .*one dtype and shape"):
        to_edge(eps).to_executorch(config)
    with pytest.raises(ExportError, match="share_mutable_buffers must be True or False"):
        MemoryPlanningPass(share_mutable_buffers="yes")


class _Op(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


_IDX = torch.tensor([[0, 2, 1], [1, 0, 3]])
OPS = {
    "slice_scatter": (lambda x, s: torch.slice_scatter(x, s, 1, 1, 4, 2), (torch.randn(3, 5), torch.randn(3, 2))),
    "select_scatter": (lambda x, s: torch.select_scatter(x, s, 0, -1), (torch.randn(3, 5), torch.randn(5))),
    "scatter_src": (lambda x, s: torch.scatter(x, 1, _IDX, s), (torch.randn(2, 4), torch.randn(2, 3))),
    "scatter_value": (lambda x: torch.scatter(x, 1, _IDX, 7.5), (torch.randn(2, 4),)),
    "scatter_add": (lambda x, s: torch.scatter_add(x, 1, _IDX, s), (torch.randn(2, 4), torch.randn(2, 3))),
    "index_put_accumulate": (lambda x, v: torch.index_put(x, (torch.tensor([0, 2, 0]),), v, accumulate=True),
                             (torch.randn(4, 3), torch.randn(3, 3))),
    "index_put_2d": (lambda x, v: torch.index_put(x, (torch.tensor([1, 3]), torch.tensor([0, 2])), v),
                     (torch.randn(4, 3), torch.randn(2))),
    "index_copy": (lambda x, s: torch.index_copy(x, 0, torch.tensor([3, 0]), s),
                   (torch.randn(4, 2), torch.randn(2, 2))),
    "copy": (lambda x, s: torch.ops.aten.copy.default(x, s), (torch.randn(2, 3), torch.randn(3))),
}


@ENGINES
@pytest.mark.parametrize("op", sorted(OPS))
def test_write_ops_match_eager(op, engine):
    fn, inputs = OPS[op]
    program = _lower(_Op(fn), inputs)
    got = _run_steps(RUNTIMES[engine], program.buffer, [inputs])[0]
    assert_outputs_close(got, [fn(*[t.clone() for t in inputs])])


@pytest.fixture(scope="module")
def published_runs(tmp_path_factory, reference_runtime) -> dict:
    """Every stateful case and write op, our file decoded on the published runtime in one process."""
    root = tmp_path_factory.mktemp("stateful_published")
    names = []
    for case, (make, steps, config) in CASES.items():
        (root / f"{case}.pte").write_bytes(_lower(make(), steps()[0], config).buffer)
        torch.save([("forward", list(s)) for s in steps()], root / f"{case}.calls.pt")
        names.append(case)
    for op, (fn, inputs) in OPS.items():
        (root / f"{op}.pte").write_bytes(_lower(_Op(fn), inputs).buffer)
        torch.save([("forward", list(inputs))], root / f"{op}.calls.pt")
        names.append(op)
    runner = Path(__file__).with_name("reference_stateful.py")
    proc = subprocess.run([reference_runtime.python, str(runner), str(root), *names], capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {"root": root}


@pytest.mark.parametrize("name", sorted(CASES) + sorted(OPS))
def test_published_runtime_agrees(published_runs, name):
    root = published_runs["root"]
    err = root / f"{name}.err.txt"
    assert not err.exists(), err.read_text()
    got = torch.load(root / f"{name}.out.pt")
    if name in CASES:
        make, steps, _ = CASES[name]
        want = _eager_steps(make(), steps())
    else:
        fn, inputs = OPS[name]
        want = [[fn(*[t.clone() for t in inputs])]]
    for g, w in zip(got, want):
        assert_outputs_close(g, w)


# ---- the narrow().copy_() cache in ExecutorBackend delegates

def _executor_backend_lower(model, example, ops=None):
    from executorch.exir.backend.test.demos.rpc.executor_backend_partitioner import ExecutorBackendPartitioner

    ep = torch.export.export(copy.deepcopy(model), example)
    return to_edge_transform_and_lower(ep, partitioner=[ExecutorBackendPartitioner(ops)]).to_executorch()


def _outer_ops(program) -> set:
    return {op.name for op in program.executorch_program.execution_plan[0].operators}


@ENGINES
def test_narrow_copy_cache_lowers_to_one_executor_backend_delegate(engine):
    # As the published partitioner claims every call, the position read from input_pos (a SymInt)
    # and the size arithmetic on it are claimed with the rest: one delegate, the position inside it.
    model, example = sm.make_narrow_kv_cache()
    program = _executor_backend_lower(model, example)
    plan = program.executorch_program.execution_plan[0]
    assert [d.id for d in plan.delegates] == ["ExecutorBackend"]
    assert _outer_ops(program) <= {"aten::copy_"}  # only the cache write-back stays outside
    got = _run_steps(RUNTIMES[engine], program.buffer, _narrow_steps())
    for g, w in zip(got, _eager_steps(model, _narrow_steps())):
        assert_outputs_close(g, w)


@ENGINES
def test_narrow_copy_cache_position_as_a_delegate_input(engine):
    # Only the cache reads and writes delegated: the position is computed outside and each call
    # passes it in as an Int, which must change from step to step.
    aten = torch.ops.aten
    model, example = sm.make_narrow_kv_cache()
    program = _executor_backend_lower(model, example, [aten.slice_scatter.default, aten.slice_copy.Tensor])
    plan = program.executorch_program.execution_plan[0]
    assert "aten::_local_scalar_dense" in _outer_ops(program)
    calls = [i.instr_args for i in plan.chains[0].instructions if isinstance(i.instr_args, S.DelegateCall)]
    assert calls and any(isinstance(plan.values[a].val, S.Int) for c in calls for a in c.args)
    got = _run_steps(RUNTIMES[engine], program.buffer, _narrow_steps())
    for g, w in zip(got, _eager_steps(model, _narrow_steps())):
        assert_outputs_close(g, w)


def test_a_partition_returning_a_symint_is_refused():
    model, example = sm.make_narrow_kv_cache()
    with pytest.raises(ExportError, match=r"returns the symbolic SymInt '_local_scalar_dense'.*tag the nodes"):
        _executor_backend_lower(model, example, [torch.ops.aten._local_scalar_dense.default])


@pytest.fixture(scope="module")
def published_narrow_executor_backend(tmp_path_factory, reference_runtime) -> bytes:
    out = tmp_path_factory.mktemp("narrow_eb") / "narrow_eb.pte"
    reference_runtime.export(f"{Path(sm.__file__)}:make_narrow_kv_cache", out,
                             script=Path(__file__).with_name("reference_export_executor_backend.py"))
    return out.read_bytes()


@ENGINES
def test_published_executor_backend_narrow_cache_runs_here(published_narrow_executor_backend, engine):
    from executorch.exir._serialize import read_program

    pte = published_narrow_executor_backend
    published = read_program(pte).execution_plan[0]
    ours = _executor_backend_lower(*sm.make_narrow_kv_cache()).executorch_program.execution_plan[0]
    # The same shape as ours: one ExecutorBackend delegate holding the position, the write-back outside.
    assert [d.id for d in published.delegates] == [d.id for d in ours.delegates] == ["ExecutorBackend"]
    assert {op.name for op in published.operators} <= {"aten::copy_"}
    model, _ = sm.make_narrow_kv_cache()
    got = _run_steps(RUNTIMES[engine], pte, _narrow_steps())
    for g, w in zip(got, _eager_steps(model, _narrow_steps())):
        assert_outputs_close(g, w)


def test_published_runtime_runs_our_nested_narrow_cache_program(reference_runtime, tmp_path):
    # The published runtime has no ExecutorBackend; it runs our delegate's payload (a whole .pte
    # taking the position as a tensor) on the first steps' inputs, and agrees with our runtime.
    from executorch.exir._serialize import read_program

    model, example = sm.make_narrow_kv_cache()
    program = _executor_backend_lower(model, example)
    read = read_program(program.buffer)
    payload = bytes(read.segment_data[read.execution_plan[0].delegates[0].processed.index])
    (tmp_path / "nested.pte").write_bytes(payload)
    ours = RUNTIMES["python"].load_program(payload).load_method("forward")
    cache = torch.zeros(1, 2, 8, 4)
    for x, pos in _narrow_steps()[:2]:
        inputs = [x, pos, cache.clone(), cache.clone()]
        want = list(ours.execute([t.clone() for t in inputs]))
        got = reference_runtime.run(tmp_path / "nested.pte", inputs, tmp_path)
        assert_outputs_close(got, want)
        cache = want[0]
