"""Small models for the runtime tests, and a script that exports them with the published exporter.

Imports only torch, so the reference environment (named by ET_REFERENCE_PYTHON) can run it:
    $ET_REFERENCE_PYTHON test/runtime_models.py OUT_DIR NAME [NAME ...]
writes OUT_DIR/NAME.pte for each named model.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch
from torch import nn
from torch.export import Dim

_ZOO = Path(__file__).resolve().parents[1] / "examples" / "models"


class Linear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 8)

    def forward(self, x):
        return self.fc(x)


class ScalarArith(nn.Module):
    def forward(self, x, y):
        return (x * 2.5 + y - 1) / 3


class TwoOutputs(nn.Module):
    def forward(self, x, y):
        return torch.relu(x + y), torch.sigmoid(x * y)


class ViewPermute(nn.Module):
    def forward(self, x):
        a = x.view(6, 4).permute(1, 0)
        b = a.reshape(2, 12) + 1
        return b.transpose(0, 1).contiguous().flatten()


class Softmax(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


class DynamicMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return torch.relu(self.fc(x)).sum(dim=-1, keepdim=True) + x[:, :1]


class Cond(nn.Module):
    def forward(self, x, y):
        return torch.cond(x.sum() > 0, lambda a, b: (a + b).sin(), lambda a, b: (a - b) * 2, (x, y))


class Map(nn.Module):
    def forward(self, xs, y):
        from torch._higher_order_ops.map import map as map_over_rows

        return map_over_rows(lambda row, other: row * other + 1, xs, y)


def _mobilenet_v2():
    spec = importlib.util.spec_from_file_location("zoo_mobilenet_v2", _ZOO / "mobilenet_v2.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_mobilenet_v2()


def _seeded(module_cls, *shapes):
    def make():
        torch.manual_seed(0)
        return module_cls().eval(), tuple(torch.randn(*s) for s in shapes)
    return make


# name -> factory() -> (model, example inputs)
FACTORIES = {
    "linear": _seeded(Linear, (4, 16)),
    "scalar_arith": _seeded(ScalarArith, (3, 5), (3, 5)),
    "two_outputs": _seeded(TwoOutputs, (2, 7), (2, 7)),
    "view_permute": _seeded(ViewPermute, (2, 3, 4)),
    "softmax": _seeded(Softmax, (3, 10)),
    "dynamic_mlp": _seeded(DynamicMLP, (5, 8)),
    "cond": _seeded(Cond, (4,), (4,)),
    "map": _seeded(Map, (3, 2), (2,)),
    "mobilenet_v2": _mobilenet_v2,
}

# name -> dynamic_shapes for torch.export.export
DYNAMIC_SHAPES = {
    "dynamic_mlp": lambda: ({0: Dim("batch", min=1, max=10)},),
}


def _export_with_published_exporter(out_dir: Path, names: list[str]) -> None:
    from executorch.exir import to_edge_transform_and_lower

    for name in names:
        model, inputs = FACTORIES[name]()
        shapes = DYNAMIC_SHAPES[name]() if name in DYNAMIC_SHAPES else None
        program = to_edge_transform_and_lower(torch.export.export(model, inputs, dynamic_shapes=shapes))
        (out_dir / f"{name}.pte").write_bytes(program.to_executorch().buffer)


if __name__ == "__main__":
    _export_with_published_exporter(Path(sys.argv[1]), sys.argv[2:])
