"""Agreement with the published ExecuTorch: its files round-trip byte for byte through our
reader and writer, and its reader decodes our files as we wrote them.

Needs ET_REFERENCE_PYTHON (see conftest.py); skipped without it.
"""

from __future__ import annotations

import enum
import json
import subprocess
import textwrap
from dataclasses import fields, is_dataclass
from pathlib import Path

import pytest

from _serialize_programs import floats, plan, program, rich_program, tensor  # noqa: E402

from executorch.exir import schema as s
from executorch.exir._serialize import read_program, serialize_pte_binary

REPO = Path(__file__).resolve().parents[1]

_FACTORIES = textwrap.dedent(
    """
    import sys
    import torch
    sys.path.insert(0, {models!r})
    from mobilenet_v2 import MobileNetV2


    def make_mv2():
        torch.manual_seed(0)
        return MobileNetV2().eval(), (torch.randn(1, 3, 224, 224),)


    def make_linear():
        torch.manual_seed(0)
        return torch.nn.Linear(4, 3).eval(), (torch.randn(2, 4),)


    class Args(torch.nn.Module):
        def forward(self, x, y, idx):
            a = torch.sum(x, dim=[1], keepdim=True)        # int list, bool
            b = torch.clamp(x, min=-0.5, max=0.5)          # doubles
            c = torch.cat([x, y], 1).transpose(0, 1)       # tensor list, ints
            d = x[idx]                                     # optional tensor list
            return a, b, c, d


    def make_args():
        torch.manual_seed(0)
        return Args().eval(), (torch.randn(2, 3), torch.randn(2, 2), torch.tensor([1, 0]))


    class MultiOut(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(3))
            self.register_buffer("b", torch.arange(3.0))

        def forward(self, x):
            return x + self.w, x * self.b, (x - 1).relu()


    def make_multi_out():
        torch.manual_seed(0)
        return MultiOut().eval(), (torch.randn(3),)


    class Kinds(torch.nn.Module):
        def forward(self, x, img):
            a = torch.div(x, x.abs() + 1, rounding_mode="floor")                        # string
            b = torch.nn.functional.interpolate(img, scale_factor=2.0, mode="nearest")  # double list
            return a, b


    def make_kinds():
        torch.manual_seed(0)
        return Kinds().eval(), (torch.randn(3), torch.randn(1, 1, 2, 2))


    class Cond(torch.nn.Module):
        def forward(self, x):                                   # jump-false and move calls
            return torch.cond(x.sum() > 0, lambda x: x + 1, lambda x: x * 2, (x,))


    def make_cond():
        torch.manual_seed(0)
        return Cond().eval(), (torch.randn(3),)
    """
)

MODELS = ["mv2", "linear", "args", "multi_out", "kinds", "cond"]


@pytest.fixture(scope="module")
def published(reference_runtime, tmp_path_factory):
    """The published exporter's file for a model name, exported once per test module."""
    root = tmp_path_factory.mktemp("published")
    factories = root / "factories.py"
    factories.write_text(_FACTORIES.format(models=str(REPO / "examples" / "models")))
    cache: dict[str, bytes] = {}

    def get(name: str) -> bytes:
        if name not in cache:
            out = reference_runtime.export(f"{factories}:make_{name}", root / f"{name}.pte")
            cache[name] = out.read_bytes()
        return cache[name]

    return get


@pytest.mark.parametrize("name", MODELS)
def test_published_file_round_trips_byte_identical(published, name):
    data = published(name)
    program = read_program(data)
    assert serialize_pte_binary(program) == data


def test_published_files_cover_every_kind_but_bool_list(published):
    # So the byte-identity test above exercises each table the exporter writes.
    kinds, instructions = set(), set()
    for name in MODELS[1:]:
        plan = read_program(published(name)).execution_plan[0]
        kinds |= {type(v.val) for v in plan.values}
        instructions |= {type(i.instr_args) for c in plan.chains for i in c.instructions}
    assert kinds == set(s.KERNEL_TYPES) - {s.BoolList}
    assert {s.KernelCall, s.MoveCall, s.JumpFalseCall} <= instructions


def test_published_mv2_reads_as_expected(published):
    program = read_program(published("mv2"))
    plan = program.execution_plan[0]
    assert (len(plan.values), len(plan.chains[0].instructions)) == (1603, 153)
    # The constant segment is split back into one buffer per weight, sized by its tensor.
    weights = [v.val for v in plan.values if isinstance(v.val, s.Tensor) and v.val.data_buffer_idx
               and v.val.scalar_type == s.ScalarType.FLOAT]
    assert weights
    for t in weights:
        numel = 1
        for d in t.sizes:
            numel *= d
        assert len(program.constant_buffer[t.data_buffer_idx].storage) == 4 * numel


