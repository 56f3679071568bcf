"""torch.map and torch.scan lowered to loops as ExecuTorch lowers them (and torch.while_loop refused, as it
refuses it): run on both engines and the published runtime, nested and with dynamic shapes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch
from torch._higher_order_ops.map import map as torch_map
from torch._higher_order_ops.scan import scan
from torch._higher_order_ops.while_loop import while_loop
from torch.export import Dim

from executorch.devtools.compare import assert_outputs_close, compare_outputs
from executorch.exir import ExportError, to_edge
from executorch.exir import schema as S
from executorch.exir._serialize import deserialize_pte_binary, serialize_pte_binary

from conftest import project_runtimes  # noqa: E402

RUNTIMES = project_runtimes()
FIXTURE = Path(__file__).parent / "fixtures" / "control_flow_scan_map.pte"


class Map(torch.nn.Module):
    def forward(self, xs, y):
        return torch_map(lambda x, y: x * y + 1, xs, y)


class Scan(torch.nn.Module):
    """Two carries, a captured input, and a per-row output that is a carry before its update."""

    def forward(self, init, xs, w):
        def step(carry, x):
            c, d = carry
            return (c + x * w, d * 0.5 + x.sum()), c.clone()

        (c, d), ys = scan(step, (init, init.sum()), xs)
        return c, d, ys


class MapOfCond(torch.nn.Module):
    def forward(self, xs):
        return torch_map(lambda x: torch.cond(x.sum() > 0, lambda v: v * 2, lambda v: v - 1, (x,)), xs)


class MapOfScan(torch.nn.Module):
    """A cumulative sum of each matrix: a loop inside a loop."""

    def forward(self, xss):
        return torch_map(lambda xs: scan(lambda c, x: (c + x, c + x), torch.zeros_like(xs[0]), xs)[1], xss)


class ScanMapScan(torch.nn.Module):
    """A scan, then a map over its stacked output: the second loop reads what the first grew."""

    def forward(self, xs):
        _, ys = scan(lambda c, x: (c + x, c * x), torch.ones_like(xs[0]), xs)
        return torch_map(lambda y: y.sin(), ys)


class While(torch.nn.Module):
    def forward(self, i, x):
        return while_loop(lambda i, x: i < 5, lambda i, x: (i + 1, x * 2), (i, x))


def _rows(n=4, cols=3, seed=0):
    torch.manual_seed(seed)
    return torch.randn(n, cols)


# name -> (model, example inputs, dynamic shapes, more inputs to run)
CASES = {
    "map": (Map(), (_rows(), torch.randn(3)), None, []),
    "scan": (Scan(), (torch.randn(3), _rows(), torch.randn(3)), None,
             [(torch.randn(3), _rows(seed=1), torch.randn(3))]),
    "map_of_cond": (MapOfCond(), (_rows(5) * torch.tensor([[1.0], [-1.0], [1.0], [-1.0], [1.0]]),), None, []),
    "map_of_scan": (MapOfScan(), (torch.randn(2, 4, 3),), None, []),
    "map_dynamic": (Map(), (_rows(6), torch.randn(3)), ({0: Dim("n", min=2, max=10)}, None),
                    [(_rows(2), torch.randn(3)), (_rows(9), torch.randn(3))]),
    "scan_dynamic": (Scan(), (torch.randn(3), _rows(6), torch.randn(3)), (None, {0: Dim("n", min=2, max=10)}, None),
                     [(torch.randn(3), _rows(3), torch.randn(3)), (torch.randn(3), _rows(10), torch.randn(3))]),
    "scan_map_scan": (ScanMapScan(), (_rows(5),), ({0: Dim("n", min=2, max=8)},), [(_rows(3),)]),
}


def _flat(out) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _exported(case: str):
    model, example, dynamic, _ = CASES[case]
    return torch.export.export(model, example, dynamic_shapes=dynamic)


def _program(case: str):
    return to_edge(_exported(case)).to_executorch()


def _calls(case: str) -> list:
    _, example, _, more = CASES[case]
    return [example] + more


def _kernel_names(plan) -> list[str]:
    return [plan.operators[i.instr_args.op_index].name for i in plan.chains[0].instructions
            if isinstance(i.instr_args, S.KernelCall)]


def test_map_and_scan_are_loops_of_executorch_prim_ops():
    for case in ("map", "scan"):
        plan = _program(case).executorch_program.execution_plan[0]
        names = _kernel_names(plan)
        assert {"aten::select_copy", "executorch_prim::et_copy_index", "executorch_prim::add",
                "executorch_prim::eq", "executorch_prim::sub"} <= set(names), case
        jumps = [(pc, i.instr_args) for pc, i in enumerate(plan.chains[0].instructions)
                 if isinstance(i.instr_args, S.JumpFalseCall)]
        assert len(jumps) == 1 and jumps[0][1].destination_instruction < jumps[0][0], case  # one backward jump
    assert "aten::copy_" in _kernel_names(_program("scan").executorch_program.execution_plan[0])


@pytest.mark.parametrize("engine", sorted(RUNTIMES))
@pytest.mark.parametrize("case", sorted(CASES))
def test_loops_match_eager(case, engine):
    model = CASES[case][0]
    method = RUNTIMES[engine].load_program(_program(case).buffer).load_method("forward")
    # Twice through every input on one loaded method: the loop counter starts again at 0 each time.
    for inputs in _calls(case) * 2:
        got = method.execute(list(inputs))
        assert_outputs_close(got, _flat(model(*inputs)))


def test_the_gate_sees_a_wrong_row():
    model, example, _, _ = CASES["map"]
    got = RUNTIMES["python"].load_program(_program("map").buffer).load_method("forward").execute(list(example))
    wrong = _flat(model(*example))[0].clone()
    wrong[2] += 1e-3 * wrong[2].abs().max()
    assert not compare_outputs(got, [wrong]).ok


def test_published_runtime_runs_our_loops_and_ours_run_its_loops(tmp_path, reference_runtime):
    cases = sorted(CASES)
    for case in cases:
        (tmp_path / f"{case}.pte").write_bytes(_program(case).buffer)
        torch.save([("forward", list(i)) for i in _calls(case) * 2], tmp_path / f"{case}.calls.pt")
        if case in ("map", "scan"):
            torch.export.save(_exported(case), tmp_path / f"{case}.pt2")
    runner = Path(__file__).with_name("reference_stateful.py")
    proc = subprocess.run([reference_runtime.python, str(runner), str(tmp_path), *cases], capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for case in cases:
        assert not (tmp_path / f"{case}.err.txt").exists(), (tmp_path / f"{case}.err.txt").read_text()
        model = CASES[case][0]
        for got, inputs in zip(torch.load(tmp_path / f"{case}.out.pt"), _calls(case) * 2):
            assert_outputs_close(got, _flat(model(*inputs)))
    for case in ("map", "scan"):
        data = (tmp_path / f"{case}.published.pte").read_bytes()
        published = deserialize_pte_binary(data).program
        ours = _program(case).executorch_program
        assert set(_kernel_names(published.execution_plan[0])) >= set(_kernel_names(ours.execution_plan[0])), case
        # and the published exporter's loops run on our engines
        for engine, runtime in RUNTIMES.items():
            method = runtime.load_program(data).load_method("forward")
            for inputs in _calls(case) * 2:
                assert_outputs_close(method.execute(list(inputs)), _flat(CASES[case][0](*inputs)))


def test_while_loop_is_refused_naming_it():
    # ExecuTorch 1.5.1's exporter refuses it too ("Unsupported control flow operator: while_loop").
    ep = torch.export.export(While(), (torch.tensor(0), torch.randn(3)))
    with pytest.raises(ExportError, match=r"operator while_loop .*torch\.while_loop.* data-dependent trip count"):
        to_edge(ep)


def _with_jump_target(data: bytes, target: int) -> bytes:
    program = deserialize_pte_binary(data).program
    for ins in program.execution_plan[0].chains[0].instructions:
        if isinstance(ins.instr_args, S.JumpFalseCall):
            ins.instr_args.destination_instruction = target
    return bytes(serialize_pte_binary(program))


@pytest.mark.parametrize("engine", sorted(RUNTIMES))
def test_jump_targets_out_of_the_chain_are_refused_at_load(engine):
    data = FIXTURE.read_bytes()
    n = len(deserialize_pte_binary(data).program.execution_plan[0].chains[0].instructions)
    runtime = RUNTIMES[engine]
    runtime.load_program(data).load_method("forward")  # the fixture itself loads
    for bad in (n + 1, -1, 2**31 - 1):
        with pytest.raises(Exception, match=r"(?i)jump|destination|instruction"):
            runtime.load_program(_with_jump_target(data, bad)).load_method("forward")


def test_fixture_is_what_the_exporter_writes_today():
    # The fuzzer seeds from test/fixtures: keep its loop program current (regenerate with the lines below).
    program = to_edge(torch.export.export(ScanMapScan(), (_rows(5),),
                                          dynamic_shapes=({0: Dim("n", min=2, max=8)},))).to_executorch()
    assert FIXTURE.read_bytes() == program.buffer, f"regenerate {FIXTURE.name}: write program.buffer to it"
