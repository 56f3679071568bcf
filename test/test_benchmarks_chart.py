"""benchmarks/bench_native.py's chart of the same-file table (`--chart`): draw_ratio_chart writes a PNG
atomically from the table's rows and refuses rows it cannot draw. No benchmark runs here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# Two rows as _same_xnnpack_file builds them: model label, then ms per thread count on each runtime.
ROWS = [
    {"model": "mobilenet_v2 fp32", "ours": {1: 6.8, 2: 3.5}, "published": {1: 7.1, 2: 3.7}},
    {"model": "resnet18 fp32", "ours": {1: 24.7, 2: 13.1}, "published": {1: 33.2, 2: 17.0}},
]


@pytest.fixture(scope="module")
def bench_native():
    sys.path.insert(0, str(BENCHMARKS))  # the script imports its folder's helpers by name
    try:
        spec = importlib.util.spec_from_file_location("bench_native_under_test", BENCHMARKS / "bench_native.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_two_rows_make_a_png(bench_native, tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "same_file_speed.png"
    assert bench_native.draw_ratio_chart(ROWS, path, date="2026-11-26") is True
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # the temporary file was renamed, not left
    # Drawn again over the first: replaced whole; a one-thread table (--cpu-time) draws too.
    one_thread = [{**row, "ours": {1: row["ours"][1]}, "published": {1: row["published"][1]}} for row in ROWS]
    assert bench_native.draw_ratio_chart(one_thread, path) is True
    assert path.read_bytes()[:8] == PNG_SIGNATURE


def test_no_rows_is_a_value_error(bench_native, tmp_path):
    with pytest.raises(ValueError, match="no rows to draw"):
        bench_native.draw_ratio_chart([], tmp_path / "chart.png")
    bad = [{"model": "m", "ours": {1: 0.0}, "published": {1: 2.0}}]
    with pytest.raises(ValueError, match="positive and finite"):
        bench_native.draw_ratio_chart(bad, tmp_path / "chart.png")
    assert list(tmp_path.iterdir()) == []


def test_without_matplotlib_the_chart_is_skipped(bench_native, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib...` raise ImportError
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    assert bench_native.draw_ratio_chart(ROWS, tmp_path / "chart.png") is False
    assert "pip install matplotlib" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []
