"""Refactors of the exporter keep its output: fixed small models give the .pte bytes recorded here.

The hashes were recorded from main at 85263a4 (torch 2.13.0). A change meant to alter the bytes
updates the hash in the same commit and says why. Attn changed with the dense-layout pass
(exir/passes/dim_order.py): its permuted intermediates are now written contiguous, as the
published runtime's kernels require. Attn changed again when squeeze/unsqueeze copies and
same-shape expands of contiguous tensors became aliases (exir/emit/_emitter.py)."""

from __future__ import annotations

import hashlib

import pytest
import torch
import torch.nn.functional as F

from executorch.exir import to_edge


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 16)
        self.b = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.b(torch.relu(self.a(x))).softmax(-1)


class Conv(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)

    def forward(self, x):
        return F.adaptive_avg_pool2d(torch.relu(self.bn(self.c(x))), 1).flatten(1)


class Attn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.q = torch.nn.Linear(16, 48)
        self.n = torch.nn.LayerNorm(16)

    def forward(self, x):
        q, k, v = self.q(self.n(x)).view(1, 6, 3, 2, 8).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(1, 6, 16)


GOLDEN = {
    "Mlp": (Mlp, (2, 8), "c859e754bc9010a5fe3d24cf7eac53debcb0222d68862f844be0f1b9315de719"),
    "Conv": (Conv, (1, 3, 8, 8), "6706d7a1dabf21fc6e3d54ae5e96baeb23c061af3244bc22e403a13ec8a85b04"),
    "Attn": (Attn, (1, 6, 16), "1ac88ee9473b814671d6ceec49b4575230d367b31b89f49953190bf64271e016"),
}


def _pte(cls, shape) -> bytes:
    torch.manual_seed(0)
    model = cls().eval()
    return to_edge(torch.export.export(model, (torch.randn(*shape),))).to_executorch().buffer


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_pte_bytes_unchanged(name):
    cls, shape, digest = GOLDEN[name]
    assert hashlib.sha256(_pte(cls, shape)).hexdigest() == digest


def test_a_changed_program_changes_the_digest():
    cls, shape, digest = GOLDEN["Mlp"]
    data = bytearray(_pte(cls, shape))
    data[-1] ^= 1
    assert hashlib.sha256(bytes(data)).hexdigest() != digest
