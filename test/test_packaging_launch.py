"""The console-script launcher: runs the packaged binary, or says in one line that this install lacks it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _launch_copy(tmp_path: Path) -> Path:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "_launch.py").write_text((REPO / "_launch.py").read_text())
    return package


def _run(package: Path, tool: str, *args: str) -> subprocess.CompletedProcess:
    code = f"import sys; sys.path.insert(0, {str(package)!r}); import _launch; _launch._exec({tool!r})"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60)


def test_missing_binary_is_one_line_naming_the_fix(tmp_path):
    proc = _run(_launch_copy(tmp_path), "executor_runner")
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "executor_runner" in lines[0] and "full executorch wheel" in lines[0]


@pytest.mark.skipif(os.name == "nt", reason="the shell stand-in is POSIX")
def test_packaged_binary_gets_the_arguments_and_exit_code(tmp_path):
    package = _launch_copy(tmp_path)
    (package / "bin").mkdir()
    tool = package / "bin" / "executor_runner"
    tool.write_text('#!/bin/sh\necho "args: $*"\nexit 7\n')
    tool.chmod(0o755)
    proc = _run(package, "executor_runner", "--model_path", "m.pte")
    assert proc.returncode == 7 and proc.stdout.strip() == "args: --model_path m.pte"
