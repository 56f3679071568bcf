"""join_bytes: the threaded fill of a large `.pte`/`.ptd` gives exactly `b"".join`'s bytes."""

from __future__ import annotations

import ctypes
import io

import pytest
import torch

from executorch.exir import to_edge_transform_and_lower
from executorch.exir._serialize import _join
from executorch.exir._tensor_data import tensor_bytes


@pytest.fixture
def small_thresholds(monkeypatch):
    """Thresholds low enough that kilobyte pieces take the threaded path, with the calls to
    ctypes.memmove recorded (so a test knows the threads did the copying)."""
    monkeypatch.setattr(_join, "PARALLEL_BYTES", 4096)
    monkeypatch.setattr(_join, "SLICE_BYTES", 1000)
    monkeypatch.setattr(_join, "_threads", lambda: 3)
    calls = []
    real = ctypes.memmove

    def counting(dst, src, n):
        calls.append(n)
        return real(dst, src, n)

    monkeypatch.setattr(ctypes, "memmove", counting)
    return calls


def _pieces():
    torch.manual_seed(0)
    tensors = [torch.randn(1237), torch.randn(3, 700).to(torch.bfloat16), torch.randn(999).t()]
    ro = bytes(range(256)) * 20
    return tensors, [
        b"header",
        tensor_bytes(tensors[0]),          # writable, 4948 bytes: five slices, the last partial
        b"",
        memoryview(ro)[3:4003],            # read-only view with an offset: copied in place
        tensor_bytes(tensors[1]),          # writable, 4200 bytes
        bytearray(b"\x00" * 13),           # padding
        memoryview(b""),
        tensor_bytes(tensors[2]),          # writable, 3996 bytes
        b"tail",
    ]


def test_threaded_fill_matches_join(small_thresholds):
    tensors, pieces = _pieces()
    got = _join.join_bytes(pieces)
    assert type(got) is bytes
    assert got == b"".join(pieces)
    # Every writable piece went through memmove in slices of at most SLICE_BYTES.
    assert sum(small_thresholds) == 4948 + 4200 + 3996
    assert max(small_thresholds) == 1000 and len(small_thresholds) == 5 + 5 + 4
    assert hash(got) == hash(b"".join(pieces))


def test_small_or_single_thread_results_use_plain_join(monkeypatch):
    tensors, pieces = _pieces()
    calls = []
    real = ctypes.memmove
    monkeypatch.setattr(ctypes, "memmove", lambda *a: calls.append(a) or real(*a))
    assert _join.join_bytes(pieces) == b"".join(pieces)  # below PARALLEL_BYTES
    monkeypatch.setattr(_join, "PARALLEL_BYTES", 16)
    monkeypatch.setattr(_join, "_threads", lambda: 1)
    assert _join.join_bytes(pieces) == b"".join(pieces)
    assert calls == []


class _Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(64, 96)
        self.b = torch.nn.Linear(96, 32)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def test_program_buffer_equals_the_streamed_file(small_thresholds):
    prog = to_edge_transform_and_lower(torch.export.export(_Mlp(), (torch.randn(2, 64),))).to_executorch()
    streamed = io.BytesIO()
    prog.write_to_file(streamed)
    assert prog.buffer == streamed.getvalue()
    assert small_thresholds, "the weights were not copied by the threads"
