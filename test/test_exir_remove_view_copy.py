"""`ExecutorchBackendConfig(remove_view_copy=...)` as ExecuTorch defines it: True (the default) keeps a view the
runtime can read in place in its base's memory, with no instruction when its sizes are static and an
`executorch_prim::et_view` over symbolic sizes; False leaves every view copy a kernel call. Each form runs on
both engines and on the published runtime with eager's result."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from executorch.devtools.compare import assert_outputs_close
from executorch.exir import ExecutorchBackendConfig, to_edge
from executorch.exir._serialize._program import read_program

from conftest import project_runtimes  # noqa: E402


class _DynamicView(nn.Module):
    def forward(self, x):
        return 2 * (x + x).view(-1, 1)


class _StaticView(nn.Module):
    def forward(self, x):
        z = torch.sin(x).view(100)
        return z.relu().amax(0), z * 2


CASES = {
    "static": (_StaticView, [(torch.rand(10, 10),)], None),
    "dynamic": (_DynamicView, [(torch.rand(5, 6),), (torch.rand(1, 6),), (torch.rand(9, 6),)],
                {"x": {0: torch.export.Dim("rows", min=1, max=10)}}),
}
# The operators each case's program calls, by remove_view_copy.
EXPECTED = {
    ("static", True): ["aten::sin", "aten::relu", "aten::amax", "aten::mul"],
    ("static", False): ["aten::sin", "aten::view_copy", "aten::relu", "aten::amax", "aten::mul"],
    ("dynamic", True): ["aten::add", "executorch_prim::et_view", "aten::mul"],
    ("dynamic", False): ["aten::add", "aten::view_copy", "aten::mul"],
}


def _program(case: str, remove: bool) -> tuple:
    cls, calls, dynamic = CASES[case]
    torch.manual_seed(0)
    model = cls()
    ep = torch.export.export(model, calls[0], dynamic_shapes=dynamic)
    return model, calls, to_edge(ep).to_executorch(ExecutorchBackendConfig(remove_view_copy=remove)).buffer


def _eager(model, call) -> list:
    out = model(*call)
    return list(out) if isinstance(out, tuple) else [out]


@pytest.mark.parametrize("remove", [True, False], ids=["remove", "keep"])
@pytest.mark.parametrize("case", list(CASES))
def test_views_are_memory_or_copies_as_asked(case, remove):
    _, _, pte = _program(case, remove)
    plan = read_program(pte).execution_plan[0]
    assert [op.name for op in plan.operators] == EXPECTED[case, remove]
    if case == "dynamic" and remove:
        # The view's tensor is its base's bytes: the et_view's input and output share one planned place.
        (view,) = [i.instr_args for c in plan.chains for i in c.instructions
                   if getattr(i.instr_args, "op_index", None) == 1]
        base, out = (plan.values[view.args[k]].val.allocation_info for k in (0, 2))
        assert (base.memory_id, base.memory_offset_low) == (out.memory_id, out.memory_offset_low)


@pytest.mark.parametrize("engine", ["python", "native"])
@pytest.mark.parametrize("remove", [True, False], ids=["remove", "keep"])
@pytest.mark.parametrize("case", list(CASES))
def test_each_form_runs_like_eager_on_our_engines(case, remove, engine):
    runtime = project_runtimes().get(engine)
    if runtime is None:
        pytest.skip("the native runtime is not built (bash tools/run_tests.sh builds it)")
    model, calls, pte = _program(case, remove)
    program = runtime.load_program(pte)
    method = program.load_method("forward")
    for call in calls:  # every size the dynamic view takes, in one loaded method
        assert_outputs_close(method.execute(list(call)), _eager(model, call))


@pytest.mark.parametrize("case", list(CASES))
def test_memory_views_run_like_eager_on_the_published_runtime(case, reference_runtime, tmp_path):
    model, calls, pte = _program(case, True)
    (tmp_path / "m.pte").write_bytes(pte)
    for call in calls:
        assert_outputs_close(reference_runtime.run(tmp_path / "m.pte", call, tmp_path), _eager(model, call))
