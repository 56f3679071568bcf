"""Size arithmetic on symbolic sizes, sizes as tensor operands, and `.item()`, run on every runtime."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import pytest
import torch

from executorch.devtools.compare import assert_outputs_close
from executorch.exir import schema as S
from executorch.exir import to_edge

from conftest import project_runtimes  # noqa: E402

RUNTIMES = project_runtimes()


class Item(torch.nn.Module):
    def forward(self, x, n):
        k = n.item()
        torch._check(k >= 1)
        torch._check(k <= 8)
        return x[:k] * 2


class SymOps(torch.nn.Module):
    def forward(self, x):
        n = x.shape[0]
        flag = torch.sym_ite(torch.sym_not(n == 5), torch.sym_max(n, 3), torch.sym_min(n, 4))
        other = torch.sym_ite(n == 2, 20, 10)
        return torch.full((2,), torch.sym_float(n) * 0.5 + flag + other), x * 2


class Rounding(torch.nn.Module):
    def forward(self, x):
        n = x.shape[0]
        sizes = torch.tensor([math.ceil(n / 4), math.trunc(n / 4), round(n / 4), n != 6])
        return x.sum() * sizes


class SizeOperands(torch.nn.Module):
    """Tensor (+, -, *, /) size: torch records the size itself where the op's schema takes a Tensor."""

    def forward(self, x, pos):
        n = x.shape[0]
        return x + n, x - n, x * n, x / n, n - pos, pos.int() * n, x * (n * 0.5), torch.arange(n) + pos


CASES = {
    "rounding": (Rounding(), (torch.randn(6, 3),), ({0: torch.export.Dim("n", min=2, max=16)},),
                 [(torch.randn(5, 3),), (torch.randn(10, 3),), (torch.randn(7, 3),)]),
    "item": (Item(), (torch.arange(8.0), torch.tensor(3)), None, [(torch.arange(8.0), torch.tensor(5))]),
    "sym_ops": (SymOps(), (torch.randn(6),), ({0: torch.export.Dim("n", min=2, max=16)},),
                [(torch.randn(5),), (torch.randn(2),)]),
    "size_operands": (SizeOperands(), (torch.randn(6), torch.tensor([3])),
                      ({0: torch.export.Dim("n", min=1, max=16)}, None),
                      [(torch.randn(1), torch.tensor([-2])), (torch.randn(13), torch.tensor([7]))]),
}


def _program(case: str):
    model, example, dynamic, _ = CASES[case]
    return to_edge(torch.export.export(model, example, dynamic_shapes=dynamic)).to_executorch()


def test_prim_ops_in_the_file():
    names = {op.name for op in _program("sym_ops").executorch_program.execution_plan[0].operators}
    assert {f"executorch_prim::{op}.Scalar"
            for op in ("sym_max", "sym_min", "sym_ite", "sym_float", "sym_not", "eq")} <= names
    names = {op.name for op in _program("rounding").executorch_program.execution_plan[0].operators}
    assert {f"executorch_prim::{op}.Scalar" for op in ("ceil", "trunc", "round", "eq", "sym_not")} <= names
    names = {op.name for op in _program("item").executorch_program.execution_plan[0].operators}
    assert "aten::_local_scalar_dense" in names


@pytest.mark.parametrize("case", sorted(CASES))
def test_kernels_get_tensors_where_their_schema_takes_one(case):
    """Every kernel call's Tensor argument is a Tensor value: kernels (the published runtime's too) read
    it as one, and a size (`x + n`) left as an Int makes them abort."""
    plan = _program(case).executorch_program.execution_plan[0]
    checked = 0
    for chain in plan.chains:
        for ins in chain.instructions:
            call = ins.instr_args
            if not isinstance(call, S.KernelCall):
                continue
            op = plan.operators[call.op_index]
            namespace, _, name = op.name.partition("::")
            if namespace != "aten" or name.startswith("sym_"):
                continue
            schema = getattr(getattr(torch.ops.aten, name), op.overload or "default")._schema
            for a, value in zip(schema.arguments, call.args):
                if a.type.kind() == "TensorType":
                    got = plan.values[value].val
                    assert isinstance(got, S.Tensor), f"{op.name}.{op.overload} argument '{a.name}' is {got!r}"
                    checked += 1
    assert checked


@pytest.mark.parametrize("engine", sorted(RUNTIMES))
@pytest.mark.parametrize("case", sorted(CASES))
def test_sym_ops_match_eager(case, engine):
    model, example, _, more = CASES[case]
    method = RUNTIMES[engine].load_program(_program(case).buffer).load_method("forward")
    for inputs in [example] + more:
        want = model(*inputs)
        assert_outputs_close(list(method.execute(list(inputs))), list(want) if isinstance(want, tuple) else [want])


def test_published_runtime_runs_sym_ops(tmp_path, reference_runtime):
    for case, (model, example, _, more) in CASES.items():
        (tmp_path / f"{case}.pte").write_bytes(_program(case).buffer)
        torch.save([("forward", list(i)) for i in [example] + more], tmp_path / f"{case}.calls.pt")
    runner = Path(__file__).with_name("reference_stateful.py")
    proc = subprocess.run([reference_runtime.python, str(runner), str(tmp_path), *CASES], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for case, (model, example, _, more) in CASES.items():
        assert not (tmp_path / f"{case}.err.txt").exists(), (tmp_path / f"{case}.err.txt").read_text()
        for got, inputs in zip(torch.load(tmp_path / f"{case}.out.pt"), [example] + more):
            want = model(*inputs)
            assert_outputs_close(got, list(want) if isinstance(want, tuple) else [want])
