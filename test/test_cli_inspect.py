"""`python -m executorch.exir inspect`: summaries of our files and the published exporter's,
cross-checked against the published reader; malformed files fail in one line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

from executorch.exir import to_edge_transform_and_lower
from executorch.cli.main import main

MODELS_DIR = Path(__file__).resolve().parents[1] / "examples" / "models"


class _Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x, y):
        return self.fc(x) + y, x.sum(dim=1)


def _write_linear(path: Path, dynamic: bool = False) -> Path:
    torch.manual_seed(0)
    batch = {0: torch.export.Dim("batch", max=16)}
    ep = torch.export.export(_Linear().eval(), (torch.randn(4, 8), torch.randn(4, 8)),
                             dynamic_shapes=(batch, batch) if dynamic else None)
    to_edge_transform_and_lower(ep).to_executorch().write_to_file(path)
    return path


def _inspect(path: Path, capsys) -> tuple[int, str, str]:
    code = main(["inspect", str(path)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_summary_of_our_file_names_signature_constants_and_operators(tmp_path, capsys):
    pte = _write_linear(tmp_path / "linear.pte")
    code, out, _ = _inspect(pte, capsys)
    assert code == 0
    assert out.startswith(f"{pte}: {pte.stat().st_size:,} bytes")
    assert "method 'forward'" in out
    assert "inputs (2):\n    [0] float32[4, 8]\n    [1] float32[4, 8]" in out
    assert "outputs (2):\n    [0] float32[4, 8]\n    [1] float32[4]" in out
    # Linear(8, 8): a 64-float weight and an 8-float bias.
    assert "constant data used: 288 bytes" in out
    assert re.search(r"planned memory: [\d,]+ bytes in 1 arena", out)
    assert re.search(r"aten::addmm\.out +1\n", out) and re.search(r"aten::sum\.IntList_out +1\n", out)
    assert "delegates: none" in out


def test_dynamic_inputs_show_their_upper_bounds(tmp_path, capsys):
    pte = _write_linear(tmp_path / "dyn.pte", dynamic=True)
    code, out, _ = _inspect(pte, capsys)
    assert code == 0
    assert "[0] float32[16, 8] (dynamic; sizes are upper bounds)" in out


def test_summary_of_published_file_agrees_with_published_reader(reference_runtime, tmp_path, capsys):
    pte = reference_runtime.export(f"{MODELS_DIR / 'multi_io.py'}:make_multi_io", tmp_path / "mio.pte")
    dump = tmp_path / "mio.json"
    subprocess.run([reference_runtime.python, str(reference_runtime.tools / "dump_pte.py"), str(pte),
                    "--out", str(dump)], check=True, capture_output=True, timeout=600)
    plan = json.loads(dump.read_text())["execution_plan"][0]
    code, out, _ = _inspect(pte, capsys)
    assert code == 0
    instructions = [i for c in plan["chains"] for i in c["instructions"]]
    assert f"{len(plan['values']):,} values, {len(instructions):,} instructions" in out
    calls = Counter(i["instr_args"]["op_index"] for i in instructions if i["instr_args_type"] == "KernelCall")
    for index, n in calls.items():
        op = plan["operators"][index]
        assert re.search(rf"{re.escape(op['name'])}\.{op['overload']} +{n}\n", out)
    arenas = plan["non_const_buffer_sizes"][1:]
    assert f"planned memory: {sum(arenas):,} bytes in {len(arenas)} arena" in out
    assert "inputs (2):" in out and "outputs (4):" in out


@pytest.mark.parametrize("damage", ["truncate", "identifier", "empty"])
def test_malformed_file_fails_in_one_line(tmp_path, capsys, damage):
    data = bytearray(_write_linear(tmp_path / "ok.pte").read_bytes())
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "identifier":
        data[4:8] = b"XXXX"
    else:
        data = bytearray()
    bad = tmp_path / "bad.pte"
    bad.write_bytes(bytes(data))
    code, out, err = _inspect(bad, capsys)
    assert code == 1 and out == ""
    assert err.startswith(f"error: {bad}: ") and err.count("\n") == 1
    if damage == "identifier":
        assert err == f"error: {bad}: not a .pte file (no ET12 identifier at offset 4, found b'XXXX'); " \
                      "check the path names a program written by write_to_file()\n"


def test_missing_file_fails_in_one_line(tmp_path, capsys):
    code, _, err = _inspect(tmp_path / "absent.pte", capsys)
    assert code == 1 and "cannot read" in err and err.count("\n") == 1


def test_module_entry_point_reports_without_traceback(tmp_path):
    bad = tmp_path / "bad.pte"
    bad.write_bytes(b"not a program at all")
    proc = subprocess.run([sys.executable, "-m", "executorch.exir", "inspect", str(bad)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"error: {bad}: not a .pte file (no ET12 identifier at offset 4")
    assert proc.stderr.count("\n") == 1 and "re-export" not in proc.stderr


@pytest.mark.parametrize("module", ["executorch.exir", "executorch.cli"])
@pytest.mark.parametrize("args", [["--help"], ["export", "--help"], ["inspect", "--help"]])
def test_help_exits_0(module, args):
    proc = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.startswith(f"usage: python -m {module}") and proc.stderr == ""


def test_closed_pipe_ends_quietly(tmp_path):
    # `inspect m.pte | head -1`: the reader leaves after one line; no BrokenPipeError traceback follows.
    pte = _write_linear(tmp_path / "m.pte")
    proc = subprocess.Popen([sys.executable, "-m", "executorch.exir", "inspect", str(pte)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the first write
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=300) == 141 and err == ""


def test_constant_methods_and_delegates_are_listed(tmp_path, capsys):
    from executorch.exir import schema as s
    from executorch.exir._serialize import serialize_pte_binary

    torch.manual_seed(0)
    ep = torch.export.export(_Linear().eval(), (torch.randn(4, 8), torch.randn(4, 8)))
    program = to_edge_transform_and_lower(ep, constant_methods={"vocab_size": 32}).to_executorch().executorch_program
    forward = next(p for p in program.execution_plan if p.name == "forward")
    forward.delegates = [
        s.BackendDelegate("InlineBackend", s.BackendDelegateDataReference(s.DataLocation.INLINE, 0),
                          [s.CompileSpec("level", b"3")]),
        s.BackendDelegate("SegmentBackend", s.BackendDelegateDataReference(s.DataLocation.SEGMENT, 1), []),
    ]
    program.backend_delegate_data = [s.BackendDelegateInlineData(b"abc")]
    program.segment_data = [b"", bytes(100)]
    pte = tmp_path / "delegates.pte"
    pte.write_bytes(serialize_pte_binary(program))

    code, out, _ = _inspect(pte, capsys)
    assert code == 0
    assert "method 'vocab_size'\n  inputs (0):\n  outputs (1): int\n" in out
    assert "    [0] InlineBackend: 3 bytes (inline 0), compile specs: level (1 byte), called by never\n" in out
    assert "    [1] SegmentBackend: 100 bytes (segment 1), compile specs: none, called by never\n" in out
    assert re.search(r"\[0\] offset 0, [\d,]+ bytes: constant tensors\n", out)
    assert re.search(r"\[1\] offset [\d,]+, 100 bytes: delegate 'SegmentBackend' of 'forward'", out)
