"""Helpers shared by the packaging tests: import the build helpers and build wheels from a copy of the tree."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import types
import zipfile
from email.parser import Parser
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

_NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv", "venv", "build", "dist", "cmake-out", "cmake-out-*", "build-setuptools", "*.egg-info",
    "__pycache__", ".pytest_cache", "*.pte", "*.so"
)


def copy_tree(dest: Path, src: Path = REPO) -> Path:
    """Copy a source tree (no git metadata, no build output) to `dest`."""
    shutil.copytree(src, dest, ignore=_NOT_SOURCE, symlinks=True)
    return dest


def build_wheel(src: Path, out: Path, env: dict[str, str], umask: int = 0o022) -> Path:
    """Build one wheel from `src` with pip, offline (no build isolation), and return its path."""
    out.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation", "-q", "-w", str(out)],
        env={**os.environ, **env}, capture_output=True, text=True, timeout=300,
        preexec_fn=lambda: os.umask(umask),
    )
    if proc.returncode != 0:
        raise AssertionError(f"wheel build failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    (wheel,) = out.glob("*.whl")
    return wheel


def wheel_metadata(wheel: Path) -> tuple[list[str], dict, dict]:
    """The wheel's member names, parsed METADATA and parsed WHEEL."""
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(zf.read(f"{dist_info}/METADATA").decode())
        wheel_file = Parser().parsestr(zf.read(f"{dist_info}/WHEEL").decode())
    return names, metadata, wheel_file


def same_code(a: types.CodeType, b: types.CodeType) -> bool:
    """True when two code objects have the same bytecode, names, line table and constants, recursively."""
    fields = ("co_code", "co_names", "co_varnames", "co_freevars", "co_cellvars", "co_qualname", "co_flags")
    if any(getattr(a, f, None) != getattr(b, f, None) for f in fields) or list(a.co_lines()) != list(b.co_lines()):
        return False
    positions = (list(getattr(code, "co_positions", tuple)()) for code in (a, b))  # Python 3.11+
    if next(positions) != next(positions) or len(a.co_consts) != len(b.co_consts):
        return False
    for x, y in zip(a.co_consts, b.co_consts):
        if isinstance(x, types.CodeType) or isinstance(y, types.CodeType):
            if not (isinstance(x, types.CodeType) and isinstance(y, types.CodeType) and same_code(x, y)):
                return False
        elif type(x) is not type(y) or x != y:
            return False
    return True
