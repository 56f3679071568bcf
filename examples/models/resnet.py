"""ResNet-18 and ResNet-50, built layer for layer as torchvision builds them (11,689,512 and
25,557,032 parameters).

Self-contained so that tools can load it by path: `resnet.py:make_resnet18`, `resnet.py:make_resnet50`.
"""

from __future__ import annotations

import torch
from torch import nn


def _conv3x3(cin: int, cout: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, 3, stride, 1, bias=False)


class BasicBlock(nn.Module):
    """Two 3x3 conv-BN pairs with a skip connection (projected when the shape changes)."""

    expansion = 1

    def __init__(self, cin: int, cout: int, stride: int = 1, downsample: nn.Module | None = None):
        super().__init__()
        self.conv1 = _conv3x3(cin, cout, stride)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = _conv3x3(cout, cout)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (carrying the stride), 1x1 expand, each with BN, and a skip connection."""

    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int = 1, downsample: nn.Module | None = None):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = _conv3x3(planes, planes, stride)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * self.expansion, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    """The ResNet stem, four stages of residual blocks, global pooling and a classifier."""

    def __init__(self, layers: tuple[int, int, int, int] = (2, 2, 2, 2), num_classes: int = 1000,
                 block: type = BasicBlock):
        super().__init__()
        self.block = block
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._make_layer(64, layers[0])
        self.layer2 = self._make_layer(128, layers[1], stride=2)
        self.layer3 = self._make_layer(256, layers[2], stride=2)
        self.layer4 = self._make_layer(512, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def _make_layer(self, planes: int, blocks: int, stride: int = 1) -> nn.Sequential:
        block, width = self.block, planes * self.block.expansion
        downsample = None
        if stride != 1 or self.inplanes != width:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, width, 1, stride, bias=False), nn.BatchNorm2d(width)
            )
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = width
        layers += [block(width, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def make_resnet18() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """ResNet-18 in eval mode with seed-0 weights and one 224x224 RGB image."""
    torch.manual_seed(0)
    model = ResNet().eval()
    return model, (torch.randn(1, 3, 224, 224),)


def make_resnet50() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """ResNet-50 in eval mode with seed-0 weights and one 224x224 RGB image."""
    torch.manual_seed(0)
    model = ResNet((3, 4, 6, 3), block=Bottleneck).eval()
    return model, (torch.randn(1, 3, 224, 224),)
