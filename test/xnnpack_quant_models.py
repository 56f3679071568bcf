"""Small models for the XNNPACK quantizer tests, loadable by path (`FILE.py:FACTORY`); torch only."""

from __future__ import annotations

import torch
from torch import nn


class LinearStack(nn.Module):
    """linear -> relu -> linear -> linear (no bias), on a 3-D input (tokens)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 32)
        self.fc3 = nn.Linear(32, 8, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(self.fc2(torch.relu(self.fc1(x))))


class PatternMix(nn.Module):
    """One of each pattern the quantizer knows: conv(+relu), depthwise conv, transposed conv, add(+relu),
    mul with a scalar and a tensor, cat, the parameter-sharing ops (hardtanh, max_pool, mean, views), an
    adaptive average pool and linear(+relu)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False)
        self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.conv1d = nn.Conv1d(4, 4, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(16, 10)
        self.head = nn.Linear(10, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = torch.relu(self.conv(x))                    # conv_relu
        b = self.dw(a)                                   # conv (depthwise)
        c = torch.relu(a + b)                            # add_relu
        d = nn.functional.hardtanh(c * 0.5, 0.0, 6.0)    # mul with a scalar, hardtanh shares
        e = nn.functional.max_pool2d(d, 2)               # max_pool shares
        u = self.up(e)                                   # conv_transpose
        v = self.conv1d(u.flatten(2)[:, :, :16])          # flatten/slice share, conv1d
        w = torch.cat([u.mean(dim=(2, 3)), v.mean(dim=2)], dim=1)   # mean shares, cat
        p = self.pool(c).flatten(1)                      # adaptive_avg_pool2d
        z = torch.relu(self.fc(torch.cat([w, p * w], dim=1)))       # mul of tensors, linear_relu
        return self.head(z) + 1.0                        # linear, add of a scalar


def make_linear_stack() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return LinearStack().eval(), (torch.randn(2, 5, 16),)


def make_pattern_mix() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return PatternMix().eval(), (torch.randn(2, 3, 8, 8),)


class ConvStack(nn.Module):
    """The convolutions XNNPACK quantizes dynamically (padded and strided, grouped, pointwise, transposed)
    around a depthwise one it does not, on a batch of two images."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.grouped = nn.Conv2d(8, 8, 3, padding=(1, 2), groups=2, bias=False)
        self.pointwise = nn.Conv2d(8, 8, 1)
        self.up = nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.up(self.pointwise(torch.relu(self.grouped(self.dw(self.conv(x))))))


def make_conv_stack() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return ConvStack().eval(), (torch.randn(2, 3, 10, 9) * torch.tensor([1.0, 3.0]).reshape(2, 1, 1, 1),)
