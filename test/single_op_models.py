"""Small single-op models with example inputs: the exporter's and runtimes' op-by-op suite.

Each `OpCase` builds a module that does one thing (or one thing plus the glue it needs) and
seeded example inputs. Dynamic cases carry `dynamic_shapes` for `torch.export.export` and
`resized_inputs`, inputs of another size within the declared bounds. `reference_failure`
records why the published 1.5.1 runtime cannot run a case, when it cannot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

import torch
import torch.nn.functional as F
from torch import nn
from torch.export import Dim

Inputs = tuple[Any, ...]


@dataclass(frozen=True)
class OpCase:
    """One entry of the suite."""

    name: str
    factory: Callable[[], tuple[nn.Module, Inputs]]
    dynamic_shapes: Optional[Callable[[], Any]] = None
    resized_inputs: Optional[Callable[[], Inputs]] = None
    reference_failure: Optional[str] = None


class Fn(nn.Module):
    """Wraps a plain function of the inputs as a module (its `forward`)."""

    def __init__(self, fn: Callable[..., Any]):
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any) -> Any:
        return self.fn(*args)


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape)


def _positive(*shape: int) -> torch.Tensor:
    return torch.rand(*shape) + 0.1


def _ints(high: int, *shape: int) -> torch.Tensor:
    return torch.randint(0, high, shape, dtype=torch.long)


def _seeded(module_fn: Callable[[], nn.Module],
            inputs_fn: Callable[[], Inputs]) -> Callable[[], tuple[nn.Module, Inputs]]:
    # Seed before building the module and its inputs so every call returns equal tensors.
    def factory() -> tuple[nn.Module, Inputs]:
        torch.manual_seed(0)
        module = module_fn().eval()
        return module, inputs_fn()

    return factory


def _fn(name: str, fn: Callable[..., Any], inputs_fn: Callable[[], Inputs], **kw: Any) -> OpCase:
    return OpCase(name, _seeded(lambda: Fn(fn), inputs_fn), **kw)


def _mod(name: str, module_fn: Callable[[], nn.Module], inputs_fn: Callable[[], Inputs], **kw: Any) -> OpCase:
    return OpCase(name, _seeded(module_fn, inputs_fn), **kw)


def _x(*shape: int) -> Callable[[], Inputs]:
    return lambda: (_randn(*shape),)


def _xy(a: tuple[int, ...], b: tuple[int, ...]) -> Callable[[], Inputs]:
    return lambda: (_randn(*a), _randn(*b))


_UNARY: list[OpCase] = [
    _fn("relu", torch.relu, _x(2, 3, 4)),
    _fn("sigmoid", torch.sigmoid, _x(2, 3, 4)),
    _fn("tanh", torch.tanh, _x(2, 3, 4)),
    _fn("exp", torch.exp, _x(2, 3, 4)),
    _fn("log", torch.log, lambda: (_positive(2, 3, 4),)),
    _fn("sqrt", torch.sqrt, lambda: (_positive(2, 3, 4),)),
    _fn("rsqrt", torch.rsqrt, lambda: (_positive(2, 3, 4),)),
    _fn("reciprocal", torch.reciprocal, lambda: (_positive(2, 3, 4),)),
    _fn("abs", torch.abs, _x(2, 3, 4)),
    _fn("neg", torch.neg, _x(2, 3, 4)),
    _fn("sin", torch.sin, _x(2, 3, 4)),
    _fn("cos", torch.cos, _x(2, 3, 4)),
    _fn("erf", torch.erf, _x(2, 3, 4)),
    _fn("floor", torch.floor, lambda: (_randn(2, 3, 4) * 4,)),
    _fn("round", torch.round, lambda: (_randn(2, 3, 4) * 4,)),
    _fn("gelu", F.gelu, _x(2, 3, 4)),
    _fn("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), _x(2, 3, 4)),
    _fn("silu", F.silu, _x(2, 3, 4)),
    _fn("hardswish", F.hardswish, lambda: (_randn(2, 3, 4) * 4,)),
    _fn("hardsigmoid", F.hardsigmoid, lambda: (_randn(2, 3, 4) * 4,)),
    _fn("leaky_relu", lambda x: F.leaky_relu(x, 0.1), _x(2, 3, 4)),
    _fn("elu", F.elu, _x(2, 3, 4)),
    _fn("softplus", F.softplus, _x(2, 3, 4)),
    _fn("clamp", lambda x: torch.clamp(x, -0.5, 0.5), _x(2, 3, 4)),
    _fn("clamp_min", lambda x: torch.clamp(x, min=0.25), _x(2, 3, 4)),
    _fn("hardtanh", F.hardtanh, lambda: (_randn(2, 3, 4) * 2,)),
    _fn("relu6", F.relu6, lambda: (_randn(2, 3, 4) * 6,)),
]

_BINARY: list[OpCase] = [
    _fn("add", torch.add, _xy((2, 3, 4), (2, 3, 4))),
    _fn("add_alpha", lambda x, y: torch.add(x, y, alpha=2.5), _xy((2, 3, 4), (2, 3, 4))),
    _fn("add_scalar", lambda x: x + 1.5, _x(2, 3, 4)),
    _fn("add_broadcast", torch.add, _xy((2, 3, 4), (3, 1))),
    _fn("sub", torch.sub, _xy((2, 3, 4), (2, 3, 4))),
    _fn("rsub_scalar", lambda x: 1.0 - x, _x(2, 3, 4)),
    _fn("mul", torch.mul, _xy((2, 3, 4), (2, 3, 4))),
    _fn("mul_scalar", lambda x: x * 3.0, _x(2, 3, 4)),
    _fn("mul_broadcast", torch.mul, _xy((4, 1, 5), (3, 1))),
    _fn("div", torch.div, lambda: (_randn(2, 3, 4), _positive(2, 3, 4))),
    _fn("div_scalar", lambda x: x / 4.0, _x(2, 3, 4)),
    _fn("div_floor", lambda x, y: torch.div(x, y, rounding_mode="floor"),
        lambda: (_randn(2, 3, 4) * 5, _positive(2, 3, 4))),
    _fn("pow_scalar", lambda x: x**3, _x(2, 3, 4)),
    _fn("pow_tensor", torch.pow, lambda: (_positive(2, 3, 4), _randn(2, 3, 4))),
    _fn("maximum", torch.maximum, _xy((2, 3, 4), (2, 3, 4))),
    _fn("minimum", torch.minimum, _xy((2, 3, 4), (4,))),
    _fn("where", lambda x, y: torch.where(x > y, x, y), _xy((2, 3, 4), (2, 3, 4))),
    _fn("where_scalar", lambda x: torch.where(x > 0, x, 0.0), _x(2, 3, 4)),
    _fn("eq", torch.eq, lambda: (_ints(3, 2, 3, 4), _ints(3, 2, 3, 4))),
    _fn("ne_scalar", lambda x: x != 1, lambda: (_ints(3, 2, 3, 4),)),
    _fn("gt", torch.gt, _xy((2, 3, 4), (2, 3, 4))),
    _fn("lt_scalar", lambda x: x < 0.25, _x(2, 3, 4)),
    _fn("ge_broadcast", torch.ge, _xy((2, 3, 4), (1, 4))),
    _fn("masked_fill", lambda x: x.masked_fill(x < 0, -1.0), _x(2, 3, 4)),
]

_REDUCTIONS: list[OpCase] = [
    _fn("sum_dim", lambda x: x.sum(dim=1), _x(2, 3, 4)),
    _fn("sum_all", torch.sum, _x(2, 3, 4)),
    _fn("mean_keepdim", lambda x: x.mean(dim=(-1, -2), keepdim=True), _x(2, 3, 4)),
    _fn("amax", lambda x: torch.amax(x, dim=-1), _x(2, 3, 4)),
    _fn("amin", lambda x: torch.amin(x, dim=0), _x(2, 3, 4)),
    _fn("argmax", lambda x: torch.argmax(x, dim=-1), _x(2, 3, 4)),
    _fn("argmin", lambda x: torch.argmin(x, dim=1, keepdim=True), _x(2, 3, 4)),
    _fn("max_dim", lambda x: tuple(torch.max(x, dim=1)), _x(2, 3, 4)),
    _fn("var", lambda x: torch.var(x, dim=-1), _x(2, 3, 4)),
    _fn("cumsum", lambda x: torch.cumsum(x, dim=1), _x(2, 3, 4)),
    _fn("topk", lambda x: tuple(torch.topk(x, 2, dim=-1)), _x(2, 3, 5)),
    _fn("softmax", lambda x: torch.softmax(x, dim=-1), _x(2, 3, 4)),
    _fn("log_softmax", lambda x: torch.log_softmax(x, dim=1), _x(2, 3, 4)),
]

_NN: list[OpCase] = [
    _mod("layer_norm", lambda: nn.LayerNorm(8), _x(2, 4, 8)),
    _mod("batch_norm", lambda: _with_running_stats(nn.BatchNorm2d(3)), _x(2, 3, 5, 5)),
    _mod("group_norm", lambda: nn.GroupNorm(2, 4), _x(2, 4, 3, 3)),
    _mod("linear", lambda: nn.Linear(8, 5), _x(3, 8)),
    _mod("linear_3d_no_bias", lambda: nn.Linear(8, 5, bias=False), _x(2, 3, 8)),
    _fn("matmul", torch.matmul, _xy((2, 3, 4), (4, 5))),
    _fn("bmm", torch.bmm, _xy((2, 3, 4), (2, 4, 5))),
    _fn("mm", torch.mm, _xy((3, 4), (4, 5))),
    _fn("matmul_4d_div_scalar", lambda q, k: torch.matmul(q, k.transpose(-2, -1)) / 2.0,
        _xy((2, 2, 3, 4), (2, 2, 5, 4))),
    _mod("conv1d", lambda: nn.Conv1d(3, 4, 3), _x(1, 3, 10)),
    _mod("conv2d", lambda: nn.Conv2d(3, 4, 3), _x(1, 3, 8, 8)),
    _mod("conv2d_stride_pad_dilation", lambda: nn.Conv2d(4, 6, 3, stride=2, padding=2, dilation=2, groups=2),
         _x(2, 4, 9, 9)),
    _mod("conv2d_depthwise_no_bias", lambda: nn.Conv2d(4, 4, 3, padding=1, groups=4, bias=False), _x(1, 4, 6, 6)),
    _mod("conv_transpose2d", lambda: nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1), _x(1, 3, 5, 5)),
    _fn("max_pool2d", lambda x: F.max_pool2d(x, 3, stride=2, padding=1), _x(1, 2, 8, 8)),
    _fn("avg_pool2d", lambda x: F.avg_pool2d(x, 2), _x(1, 2, 8, 8)),
    _fn("adaptive_avg_pool2d", lambda x: F.adaptive_avg_pool2d(x, 1), _x(1, 2, 7, 7)),
    _mod("embedding", lambda: nn.Embedding(10, 4), lambda: (_ints(10, 2, 3),)),
    _fn("upsample_nearest2d", lambda x: F.interpolate(x, scale_factor=2, mode="nearest"), _x(1, 2, 3, 4)),
    _fn("upsample_bilinear2d", lambda x: F.interpolate(x, size=(6, 7), mode="bilinear", align_corners=False),
        _x(1, 2, 3, 4)),
    _fn("pad_constant", lambda x: F.pad(x, (1, 2, 0, 1), value=0.5), _x(1, 2, 3, 4)),
]

_VIEWS: list[OpCase] = [
    _fn("view", lambda x: x.view(6, 4), _x(2, 3, 4)),
    _fn("reshape", lambda x: x.transpose(0, 1).reshape(-1), _x(2, 3, 4)),
    _fn("flatten", lambda x: torch.flatten(x, 1), _x(2, 3, 4)),
    _fn("permute", lambda x: x.permute(2, 0, 1), _x(2, 3, 4)),
    _fn("transpose", lambda x: x.transpose(1, 2), _x(2, 3, 4)),
    _fn("unsqueeze", lambda x: x.unsqueeze(1), _x(2, 3, 4)),
    _fn("squeeze", lambda x: x.squeeze(1), _x(2, 1, 4)),
    _fn("expand", lambda x: x.expand(2, 3, 4), _x(3, 1)),
    _fn("repeat", lambda x: x.repeat(2, 1, 3), _x(3, 2)),
    _fn("slice", lambda x: x[:, 1:3], _x(2, 4, 4)),
    _fn("slice_step", lambda x: x[..., ::2], _x(2, 3, 6)),
    _fn("select", lambda x: x[:, 1], _x(2, 3, 4)),
    _fn("narrow", lambda x: x.narrow(2, 1, 2), _x(2, 3, 4)),
    _fn("split", lambda x: torch.split(x, [1, 3], dim=-1), _x(2, 3, 4)),
    _fn("chunk", lambda x: torch.chunk(x, 3, dim=1), _x(2, 6, 4)),
    _fn("cat", lambda x, y: torch.cat([x, y], dim=1), _xy((2, 3, 4), (2, 1, 4))),
    _fn("stack", lambda x, y: torch.stack([x, y], dim=0), _xy((2, 3), (2, 3))),
    _fn("index_select", lambda x, i: torch.index_select(x, 1, i), lambda: (_randn(2, 5, 3), torch.tensor([4, 0, 2]))),
    _fn("index_tensor", lambda x, i: x[i], lambda: (_randn(5, 3), torch.tensor([1, 1, 4]))),
    _fn("gather", lambda x, i: torch.gather(x, 1, i), lambda: (_randn(3, 4), _ints(4, 3, 2))),
]

_DTYPES_AND_CONSTANTS: list[OpCase] = [
    _fn("to_float", lambda x: x.to(torch.float32) * 0.5, lambda: (_ints(100, 2, 3),)),
    _fn("to_int64", lambda x: x.to(torch.int64), lambda: (_randn(2, 3) * 10,)),
    _fn("to_bool", lambda x: x.to(torch.bool), lambda: (_ints(2, 2, 3),)),
    _fn("ones_like", lambda x: x + torch.ones_like(x), _x(2, 3)),
    _fn("zeros", lambda x: torch.cat([x, torch.zeros(1, 3)]), _x(2, 3)),
    _fn("full", lambda x: x * torch.full((2, 3), 2.5), _x(2, 3)),
    _fn("arange", lambda x: x + torch.arange(3, dtype=torch.float32), _x(2, 3)),
    _fn("int64_math", lambda x, y: x * y + x - 3, lambda: (_ints(50, 2, 3), _ints(50, 2, 3))),
    _fn("int64_floor_divide", lambda x: torch.floor_divide(x, 3), lambda: (_ints(50, 2, 3) - 25,)),
    _fn("int64_remainder", lambda x: torch.remainder(x, 7), lambda: (_ints(50, 2, 3) - 25,),
        reference_failure="published remainder.Scalar_out on int64 keeps the dividend's sign "
        "(-25 rem 7 gives -4, eager gives 3)"),
    _fn("logical_and_or", lambda a, b: torch.logical_or(torch.logical_and(a, b), torch.logical_not(b)),
        lambda: (_ints(2, 2, 3).bool(), _ints(2, 2, 3).bool())),
    _fn("bitwise_and_bool", lambda a, b: a & b, lambda: (_ints(2, 2, 3).bool(), _ints(2, 2, 3).bool())),
    _fn("any_all", lambda x: (torch.any(x > 1.0, dim=1), torch.all(x > -3.0)), _x(2, 3)),
    _fn("clone", lambda x: x.clone() + 0.0, _x(2, 3)),
]


def _batch() -> Dim:
    return Dim("batch", min=1, max=16)


def _varargs(*specs: Any) -> tuple[tuple[Any, ...]]:
    # `Fn.forward` takes *args, so torch.export sees one parameter holding every input.
    return (specs,)


_DYNAMIC: list[OpCase] = [
    _fn("dyn_add_broadcast", torch.add, _xy((3, 4), (1, 4)),
        dynamic_shapes=lambda: _varargs({0: _batch()}, None), resized_inputs=_xy((7, 4), (1, 4))),
    _mod("dyn_linear", lambda: nn.Linear(8, 5), _x(3, 8),
         dynamic_shapes=lambda: ({0: _batch()},), resized_inputs=_x(11, 8)),
    _fn("dyn_softmax", lambda x: torch.softmax(x, dim=-1), _x(2, 6),
        dynamic_shapes=lambda: _varargs({1: Dim("n", min=2, max=32)}), resized_inputs=_x(2, 17)),
    _fn("dyn_cat", lambda x, y: torch.cat([x, y], dim=0), _xy((2, 4), (3, 4)),
        dynamic_shapes=lambda: _varargs({0: Dim("a", max=8)}, {0: Dim("b", max=8)}),
        resized_inputs=_xy((5, 4), (1, 4))),
    _mod("dyn_conv2d", lambda: nn.Conv2d(3, 4, 3, padding=1), _x(2, 3, 8, 8),
         dynamic_shapes=lambda: ({0: _batch()},), resized_inputs=_x(4, 3, 8, 8)),
    _fn("dyn_mean_reshape", lambda x: x.reshape(x.shape[0], -1).mean(dim=1), _x(3, 2, 4),
        dynamic_shapes=lambda: _varargs({0: _batch()}), resized_inputs=_x(9, 2, 4)),
]


def _with_running_stats(bn: nn.BatchNorm2d) -> nn.BatchNorm2d:
    # Non-trivial running statistics so eval-mode normalisation is actually exercised.
    with torch.no_grad():
        bn.running_mean.copy_(torch.randn(bn.num_features))
        bn.running_var.copy_(torch.rand(bn.num_features) + 0.5)
        bn.weight.copy_(torch.randn(bn.num_features))
        bn.bias.copy_(torch.randn(bn.num_features))
    return bn


CASES: list[OpCase] = _UNARY + _BINARY + _REDUCTIONS + _NN + _VIEWS + _DTYPES_AND_CONSTANTS + _DYNAMIC
CASES_BY_NAME: dict[str, OpCase] = {case.name: case for case in CASES}
assert len(CASES_BY_NAME) == len(CASES), "single-op case names must be unique"
