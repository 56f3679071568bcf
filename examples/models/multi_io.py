"""A model with two tensor inputs and nested outputs: a tuple holding two tensors and a dict.

Exercises input/output flattening. Self-contained so that tools can load it by path:
`multi_io.py:make_multi_io`.
"""

from __future__ import annotations

import torch
from torch import nn


class MultiIO(nn.Module):
    """Mixes two inputs through a shared linear layer and returns three results."""

    def __init__(self, features: int = 8):
        super().__init__()
        self.proj = nn.Linear(features, features)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        px, py = self.proj(x), self.proj(y)
        return px + py, torch.relu(px - py), {"product": px * py, "mean": (x + y).mean(dim=-1)}


def make_multi_io() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """MultiIO in eval mode with seed-0 weights and two (4, 8) inputs."""
    torch.manual_seed(0)
    model = MultiIO().eval()
    return model, (torch.randn(4, 8), torch.randn(4, 8))
