"""The edge op table, the dtype table and the schema's union tags each agree with every layer that reads them."""

from __future__ import annotations

import math
import operator
import re
from pathlib import Path

import pytest
import torch
from torch.export import Dim

from executorch.devtools.compare import assert_outputs_close, compare_outputs
from executorch.exir import ExportError, schema as s, to_edge
from executorch.exir import _dtypes
from executorch.exir.dialects import _edge_ops
from executorch.runtime._python import _kernels

from conftest import project_runtimes  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
aten = torch.ops.aten

# Every symbolic op torch.export can leave in a graph for size arithmetic.
SYMBOLIC_OPS = [
    operator.add, operator.sub, operator.mul, operator.floordiv, operator.truediv, operator.mod, operator.pow,
    operator.neg, operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge,
    aten.sym_size.int, aten.sym_numel.default, aten.sym_stride.int, aten.sym_storage_offset.default,
    torch.sym_max, torch.sym_min, torch.sym_not, torch.sym_float, math.ceil, math.trunc, round,
]


def _native_ops() -> set[str]:
    text = (ROOT / "kernels/portable/functions.yaml").read_text()
    return set(re.findall(r"^- op: (\S+)", text, flags=re.M))


@pytest.mark.parametrize("target", SYMBOLIC_OPS, ids=lambda t: getattr(t, "__name__", str(t)))
def test_edge_check_and_emitter_agree_on_each_symbolic_op(target):
    emitted = _edge_ops.prim_op_name(target)
    assert _edge_ops.is_edge_op(target) == (emitted is not None)
    if emitted is not None:
        # the emitted prim kernel exists in both runtimes
        assert emitted in _kernels.SCALAR_KERNELS
        assert emitted in _native_ops()


class _SizeMath(torch.nn.Module):
    def forward(self, x):
        return x + x.shape[0] * 2 + x.shape[0] // 3


class _SizeCompare(torch.nn.Module):
    def forward(self, x):
        return x * (x.shape[0] != 2) + (x.shape[0] != 7)


class _SizePower(torch.nn.Module):
    def forward(self, x):
        return x * (x.shape[0] ** 2 > 7)


def _dynamic(model):
    return torch.export.export(model, (torch.ones(4, 3),), dynamic_shapes={"x": {0: Dim("n", max=16)}})


def test_size_arithmetic_in_the_table_runs_on_every_engine():
    pte = to_edge(_dynamic(_SizeMath())).to_executorch().buffer
    x = torch.randn(7, 3)
    for name, rt in project_runtimes().items():
        got = rt.load_program(pte).load_method("forward").execute([x])
        assert_outputs_close(got, [_SizeMath()(x)])


def test_size_inequality_runs_as_not_eq_on_every_engine():
    # No ExecuTorch runtime (the published one included) has a `ne` prim kernel: `!=` is emitted as
    # sym_not(eq), which they all have.
    program = to_edge(_dynamic(_SizeCompare())).to_executorch()
    names = {op.name for op in program.executorch_program.execution_plan[0].operators}
    assert {"executorch_prim::eq.Scalar", "executorch_prim::sym_not.Scalar"} <= names
    for n in (2, 5, 7):
        x = torch.randn(n, 3)
        for name, rt in project_runtimes().items():
            got = rt.load_program(program.buffer).load_method("forward").execute([x])
            assert_outputs_close(got, [_SizeCompare()(x)])


def test_size_arithmetic_outside_the_table_is_refused_by_the_edge_check():
    with pytest.raises(ExportError) as err:
        to_edge(_dynamic(_SizePower()))
    msg = str(err.value)
    assert "operator pow" in msg and "no ExecuTorch prim kernel" in msg and "test_edge_op_table.py:" in msg


def test_sym_stride_runs_on_every_engine():
    def size_to_stride(gm):
        # x is [n, 3], contiguous: stride(0) == 3, where size(0) is n
        for n in gm.graph.nodes:
            if n.target is aten.sym_size.int:
                n.target = aten.sym_stride.int
        return gm

    program = to_edge(_dynamic(_SizeMath())).transform([size_to_stride]).to_executorch()
    assert "aten::sym_stride.int" in {op.name for op in program.executorch_program.execution_plan[0].operators}
    x = torch.randn(7, 3)
    for name, rt in project_runtimes().items():
        got = rt.load_program(program.buffer).load_method("forward").execute([x])
        assert_outputs_close(got, [x + 3 * 2 + 3 // 3])
        assert not compare_outputs(got, [_SizeMath()(x)]).ok


def test_a_pass_introducing_sym_storage_offset_is_refused_by_the_edge_check():
    def size_to_offset(gm):
        for n in gm.graph.nodes:
            if n.target is aten.sym_size.int:
                n.target = aten.sym_storage_offset.default
                n.args = n.args[:1]
        return gm

    edge = to_edge(_dynamic(_SizeMath()))
    with pytest.raises(ExportError, match=r"sym_storage_offset\.default .* no ExecuTorch prim kernel"):
        edge.transform([size_to_offset])


def test_emitter_uses_the_table_for_prim_ops(monkeypatch):
    # The emitter reads SYM_OPS: a program emitted with the table's name for floordiv changed
    # names the changed kernel (the table is the one place to change).
    monkeypatch.setitem(_edge_ops.SYM_OPS, operator.floordiv, "executorch_prim::floordiv.int")
    plan = to_edge(_dynamic(_SizeMath())).to_executorch().executorch_program.execution_plan[0]
    assert any(op.name == "executorch_prim::floordiv.int" for op in plan.operators)
    assert not any(op.name == "executorch_prim::floordiv.Scalar" for op in plan.operators)


@pytest.mark.parametrize("row", _dtypes.DTYPES, ids=lambda r: r.name)
def test_dtype_rows_agree_with_torch(row):
    dtype = getattr(torch, row.name)
    assert dtype.itemsize == row.itemsize
    assert _dtypes.is_exportable(dtype) == row.exportable
    if row.exportable:
        assert _dtypes.scalar_type(dtype) is row.scalar_type
    else:
        with pytest.raises(KeyError):
            _dtypes.scalar_type(dtype)
    if row.runtime:
        assert _dtypes.to_torch(row.scalar_type) is dtype
        assert _dtypes.runtime_code(dtype) == int(row.scalar_type)
    else:
        assert _dtypes.to_torch(row.scalar_type) is None


def test_dtype_table_covers_the_schema():
    assert {r.scalar_type for r in _dtypes.DTYPES} == set(s.ScalarType)
    assert _dtypes.dtype_name(99) == "scalar type 99"
    assert _dtypes.element_size(99) is None


def _union(name: str) -> list[str]:
    text = (ROOT / "schema/program.fbs").read_text()
    body = re.search(r"union %s \{(.*?)\}" % name, text, flags=re.S).group(1)
    return [m.strip() for m in body.split(",") if m.strip()]


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper()


@pytest.mark.parametrize("union, tags, members, by_type", [
    ("KernelTypes", s.KernelTypesTag, s.KERNEL_TYPES, s.KERNEL_TYPE_TAG),
    ("InstructionArguments", s.InstructionArgumentsTag, s.INSTRUCTION_TYPES, s.INSTRUCTION_TAG),
])
def test_union_tags_follow_the_schema(union, tags, members, by_type):
    names = _union(union)
    assert [t.name for t in tags] == [_snake(n) for n in names]
    assert [t.value for t in tags] == list(range(1, len(names) + 1))
    assert [c.__name__ for c in members] == names
    assert all(by_type[c] == i + 1 for i, c in enumerate(members))
