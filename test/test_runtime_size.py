"""The core runtime's size: load + method load + execute in a stripped --gc-sections program stays under 50 KB."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

PROBES = Path(__file__).resolve().parents[1] / "cmake-out" / "benchmarks"
LIMIT = 50 * 1024


def _stripped_size(binary: Path, tmp_path: Path) -> int:
    copy = tmp_path / binary.name
    shutil.copyfile(binary, copy)
    subprocess.run(["strip", "--strip-all", str(copy)], check=True)
    return copy.stat().st_size


@pytest.mark.skipif(not (PROBES / "size_probe").exists() or shutil.which("strip") is None,
                    reason="the size probes are not built (tools/run_tests.sh builds them) or strip is missing")
def test_core_runtime_stays_under_50_kb(tmp_path):
    # The probe calls Program::load, load_method and execute with no kernels and no tracer; tracing
    # support (the traced instruction loop, op event names) is counted, since execute() reaches it.
    size = _stripped_size(PROBES / "size_probe", tmp_path) - _stripped_size(PROBES / "size_probe_empty", tmp_path)
    assert 0 < size <= LIMIT, (
        f"the core runtime adds {size} bytes to a program (limit {LIMIT}); see `sh benchmarks/size_report.sh "
        "cmake-out` and BENCHMARKS.md on what it holds")
