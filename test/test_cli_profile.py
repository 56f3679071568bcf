"""`python -m executorch.cli profile`: per-instruction times, top operators, the bar chart, its errors."""

from __future__ import annotations

import struct
import subprocess
import sys

import pytest
import torch

from executorch.cli.errors import CliError
from executorch.cli.profile import collect, render, save_bar_chart
from executorch.exir import schema as S
from executorch.exir import to_edge_transform_and_lower

from conftest import project_runtimes  # noqa: E402
from test_devtools_etdump import ConvLinear, _inputs  # noqa: E402

RUNTIMES = project_runtimes()


def _pte(partitioner=None) -> bytes:
    return to_edge_transform_and_lower(torch.export.export(ConvLinear(), _inputs()),
                                       partitioner=partitioner).to_executorch()


@pytest.mark.parametrize("engine", sorted(RUNTIMES))
def test_every_kernel_is_a_row_and_shares_add_up(engine):
    et = _pte()
    profile = collect(et.buffer, list(_inputs()), iterations=4, warmup=1, runtime=RUNTIMES[engine])
    assert profile.runs == 4 and len(profile.execute_ms) == 4 and all(t > 0 for t in profile.execute_ms)
    plan = et.executorch_program.execution_plan[0]
    op = lambda i: plan.operators[i.instr_args.op_index]  # noqa: E731
    ops = {pc: f"{op(i).name.split('::')[1]}.{op(i).overload}"
           for pc, i in enumerate(plan.chains[0].instructions) if isinstance(i.instr_args, S.KernelCall)}
    rows = {r.instruction: r for r in profile.rows}
    # The native runtime folds a linear's weight transpose into the weight at load: nothing runs there.
    expected = {pc: op for pc, op in ops.items() if not (engine == "native" and op.startswith("permute_copy"))}
    assert sorted(rows) == sorted(expected)
    for pc, op in expected.items():
        assert rows[pc].name == f"native_call_{op}" and len(rows[pc].runs_ms) == 4
    # Kernels run inside Method::execute in each run.
    for run in range(4):
        assert sum(r.runs_ms[run] for r in profile.rows) <= profile.execute_ms[run]
    top = profile.top_ops()
    assert [t[2] for t in top] == sorted((t[2] for t in top), reverse=True)
    assert 0 < sum(t[3] for t in top) <= 1.0 + 1e-9
    text = render(profile, top=3)
    assert f"4 runs on the {engine} runtime" in text and "top 3 operators" in text
    assert text.count("native_call_") == len(expected)


def _executor_backend():
    from executorch.exir.backend.test.demos.rpc.executor_backend_partitioner import ExecutorBackendPartitioner

    return ExecutorBackendPartitioner()


def _xnnpack():
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    return XnnpackPartitioner()


@pytest.mark.parametrize("backend", ["ExecutorBackend", "XnnpackBackend"])
@pytest.mark.parametrize("engine", sorted(RUNTIMES))
def test_delegate_nodes_are_rows_under_their_call(engine, backend):
    partitioner = _executor_backend() if backend == "ExecutorBackend" else _xnnpack()
    et = _pte([partitioner])
    profile = collect(et.buffer, list(_inputs()), iterations=2, warmup=0, runtime=RUNTIMES[engine])
    calls = [r for r in profile.rows if r.name.startswith("DELEGATE_CALL")]
    assert calls and all(c.name == f"DELEGATE_CALL {backend}" for c in calls)
    nodes = [r for r in profile.rows if r.nested]
    assert len(nodes) >= (5 if backend == "ExecutorBackend" else 3)
    for call in calls:  # each call's nodes follow it, and their times lie within its time
        mine = [n for n in nodes if n.instruction == call.instruction]
        assert mine and profile.rows.index(call) < min(profile.rows.index(n) for n in mine)
        for run in range(2):
            assert sum(n.runs_ms[run] for n in mine) <= call.runs_ms[run]
    # The delegate's nodes are inside its call, so the top operators count the calls, not the nodes.
    assert f"DELEGATE_CALL {backend}" in [t[0] for t in profile.top_ops()]
    assert not {n.name for n in nodes} & {t[0] for t in profile.top_ops()}


def test_bar_chart_is_a_png_and_needs_the_extra(tmp_path, monkeypatch):
    profile = collect(_pte().buffer, list(_inputs()), iterations=2, warmup=0, runtime=RUNTIMES["python"])
    pytest.importorskip("matplotlib")
    save_bar_chart(profile, 5, tmp_path / "top.png")
    data = (tmp_path / "top.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert width == 800 and 100 < height < 800
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if the extra were not installed
    with pytest.raises(CliError, match=r"pip install executorch\[devtools\]"):
        save_bar_chart(profile, 5, tmp_path / "none.png")
    assert not (tmp_path / "none.png").exists()


def test_command_line(tmp_path):
    (tmp_path / "m.pte").write_bytes(_pte().buffer)
    torch.save(list(_inputs()), tmp_path / "in.pt")
    run = lambda *a: subprocess.run([sys.executable, "-m", "executorch.cli", "profile", *map(str, a)],  # noqa: E731
                                    capture_output=True, text=True)
    out = run(tmp_path / "m.pte", "-n", "2", "--inputs", tmp_path / "in.pt", "--top", "2")
    assert out.returncode == 0, out.stderr
    assert "2 runs on the" in out.stdout and "top 2 operators" in out.stdout and "native_call_convolution" in out.stdout
    (tmp_path / "bad.pte").write_bytes(b"not a program")
    for args, want in (((tmp_path / "missing.pte",), "cannot read"), ((tmp_path / "bad.pte",), "bad.pte"),
                       ((tmp_path / "m.pte", "-n", "0"), "--iterations"),
                       ((tmp_path / "m.pte", "--inputs", tmp_path / "bad.pte"), "cannot read inputs")):
        out = run(*args)
        assert out.returncode != 0 and want in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
