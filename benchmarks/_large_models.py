"""ResNet-50 and a 512 MiB MLP for the .ptd/.bpte benchmark, loadable by path by any python with torch."""

from __future__ import annotations

import torch
from torch import nn


class Bottleneck(nn.Module):
    """1x1 -> 3x3 -> 1x1 conv-BN with a skip connection, as torchvision's ResNet-50 builds it."""

    def __init__(self, cin: int, planes: int, stride: int = 1):
        super().__init__()
        cout = planes * 4
        self.body = nn.Sequential(
            nn.Conv2d(cin, planes, 1, bias=False), nn.BatchNorm2d(planes), nn.ReLU(),
            nn.Conv2d(planes, planes, 3, stride, 1, bias=False), nn.BatchNorm2d(planes), nn.ReLU(),
            nn.Conv2d(planes, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.skip = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                     if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x):
        return torch.relu(self.body(x) + self.skip(x))


def make_resnet50():
    """ResNet-50 (25.6 M parameters) with seed-0 weights and one 224x224 image."""
    torch.manual_seed(0)
    layers, cin = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)], 64
    for planes, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            layers.append(Bottleneck(cin, planes, stride if i == 0 else 1))
            cin = planes * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000)]
    return nn.Sequential(*layers).eval(), (torch.randn(1, 3, 224, 224),)


def make_mlp_512mb():
    """Eight 4096x4096 linear layers: 512 MiB of float32 weights."""
    torch.manual_seed(0)
    layers = []
    for _ in range(8):
        layers += [nn.Linear(4096, 4096), nn.ReLU()]
    return nn.Sequential(*layers).eval(), (torch.randn(1, 4096),)
