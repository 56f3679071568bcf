"""executor_runner on hostile input: programs that never stop, flags out of range, paths that are no file."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RUNNER = REPO / "cmake-out" / "examples" / "executor_runner" / "executor_runner"
FIXTURES = REPO / "test" / "fixtures"
ADD = FIXTURES / "native" / "add.pte"
SCAN = FIXTURES / "control_flow_scan_map.pte"  # torch.scan: a loop made of a backward jump

pytestmark = pytest.mark.skipif(not RUNNER.exists(),
                                reason="executor_runner is not built (tools/run_tests.sh builds it)")


def _run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(RUNNER), *map(str, args)], capture_output=True, text=True, timeout=timeout)
    # A signal (abort, segfault) is never an acceptable way to refuse something.
    assert proc.returncode >= 0, f"executor_runner died of signal {-proc.returncode}: {proc.stderr[-2000:]}"
    return proc


def _looping_program(tmp_path: Path) -> Path:
    """A method whose one instruction jumps to itself forever (a malformed loop)."""
    from runtime_programs import PlanBuilder

    from executorch.exir._serialize import serialize_pte_binary

    b = PlanBuilder()
    x = b.tensor([2], 0)
    b.inputs, b.outputs = [x], [x]
    b.jump_false(b.bool_(False), 0)
    path = tmp_path / "loop.pte"
    path.write_bytes(serialize_pte_binary(b.program()))
    return path


def test_a_program_that_loops_forever_stops_at_the_default_limit(tmp_path):
    proc = _run("--model_path", _looping_program(tmp_path), timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert "ran 10000000 instructions without finishing" in proc.stderr, proc.stderr
    assert "--max_instructions" in proc.stderr, proc.stderr


def test_max_instructions_sets_the_limit(tmp_path):
    proc = _run("--model_path", _looping_program(tmp_path), "--max_instructions", "1000")
    assert proc.returncode == 1 and "ran 1000 instructions without finishing" in proc.stderr, proc.stderr
    # A real loop (torch.scan) runs within the default, and is stopped by a limit below its length.
    assert _run("--model_path", SCAN).returncode == 0
    short = _run("--model_path", SCAN, "--max_instructions", "5")
    assert short.returncode == 1 and "ran 5 instructions without finishing" in short.stderr, short.stderr


def test_debug_buffer_size_too_large_is_a_clear_error(tmp_path):
    proc = _run("--model_path", ADD, "--etdump_path", tmp_path / "e.etdp", "--debug_output_path", tmp_path / "d.bin",
                "--debug_buffer_size", "99999999999999")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--debug_buffer_size '99999999999999'" in lines[0], proc.stderr
    assert not (tmp_path / "e.etdp").exists()


@pytest.mark.parametrize("flag,value", [
    ("--iterations", "99999999999"), ("--iterations", "5x"), ("--iterations", "0"),
    ("--seed", "-1"), ("--seed", "4294967296"), ("--rtol", "abc"), ("--atol", "-1"), ("--atol", "nan"),
    ("--num_threads", "0"), ("--max_instructions", "-3"), ("--max_instructions", "1e9"),
    ("--debug_buffer_size", "0"), ("--debug_buffer_size", "12ab"),
])
def test_a_number_flag_out_of_range_is_refused_naming_it(flag, value):
    proc = _run("--model_path", ADD, flag, value)
    assert proc.returncode == 2, (flag, value, proc.stdout, proc.stderr)
    assert f"{flag} '{value}'" in proc.stderr, proc.stderr


def test_paths_that_are_no_file_are_named(tmp_path):
    (tmp_path / "empty.pte").write_bytes(b"")
    (tmp_path / "dir.pte").mkdir()
    cases = {
        "empty.pte": "is empty (0 bytes); not a .pte",
        "dir.pte": "is a directory",
        "missing.pte": "does not exist (no such file)",
    }
    for name, cause in cases.items():
        path = tmp_path / name
        proc = _run("--model_path", path)
        assert proc.returncode == 1, proc.stderr
        assert f"{path} {cause}" in proc.stderr and "null" not in proc.stderr, proc.stderr
    for name, cause in {"empty.pte": "is empty (0 bytes); not a .ptd", "dir.pte": "is a directory",
                        "missing.pte": "does not exist (no such file)"}.items():
        proc = _run("--model_path", FIXTURES / "ptd" / "two_linear.pte", "--data_path", tmp_path / name)
        assert proc.returncode == 1 and f"{tmp_path / name} {cause}" in proc.stderr, proc.stderr
    for name, cause in {"empty.pte": "is empty (0 bytes); not a .bpte", "dir.pte": "is a directory",
                        "missing.pte": "does not exist (no such file)"}.items():
        proc = _run("--bundled", tmp_path / name)
        assert proc.returncode == 1 and f"{tmp_path / name} {cause}" in proc.stderr, proc.stderr
    proc = _run("--model_path", ADD, "--inputs", f"{tmp_path / 'dir.pte'},{tmp_path / 'dir.pte'}")
    assert proc.returncode == 1 and f"{tmp_path / 'dir.pte'} is a directory" in proc.stderr, proc.stderr
