"""Small models for the .ptd/.bpte tests, importable by the published exporter's python too."""

import torch


class TwoLinear(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = torch.nn.Linear(6, 5)
        self.second = torch.nn.Linear(5, 3)

    def forward(self, x):
        return self.second(torch.relu(self.first(x)))


class TwoOut(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 5)

    def forward(self, x, y):
        return self.lin(x) + y, x * 2
