"""A small Transformer encoder (2 layers, d_model 64, 4 heads, feed-forward 128).

Attention is written with plain matmuls rather than nn.MultiheadAttention so that the
exported graph holds only core ops, with no fused-kernel fast path. Self-contained so that
tools can load it by path: `transformer_encoder.py:make_transformer_encoder`.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class SelfAttention(nn.Module):
    """Multi-head scaled dot-product self-attention over (batch, seq, d_model)."""

    def __init__(self, d_model: int, heads: int):
        super().__init__()
        self.heads = heads
        self.head_dim = d_model // heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        qkv = self.qkv(x).view(b, s, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.out(ctx.transpose(1, 2).reshape(b, s, d))


class EncoderLayer(nn.Module):
    """Post-norm encoder layer: attention and a ReLU feed-forward, each with a residual."""

    def __init__(self, d_model: int, heads: int, ff: int):
        super().__init__()
        self.attn = SelfAttention(d_model, heads)
        self.norm1 = nn.LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, ff), nn.ReLU(), nn.Linear(ff, d_model))
        self.norm2 = nn.LayerNorm(d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm1(x + self.attn(x))
        return self.norm2(x + self.ff(x))


class TransformerEncoder(nn.Module):
    """A stack of encoder layers over already-embedded inputs (batch_first)."""

    def __init__(self, layers: int = 2, d_model: int = 64, heads: int = 4, ff: int = 128):
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(d_model, heads, ff) for _ in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def make_transformer_encoder() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The encoder in eval mode with seed-0 weights and a (2, 16, 64) batch."""
    torch.manual_seed(0)
    model = TransformerEncoder().eval()
    return model, (torch.randn(2, 16, 64),)


def make_transformer_encoder_dynamic_shapes() -> tuple[dict[int, torch.export.Dim], ...]:
    """The sequence length may vary from 1 to 128."""
    return ({1: torch.export.Dim("seq", min=1, max=128)},)
