"""Small programs for constant propagation and quant fusion: each factory returns (module, example inputs)."""

from __future__ import annotations

import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (registers the quantized_decomposed q/dq ops)

Q = torch.ops.quantized_decomposed


class ConstantBranch(torch.nn.Module):
    """A weight, a read-only buffer and a lifted constant combined before they meet the input."""

    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.weight = torch.nn.Parameter(torch.randn(8, 8, generator=g))
        self.register_buffer("offset", torch.randn(8, generator=g))
        self.scale = torch.tensor([0.5, 2.0, -1.0, 1.5, 0.25, 3.0, -0.5, 1.0])  # a lifted tensor constant

    def forward(self, x):
        w = torch.relu(self.weight.t() * 2.0 + self.offset)  # all constant: folds to one tensor
        return x @ w * self.scale + x


class Skips(torch.nn.Module):
    """What constant propagation leaves alone: a written buffer, `full`, user inputs."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("count", torch.zeros(4))
        self.register_buffer("base", torch.arange(4.0))

    def forward(self, x):
        self.count.add_(1.0)
        filled = torch.full((4,), 3.0)
        return x * 2.0 + self.count + filled + self.base * 3.0


class RandomDraw(torch.nn.Module):
    """A random draw has no inputs but is no constant: it stays a runtime call."""

    def forward(self, x):
        return x + torch.rand(4) * 2.0


class ConstantOutput(torch.nn.Module):
    """A folded value returned as an output, and one only constants read (its placeholder goes)."""

    def __init__(self) -> None:
        super().__init__()
        self.table = torch.nn.Parameter(torch.linspace(-1.0, 1.0, 6))

    def forward(self, x):
        return x + 1.0, torch.exp(self.table)


def _quant(x, scale, zp, dtype):
    info = torch.iinfo(dtype)
    return Q.quantize_per_tensor.default(x, scale, zp, info.min, info.max, dtype)


def _dequant(q, scale, zp, dtype):
    info = torch.iinfo(dtype)
    return Q.dequantize_per_tensor.default(q, scale, zp, info.min, info.max, dtype)


class QuantizedCat(torch.nn.Module):
    """dq -> cat -> q with one set of parameters (fused), beside a cat whose input parameters differ (kept)."""

    def __init__(self, dtype=torch.int8) -> None:
        super().__init__()
        self.dtype = dtype

    def forward(self, x, y):
        s, zp, d = 0.05, 3, self.dtype
        qx, qy = _quant(x, s, zp, d), _quant(y, s, zp, d)
        same = _quant(torch.cat([_dequant(qx, s, zp, d), _dequant(qy, s, zp, d)], dim=1), s, zp, d)
        qz = _quant(y, 0.1, zp, d)
        mixed = _quant(torch.cat([_dequant(qx, s, zp, d), _dequant(qz, 0.1, zp, d)], dim=1), s, zp, d)
        return _dequant(same, s, zp, d) * 2.0, _dequant(mixed, s, zp, d)


class QuantizedSlice(torch.nn.Module):
    """dq -> slice -> q over uint8 with one set of parameters (fused), and over int8 (kept, as published)."""

    def forward(self, x):
        out = []
        for d in (torch.uint8, torch.int8):
            s, zp = 0.04, 128 if d is torch.uint8 else 0
            q = _quant(x, s, zp, d)
            sliced = _quant(_dequant(q, s, zp, d)[:, 1:5], s, zp, d)
            out.append(_dequant(sliced, s, zp, d) + 1.0)
        return tuple(out)


def constant_branch():
    return ConstantBranch().eval(), (torch.randn(3, 8),)


def skips():
    return Skips().eval(), (torch.randn(4),)


def random_draw():
    return RandomDraw().eval(), (torch.randn(4),)


def constant_output():
    return ConstantOutput().eval(), (torch.randn(6),)


def quantized_cat():
    g = torch.Generator().manual_seed(2)
    return QuantizedCat().eval(), (torch.randn(2, 3, generator=g), torch.randn(2, 4, generator=g))


def quantized_slice():
    return QuantizedSlice().eval(), (torch.randn(3, 8, generator=torch.Generator().manual_seed(3)),)


FACTORIES = {"constant_branch": constant_branch, "skips": skips, "random_draw": random_draw,
             "constant_output": constant_output,
             "quantized_cat": quantized_cat, "quantized_slice": quantized_slice}


def describe_program(ep) -> dict:
    """What constant propagation changes, in names both exporters share: the operators called (sorted),
    the inputs (kind, target) and the state dict's keys."""
    def name(target) -> str:
        op = getattr(target, "_op", None)  # the published exporter wraps torch's operator in an edge op
        return str(op if isinstance(op, torch._ops.OpOverload) else target)

    ops = sorted(name(n.target) for n in ep.graph.nodes if n.op == "call_function")
    return {"ops": ops, "inputs": [[s.kind.name, s.target] for s in ep.graph_signature.input_specs],
            "state_dict": sorted(ep.state_dict)}
