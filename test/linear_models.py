"""Small models whose weights feed matrix products in each layout, for the native linear tests."""

from __future__ import annotations

import torch


class LinearStack(torch.nn.Module):
    """Two linear layers (one with bias, one without): two constant weights read transposed."""

    def __init__(self, k: int = 67, hidden: int = 129, n: int = 33) -> None:
        super().__init__()
        self.first = torch.nn.Linear(k, hidden)
        self.second = torch.nn.Linear(hidden, n, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(torch.relu(self.first(x)))


class RowMajorWeight(torch.nn.Module):
    """x @ W with W a constant [k, n]: the product reads a row-major weight."""

    def __init__(self, k: int = 67, n: int = 301) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(k, n) / k**0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.weight


class SharedTranspose(torch.nn.Module):
    """The transposed weight is read by the product and by a sum: the copy must stay."""

    def __init__(self, k: int = 67, n: int = 33) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(n, k) / k**0.5)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        wt = torch.permute(self.weight, [1, 0])
        return x @ wt, wt.sum(0)


class InputWeight(torch.nn.Module):
    """A linear whose weight is a method input, not a constant: its transpose must be copied."""

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(x, weight)


def make_linear_stack():
    """Factory for the published exporter: the stack on a batch of 3 rows."""
    torch.manual_seed(0)
    return LinearStack().eval(), (torch.randn(3, 67),)


def make_linear_3d():
    """Factory for the published exporter: a linear over [batch, seq, features]."""
    torch.manual_seed(1)
    return torch.nn.Linear(40, 24).eval(), (torch.randn(2, 3, 40),)
