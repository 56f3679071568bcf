"""Programs in Torch-TensorRT's shape: engine calls on a module's engine buffers, CPU ops around them."""

from __future__ import annotations

import torch

from device_backend import engine as E

C = 8


class OneEngine(torch.nn.Module):
    """One engine on two inputs; one output is a method output, the other feeds a CPU op."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("engine", E.make_engine(C, seed=1))

    def forward(self, x, y):
        r, act = torch.ops.test_device.execute_engine([x, y], self.engine, "cuda:0")
        return r, act * y


class TwoEngines(torch.nn.Module):
    """Two engines on one device back to back (the device->host->device bounce between them is
    dropped), and a CPU op reading the first engine's result too."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("engine0", E.make_engine(C, seed=2))
        self.register_buffer("engine1", E.make_engine(C, seed=3))

    def forward(self, x):
        r0, _ = torch.ops.test_device.execute_engine([x], self.engine0, "cuda:0")
        r1, act1 = torch.ops.test_device.execute_engine([r0], self.engine1, "cuda:0")
        return act1, r0 - x


def one_engine():
    g = torch.Generator().manual_seed(0)
    return OneEngine().eval(), (torch.randn(2, 3, C, generator=g), torch.randn(2, 3, C, generator=g))


def two_engines():
    g = torch.Generator().manual_seed(0)
    return TwoEngines().eval(), (torch.randn(4, C, generator=g),)


FACTORIES = {"one_engine": one_engine, "two_engines": two_engines}
