"""A 512 MiB MLP for the .ptd/.bpte benchmark, loadable by path by any python with torch."""

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
