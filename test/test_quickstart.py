"""tools/quickstart.sh: progress lines, one summary, no stray warnings, and a last line that is OK only
when the file's outputs match eager (a corrupted runtime output makes it FAIL)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Stands in for the venv's python: the environment is the test's own, already set up, so pip is a
# no-op here (the setup script's pip steps are not under test), and everything else runs for real.
_WRAPPER = """#!/bin/sh
if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then exit 0; fi
if [ "$1" = "-m" ] && [ "$2" = "executorch.exir" ] && [ -n "$CORRUPT" ]; then
  shift 2; exec "{python}" "{driver}" "$@"
fi
exec "{python}" "$@"
"""

# Runs the CLI with executorch.runtime's outputs corrupted after a real run.
_DRIVER = """
import os, runpy, warnings
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
from executorch.runtime import Runtime

real = Runtime.get()
corrupt = {"zeros": lambda t: t * 0, "sign": lambda t: -t}[os.environ["CORRUPT"]]

class _Method:
    def __init__(self, method):
        self.method = method
    def execute(self, inputs):
        return [corrupt(t) for t in self.method.execute(inputs)]

class _Program:
    def __init__(self, program):
        self.program = program
    def load_method(self, name):
        return _Method(self.program.load_method(name))

class _Runtime:
    backend = real.backend
    def load_program(self, path):
        return _Program(real.load_program(path))

Runtime.get = staticmethod(lambda: _Runtime())
runpy.run_module("executorch.exir", run_name="__main__", alter_sys=True)
"""


def _quickstart(tmp_path: Path, corrupt: str = "") -> subprocess.CompletedProcess:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    driver = tmp_path / "driver.py"
    driver.write_text(textwrap.dedent(_DRIVER))
    python = venv / "bin" / "python"
    python.write_text(_WRAPPER.format(python=sys.executable, driver=driver))
    python.chmod(0o755)
    env = {**os.environ, "VENV": str(venv), "CORRUPT": corrupt}
    return subprocess.run(["bash", str(REPO / "tools" / "quickstart.sh"), str(tmp_path / "mv2.pte")], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600)


def test_quickstart_reports_progress_one_summary_and_ok(tmp_path):
    proc = _quickstart(tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("[1/2] setting up ") and "\n[2/2] exporting MobileNetV2 to " in out
    assert out.count("method 'forward'") == 1, "the summary is printed once"
    assert proc.stderr == "", f"stray output on stderr: {proc.stderr}"
    assert "warning" not in out.lower()
    last = out.splitlines()[-1]
    assert re.fullmatch(rf"OK: {re.escape(str(tmp_path / 'mv2.pte'))} \(13\.3 MiB\) matches eager "
                        r"\(1 output, max rel err [\d.e+-]+ on the \w+ runtime\)", last), last


@pytest.mark.parametrize("corrupt", ["zeros", "sign"])
def test_quickstart_fails_on_a_corrupted_output(tmp_path, corrupt):
    proc = _quickstart(tmp_path, corrupt)
    assert proc.returncode == 1
    assert "OK:" not in proc.stdout
    last = proc.stderr.splitlines()[-1]
    assert last.startswith(f"FAIL: {tmp_path / 'mv2.pte'} (13.3 MiB) was written but does not match eager"), last
    assert "values beyond tolerance" in last
