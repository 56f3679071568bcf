"""MemoryPlanningPass(alloc_graph_output=False): outputs get no planned memory and take the caller's, as upstream."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from executorch.devtools.compare import assert_outputs_close
from executorch.exir import ExecutorchBackendConfig, to_edge, to_edge_transform_and_lower
from executorch.exir._serialize._program import read_program
from executorch.exir.error import ExportError
from executorch.exir.memory_planning import MemoryPlanningPass, Verifier

from caller_bound_models import make_several, make_stateful  # noqa: E402
from conftest import project_runtimes  # noqa: E402

MODELS = Path(__file__).with_name("caller_bound_models.py")
SCRIPT = Path(__file__).with_name("reference_export_caller_outputs.py")
FACTORIES = {"several": make_several, "stateful": make_stateful}


def _config(alloc_graph_output: bool = False) -> ExecutorchBackendConfig:
    return ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(alloc_graph_output=alloc_graph_output))


def _export(name: str, alloc_graph_output: bool = False):
    model, inputs = FACTORIES[name]()
    return model, inputs, to_edge(torch.export.export(model, inputs)).to_executorch(_config(alloc_graph_output))


def _outputs(pte: bytes) -> list:
    plan = read_program(pte).execution_plan[0]
    return [plan.values[i].val for i in plan.outputs]


def _calls(inputs: tuple, n: int = 3) -> list[tuple]:
    torch.manual_seed(1)
    return [tuple(torch.rand_like(t) if t.is_floating_point() else t for t in inputs) for _ in range(n)]


def _eager(model, call) -> list:
    out = model(*call)
    return list(out) if isinstance(out, tuple) else [out]


def _runtime(engine: str):
    runtime = project_runtimes().get(engine)
    if runtime is None:
        pytest.skip("the native runtime is not built (bash tools/run_tests.sh builds it)")
    return runtime


def test_outputs_carry_no_allocation_info():
    _, _, program = _export("several")
    outs = _outputs(program.buffer)
    # a, the view's copy, the sum and a again: the caller's memory; the constant: its own data
    assert [t.allocation_info is None for t in outs] == [True] * 5
    assert [t.data_buffer_idx > 0 for t in outs] == [False, False, True, False, False]
    plan = read_program(program.buffer).execution_plan[0]
    assert plan.outputs[0] == plan.outputs[4]
    # b (a * 2) is read by the view and the sum but not returned: it keeps planned memory
    planned = [v.val for v in plan.values if getattr(v.val, "allocation_info", None) is not None]
    assert len(planned) == 3  # x, y and b
    _, _, default = _export("several", alloc_graph_output=True)
    assert all(t.allocation_info is not None for t in _outputs(default.buffer) if t.data_buffer_idx == 0)


def test_state_inputs_and_multi_results():
    _, _, program = _export("stateful")
    plan = read_program(program.buffer).execution_plan[0]
    outs = _outputs(program.buffer)
    assert all(t.allocation_info is None for t in outs)
    # the returned input takes the caller's memory too, as ExecuTorch plans it; the buffer stays planned
    assert plan.outputs[1] == plan.inputs[0]
    planned = [v.val for v in plan.values if getattr(v.val, "allocation_info", None) is not None]
    assert [list(t.sizes) for t in planned] == [[2, 3], [2, 3]]  # the buffer, and its new value before write-back


def test_the_plan_verifier_agrees():
    _, _, program = _export("several")
    gm = program.exported_program().graph_module
    sig = program.exported_program().graph_signature
    Verifier(gm, alloc_graph_input=True, alloc_graph_output=False, graph_signature=sig).verify_graph_input_output()
    with pytest.raises(AssertionError, match="graph output .* is not planned, but alloc_graph_output=True"):
        Verifier(gm, alloc_graph_input=True, alloc_graph_output=True, graph_signature=sig).verify_graph_input_output()


def test_the_option_takes_only_a_bool():
    with pytest.raises(ExportError, match="alloc_graph_output must be True or False"):
        MemoryPlanningPass(alloc_graph_output="no")


@pytest.mark.parametrize("engine", ["python", "native"])
@pytest.mark.parametrize("name", list(FACTORIES))
def test_runs_like_eager_repeatedly_on_our_engines(name, engine):
    model, inputs, program = _export(name)
    method = _runtime(engine).load_program(program.buffer).load_method("forward")
    eager_model = FACTORIES[name]()[0]  # fresh state, as the loaded method's
    kept = []
    for call in _calls(inputs):
        got, want = method.execute(list(call)), _eager(eager_model, call)
        assert_outputs_close(got, want)
        kept.append((got, want))
    for got, want in kept:  # a later run does not change what an earlier one returned
        assert_outputs_close(got, want)


@pytest.mark.parametrize("engine", ["python", "native"])
def test_dynamic_outputs_shrink_and_grow(engine):
    class Dyn(torch.nn.Module):
        def forward(self, x):
            y = x * 2
            return y, y.view(-1)

    calls = [(torch.rand(2, 3),), (torch.rand(5, 3),), (torch.rand(1, 3),)]
    ep = torch.export.export(Dyn(), calls[0], dynamic_shapes=({0: torch.export.Dim("n", max=8)},))
    pte = to_edge(ep).to_executorch(_config()).buffer
    assert all(t.allocation_info is None for t in _outputs(pte))
    method = _runtime(engine).load_program(pte).load_method("forward")
    for call in calls:
        assert_outputs_close(method.execute(list(call)), _eager(Dyn(), call))


@pytest.mark.parametrize("engine", ["python", "native"])
def test_delegate_outputs_take_the_callers_memory(engine):
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    model, inputs = make_several()
    lowered = to_edge_transform_and_lower(torch.export.export(model, inputs), partitioner=[XnnpackPartitioner()])
    pte = lowered.to_executorch(_config()).buffer
    plan = read_program(pte).execution_plan[0]
    assert plan.delegates and all(t.allocation_info is None for t in _outputs(pte))
    method = _runtime(engine).load_program(pte).load_method("forward")
    for call in _calls(inputs):
        assert_outputs_close(method.execute(list(call)), _eager(model, call))


def test_runs_like_eager_on_the_published_runtime(reference_runtime, tmp_path):
    model, inputs, program = _export("several")
    (tmp_path / "m.pte").write_bytes(program.buffer)
    for call in _calls(inputs, 2):
        assert_outputs_close(reference_runtime.run(tmp_path / "m.pte", call, tmp_path), _eager(model, call))


@pytest.mark.parametrize("name", list(FACTORIES))
def test_matches_the_published_exporters_file(name, reference_runtime, tmp_path):
    theirs = reference_runtime.export(f"{MODELS}:make_{name}", tmp_path / "ref.pte", script=SCRIPT).read_bytes()
    _, _, ours = _export(name)
    plan, ref_plan = (read_program(p).execution_plan[0] for p in (ours.buffer, theirs))
    assert [(t.allocation_info is None, t.data_buffer_idx > 0, list(t.sizes)) for t in _outputs(ours.buffer)] == \
        [(t.allocation_info is None, t.data_buffer_idx > 0, list(t.sizes)) for t in _outputs(theirs)]
    assert [plan.outputs.index(i) for i in plan.outputs] == [ref_plan.outputs.index(i) for i in ref_plan.outputs]


@pytest.mark.parametrize("engine", ["python", "native"])
@pytest.mark.parametrize("name", list(FACTORIES))
def test_the_published_exporters_file_runs_on_ours(name, engine, reference_runtime, tmp_path):
    theirs = reference_runtime.export(f"{MODELS}:make_{name}", tmp_path / "ref.pte", script=SCRIPT).read_bytes()
    model, inputs = FACTORIES[name]()
    method = _runtime(engine).load_program(theirs).load_method("forward")
    for call in _calls(inputs):
        assert_outputs_close(method.execute(list(call)), _eager(model, call))
