"""The tree is clean under its linters: ruff (pyproject.toml's [tool.ruff]) for Python, clang-format (.clang-format)
for C++, each as pinned in requirements-dev.txt. A check that fails prints the command that fixes or shows it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool(name: str) -> str:
    path = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: pip install -r requirements-dev.txt")
    return path


def _tracked(*patterns: str) -> list[str]:
    out = subprocess.run(["git", "ls-files", "--", *patterns], cwd=ROOT, capture_output=True, text=True)
    if out.returncode:
        pytest.skip("not a git checkout: the lint checks read git's file list")
    return [f for f in out.stdout.split() if (ROOT / f).is_file()]


def _ruff(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([_tool("ruff"), "check", "--no-cache", *args], cwd=cwd, capture_output=True, text=True)


def test_python_is_clean_under_ruff():
    proc = _ruff(".")
    assert proc.returncode == 0, f"ruff check . finds:\n{proc.stdout[-6000:]}"


def test_ruff_reads_the_project_config(tmp_path: Path):
    """The config is the one applied: a 121-character line fails, a 120-character one passes."""
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (tmp_path / "ok.py").write_text("x = '" + "a" * 114 + "'\n")
    assert len((tmp_path / "ok.py").read_text().rstrip("\n")) == 120
    assert _ruff(".", cwd=tmp_path).returncode == 0
    (tmp_path / "long.py").write_text("x = '" + "a" * 115 + "'\n")
    proc = _ruff(".", cwd=tmp_path)
    assert proc.returncode == 1 and "E501" in proc.stdout


CPP = ("*.cpp", "*.h", "*.cc", "*.hpp")


def test_cpp_is_clean_under_clang_format():
    files = [f for f in _tracked(*CPP) if not f.startswith("test/fixtures/")]
    assert len(files) > 100, f"only {len(files)} C++ files found: is the list right?"
    proc = subprocess.run([_tool("clang-format"), "--dry-run", "--Werror", *files], cwd=ROOT, capture_output=True,
                          text=True)
    assert proc.returncode == 0, (f"clang-format would change these (fix: clang-format -i FILE):\n"
                                  f"{proc.stderr[-6000:]}")


def test_clang_format_reads_the_project_config(tmp_path: Path):
    (tmp_path / ".clang-format").write_text((ROOT / ".clang-format").read_text())
    bad = tmp_path / "bad.cpp"
    bad.write_text("int   f( int x ){return x;}\n")
    proc = subprocess.run([_tool("clang-format"), "--dry-run", "--Werror", str(bad)], cwd=tmp_path,
                          capture_output=True, text=True)
    assert proc.returncode != 0
