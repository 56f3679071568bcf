"""Larger benchmark models (a 512 MiB MLP, ViT-B/16), loadable by path by any python with torch."""

from __future__ import annotations

import torch
from torch import nn


def make_mlp_512mb():
    """Eight 4096x4096 linear layers: 512 MiB of float32 weights."""
    torch.manual_seed(0)
    layers = []
    for _ in range(8):
        layers += [nn.Linear(4096, 4096), nn.ReLU()]
    return nn.Sequential(*layers).eval(), (torch.randn(1, 4096),)


def make_vit_b16():
    """ViT-B/16 (width 768, 12 heads, depth 12, 224x224 image, 1000 classes; 86 M parameters), from
    the zoo's ViT code."""
    from _zoo import zoo_file

    vit = zoo_file("vit_tiny")
    torch.manual_seed(0)
    model = vit.VisionTransformer(image=224, patch=16, dim=768, depth=12, heads=12, classes=1000)
    return model.eval(), (torch.randn(1, 3, 224, 224),)


def make_llama_100m():
    """A ~100 M-parameter Llama-style decoder (vocab 32000, width 768, 8 layers, 12 heads, 4 KV heads),
    from the zoo's decoder code."""
    from _zoo import zoo_file

    llama = zoo_file("llama_decoder")
    torch.manual_seed(0)
    model = llama.LlamaDecoder(vocab=32000, dim=768, layers=8, heads=12, kv_heads=4, hidden=2048, max_seq=64)
    return model.eval(), (torch.randint(0, 32000, (1, 32)),)
