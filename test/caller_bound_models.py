"""Models for the caller-bound output tests, importable by the published exporter's Python too."""

import torch


class _Several(torch.nn.Module):
    """Outputs of every kind: an intermediate also read later, a view, a constant, a reduction, one named twice."""

    def __init__(self):
        super().__init__()
        self.register_buffer("c", torch.arange(6.0).reshape(2, 3))

    def forward(self, x, y):
        a = x + y
        b = a * 2
        return a, b.view(3, 2), self.c, b.sum(0), a


class _Stateful(torch.nn.Module):
    """A buffer updated in place and returned, an input returned as is, a multi-result op's results."""

    def __init__(self):
        super().__init__()
        self.register_buffer("s", torch.zeros(2, 3))

    def forward(self, x):
        self.s.add_(x)
        top, where = torch.max(x, 1)
        return self.s * 1.0, x, top, where


def make_several():
    return _Several(), (torch.rand(2, 3), torch.rand(2, 3))


def make_stateful():
    return _Stateful(), (torch.rand(2, 3),)
