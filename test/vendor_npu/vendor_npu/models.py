"""Models the vendor tests export: one its NPU takes whole, one with portable ops between."""

import torch


class AllOnNpu(torch.nn.Module):
    """Only add/mul/linear/conv: every op runs in the vendor backend (no kernels needed)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1, stride=2)
        self.fc = torch.nn.Linear(6, 5)
        self.scale = torch.nn.Parameter(torch.linspace(0.5, 2.0, 4).reshape(4, 1, 1))

    def forward(self, x, y, z):
        h = (self.conv(x) + y) * self.scale
        f = self.fc(z)
        return h, f + f * f


class Mixed(torch.nn.Module):
    """Portable ops (relu, flatten) between the vendor's partitions."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.fc = torch.nn.Linear(4 * 6 * 6, 5)
        self.scale = torch.nn.Parameter(torch.linspace(-1.0, 1.0, 5))

    def forward(self, x, y):
        h = torch.relu(self.conv(x) + y)
        return self.fc(h.flatten(1)) * self.scale


def all_on_npu():
    torch.manual_seed(0)
    return AllOnNpu().eval(), (torch.randn(2, 3, 8, 8), torch.randn(2, 4, 4, 4), torch.randn(3, 6))


def mixed():
    torch.manual_seed(0)
    return Mixed().eval(), (torch.randn(2, 3, 6, 6), torch.randn(2, 4, 6, 6))
