"""ViT-Tiny: ViT-Ti/16's width, heads and depth (192, 3, 12) on a small image, self-contained.

A patch-embedding convolution, a class token and learned position embeddings, pre-norm encoder
blocks whose attention calls `F.scaled_dot_product_attention`, and a linear head on the class
token. Loadable by path: `vit_tiny.py:make_vit_tiny`.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class Attention(nn.Module):
    """Multi-head self-attention with one fused qkv projection."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        x = F.scaled_dot_product_attention(q, k, v)
        return self.proj(x.transpose(1, 2).reshape(b, n, d))


class Block(nn.Module):
    """Pre-norm transformer block: attention and a GELU MLP, each with a residual."""

    def __init__(self, dim: int, heads: int, mlp_ratio: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_ratio * dim), nn.GELU(), nn.Linear(mlp_ratio * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class VisionTransformer(nn.Module):
    """Image (batch, 3, H, W) -> class logits."""

    def __init__(self, image: int = 32, patch: int = 4, dim: int = 192, depth: int = 12, heads: int = 3,
                 mlp_ratio: int = 4, classes: int = 10):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, kernel_size=patch, stride=patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, (image // patch) ** 2 + 1, dim))
        self.blocks = nn.Sequential(*(Block(dim, heads, mlp_ratio) for _ in range(depth)))
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])


def make_vit_tiny() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """ViT-Tiny in eval mode with seed-0 weights (class token and position embeddings drawn with
    std 0.02, as ViT initialises them) and one 32x32 image."""
    torch.manual_seed(0)
    model = VisionTransformer()
    with torch.no_grad():
        model.cls_token.normal_(std=0.02)
        model.pos_embed.normal_(std=0.02)
    return model.eval(), (torch.randn(1, 3, 32, 32),)
