"""Writes model.pte for the docs-style app: the Add program of ExecuTorch's C++ quick start."""

import torch

from executorch.exir import to_edge_transform_and_lower


class Add(torch.nn.Module):
    def forward(self, x, y):
        return x + y


if __name__ == "__main__":
    example = (torch.ones(2, 2), torch.ones(2, 2))
    program = to_edge_transform_and_lower(torch.export.export(Add(), example)).to_executorch()
    program.write_to_file("model.pte")
