"""The .ptn package (exir._serialize._ptn): program bytes and constants round trip, repeated immutable bytes are
stored once, and the package is read back by the safetensors library as well as by us."""

from __future__ import annotations

import json
import zipfile

import pytest
import torch

from executorch.exir._serialize._ptn import ALIASES_ENTRY, PTG_ENTRY, SAFETENSORS_ENTRY, read_ptn, write_ptn


def test_round_trip_with_dedup_and_every_dtype(tmp_path):
    path = tmp_path / "sub" / "m.ptn"
    shared = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    constants = {"w": shared, "b_copy": shared.clone(), "state": shared.clone(), "x": torch.tensor([True, False]),
                 "h": torch.ones(3, dtype=torch.bfloat16), "i": torch.arange(5, dtype=torch.int64)}
    write_ptn(str(path), b"graph", constants, mutable_keys=frozenset({"state"}))
    with zipfile.ZipFile(path) as pkg:
        assert set(pkg.namelist()) == {PTG_ENTRY, SAFETENSORS_ENTRY, ALIASES_ENTRY}
        assert json.loads(pkg.read(ALIASES_ENTRY)) == {"w": "b_copy"}  # first key in sorted order owns the bytes
        blob = pkg.read(SAFETENSORS_ENTRY)
    ptg, out = read_ptn(str(path))
    assert ptg == b"graph" and set(out) == set(constants)
    for key, t in constants.items():
        assert out[key].dtype == t.dtype and torch.equal(out[key], t), key
    safetensors = pytest.importorskip("safetensors.torch")
    assert set(safetensors.load(blob)) == {"b_copy", "state", "x", "h", "i"}


def test_refusals_leave_the_existing_package(tmp_path):
    path = tmp_path / "m.ptn"
    write_ptn(str(path), b"g", {})
    before = path.read_bytes()
    base = torch.arange(8.0)
    with pytest.raises(KeyError, match="complex128"):
        write_ptn(str(path), b"g", {"a": torch.ones(2, dtype=torch.complex128)})
    with pytest.raises(ValueError, match="share source storage"):
        write_ptn(str(path), b"g", {"a": base[:4], "b": base[2:6]}, mutable_keys=frozenset({"a", "b"}))
    with pytest.raises(ValueError, match="no tensor data"):
        write_ptn(str(path), b"g", {"a": base}, mutable_keys=frozenset({"c"}))
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["m.ptn"]
    with zipfile.ZipFile(path, "a") as pkg:
        pkg.writestr(ALIASES_ENTRY, json.dumps({"b": "nope"}))
    with pytest.raises(ValueError, match="has no safetensors entry"):
        read_ptn(str(path))