def _to_json(value):
    """Our dataclasses in the published reader's JSON shape (unions carry a `<field>_type`)."""
    if is_dataclass(value):
        out = {}
        for f in fields(value):
            v = getattr(value, f.name)
            out[f.name] = _to_json(v)
            if isinstance(value, s.EValue) or isinstance(value, s.Instruction):
                out[f"{f.name}_type"] = type(v).__name__
        return out
    if isinstance(value, (list, tuple)):
        return [_to_json(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return list(bytes(value))
    return value


def _published_reading(reference_runtime, path: Path) -> dict:
    proc = subprocess.run(
        [reference_runtime.python, str(reference_runtime.tools / "dump_pte.py"), str(path)],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, f"the published reader refused our file: {proc.stderr[-2000:]}"
    return json.loads(proc.stdout[proc.stdout.index("{"):])


def _ours_for_published_reader(program: s.Program) -> dict:
    # The published reader returns constants with their alignment padding, delegates' segment
    # data moved inline, and segment bookkeeping cleared; compare what survives that.
    ours = _to_json(program)
    # A file whose segments are all empty has no extended header, so the published reader leaves
    # constant_segment as stored; the constant tests below check the constants themselves.
    for key in ("segment_data", "segments", "mutable_data_segments", "named_data", "constant_buffer",
                "backend_delegate_data", "constant_segment"):
        ours.pop(key)
    for p in ours["execution_plan"]:
        for d in p["delegates"]:
            d.pop("processed")
    return ours


@pytest.mark.parametrize("make", [rich_program, lambda: program([plan()])], ids=["rich", "minimal"])
def test_published_reader_decodes_our_file(reference_runtime, tmp_path, make):
    ours = make()
    path = tmp_path / "ours.pte"
    path.write_bytes(serialize_pte_binary(ours))
    theirs = _published_reading(reference_runtime, path)
    for key in ("segments", "mutable_data_segments", "named_data", "constant_buffer", "backend_delegate_data",
                "constant_segment"):
        theirs.pop(key)
    for p in theirs["execution_plan"]:
        for d in p["delegates"]:
            d.pop("processed")
    assert theirs == _ours_for_published_reader(ours)


def test_published_reader_sees_our_constants_and_delegate_data(reference_runtime, tmp_path):
    ours = rich_program()
    path = tmp_path / "ours.pte"
    path.write_bytes(serialize_pte_binary(ours))
    theirs = _published_reading(reference_runtime, path)
    # Constants come back padded to the 16-byte tensor alignment, except the last one.
    assert [bytes(b["storage"]) for b in theirs["constant_buffer"]] == [b"", floats(1, 2, 3) + bytes(4), floats(4)]
    # Inline delegate data stays first; the segment delegate's blob is appended after it.
    assert [bytes(d["data"]) for d in theirs["backend_delegate_data"]] == [b"inline-blob", b"delegate-payload" * 3]


def test_published_runtime_runs_our_rewrite_of_its_file(reference_runtime, published, tmp_path):
    torch = pytest.importorskip("torch")
    original = tmp_path / "linear.pte"
    original.write_bytes(published("linear"))
    rewritten = tmp_path / "rewritten.pte"
    rewritten.write_bytes(serialize_pte_binary(read_program(original.read_bytes())))
    x = torch.randn(2, 4)
    expected = reference_runtime.run(original, [x], tmp_path)
    assert torch.equal(reference_runtime.run(rewritten, [x], tmp_path)[0], expected[0])


def test_published_runtime_runs_our_hand_built_program(reference_runtime, tmp_path):
    torch = pytest.importorskip("torch")
    # out = x + c, with c a constant: aten::add.out(self, other, alpha, out) -> out.
    values = [
        tensor([3], alloc=s.AllocationDetails(1, 0)),
        tensor([3], buffer_idx=1),
        s.EValue(s.Int(1)),
        tensor([3], alloc=s.AllocationDetails(1, 16)),
    ]
    add = s.Instruction(s.KernelCall(0, [0, 1, 2, 3, 3]))
    p = program([plan(values=values, instructions=[add], inputs=[0], outputs=[3],
                      chains=[s.Chain([0], [3], [add])], non_const_buffer_sizes=[0, 32])],
                constants=[floats(10, 20, 30)])
    path = tmp_path / "add.pte"
    path.write_bytes(serialize_pte_binary(p))
    out = reference_runtime.run(path, [torch.tensor([1.0, 2.0, 3.0])], tmp_path)
    assert torch.equal(out[0], torch.tensor([11.0, 22.0, 33.0]))
