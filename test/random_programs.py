"""Differential testing: random small programs, lowered here and run on four runtimes that must agree.

Each program is a random graph over what `XnnpackPartitioner` claims (elementwise ops with broadcasts
and scalars, linear/mm/bmm, convolutions, pools, means, softmax, layer and batch norm, cat, slices,
reshapes, permutes, pads), in one of several precisions (fp32, fp16, int8 static, dynamic int8, 8da4w),
with static or bounded-dynamic batch dims, parameters shared between ops and constants of equal content
(which the payload writer deduplicates), outputs that are inputs or repeat. Each is exported through
this package (with the partitioner, or without it for a portable program) and run on eager, the Python
engine, the native engine and the published runtime (its own process: a crash there is a finding); every
runtime must match the reference within `devtools.compare`'s tolerance (quantized programs: the
converted module, within its own quantization error).

By hand (figures for BENCHMARKS.md), one process per core, each with its own seed:
    .venv/bin/python test/random_programs.py --programs 5000 --seed 300 [--variant qd8 ...] [--keep DIR]
The test suite runs a seeded, bounded set (test_differential.py).
"""

from __future__ import annotations

import argparse
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Optional

import torch
import torch.nn.functional as F
from torch import nn

HERE = Path(__file__).resolve().parent
VARIANTS = ("fp32", "fp16", "int8", "qd8", "8da4w", "portable")


@dataclass
class Step:
    """One op of a program: `fn(*operands)` where each operand is a value index or a parameter name."""

    name: str
    fn: Callable
    args: tuple


@dataclass
class Program:
    seed: int
    variant: str
    dynamic: bool
    module: nn.Module
    inputs: tuple
    dynamic_shapes: Optional[tuple] = None
    run_inputs: tuple = ()
    ops: list = field(default_factory=list)
    converted: Optional[nn.Module] = None  # the module exported for a quantized variant (set by `lower`)

    @property
    def name(self) -> str:
        return f"p{self.seed:06d}_{self.variant}{'_dyn' if self.dynamic else ''}"

    def describe(self) -> str:
        shapes = [list(t.shape) for t in self.inputs]
        return f"{self.name}: inputs {shapes}, ops {', '.join(self.ops)}"


class RandomModule(nn.Module):
    """Runs `steps` in order over a value list that starts with the inputs; returns `outputs`."""

    def __init__(self, steps: list, params: dict, outputs: list) -> None:
        super().__init__()
        self.steps = steps
        self.params = nn.ParameterDict({k: nn.Parameter(v, requires_grad=False) for k, v in params.items()})
        self.outputs = outputs

    def forward(self, *inputs):
        values = list(inputs)
        for step in self.steps:
            values.append(step.fn(*[self.params[a] if isinstance(a, str) else values[a] for a in step.args]))
        return tuple(values[i] for i in self.outputs)


# Ops: each is (name, ranks it takes, builder(rng, shape, ctx) -> (fn, extra operands) or None). ----------


def _unary(fn):
    return lambda rng, shape, ctx: (fn, ())


# Inputs kept in a safe domain inside the op, so eager has no NaN the runtimes must copy bit for bit.
UNARY = {
    "abs": torch.abs, "neg": torch.neg, "relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
    "exp": lambda x: torch.exp(torch.clamp(x, -8.0, 8.0)), "sin": torch.sin, "cos": torch.cos,
    "floor": torch.floor, "ceil": torch.ceil, "sqrt": lambda x: torch.sqrt(x * x + 0.25),
    "rsqrt": lambda x: torch.rsqrt(x * x + 0.25), "log": lambda x: torch.log(torch.abs(x) + 0.5),
    "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "hardswish": F.hardswish,
    "leaky_relu": lambda x: F.leaky_relu(x, 0.05), "hardtanh": F.hardtanh,
    "clamp": lambda x: torch.clamp(x, -0.5, 0.75), "square": lambda x: x ** 2, "relu6": F.relu6,
}
BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": lambda a, b: a / (torch.abs(b) + 0.5),
    "maximum": torch.maximum, "minimum": torch.minimum,
}


class Builder:
    """Grows a random program one op at a time, running each op eagerly to know its shape."""

    def __init__(self, rng: random.Random, variant: str, dynamic: bool) -> None:
        self.rng = rng
        self.variant = variant
        self.dynamic = dynamic
        self.dtype = torch.float16 if variant == "fp16" else torch.float32
        self.values: list[torch.Tensor] = []
        self.steps: list[Step] = []
        self.params: dict[str, torch.Tensor] = {}
        self.ops: list[str] = []
        self.gen = torch.Generator().manual_seed(rng.randrange(2 ** 31))

    def randn(self, *shape, scale: float = 1.0) -> torch.Tensor:
        return (torch.randn(*shape, generator=self.gen) * scale).to(self.dtype)

    def param(self, shape, scale: float = 0.5, zero: bool = False) -> str:
        """A parameter of `shape`: often one made before with that shape (shared), sometimes all zeros
        or ones (equal content across parameters, which the writer stores once)."""
        shape = tuple(shape)
        same = [k for k, v in self.params.items() if tuple(v.shape) == shape]
        if same and self.rng.random() < 0.3:
            return self.rng.choice(same)
        kind = self.rng.random()
        if zero or kind < 0.12:
            t = torch.zeros(shape, dtype=self.dtype)
        elif kind < 0.2:
            t = torch.ones(shape, dtype=self.dtype)
        else:
            t = self.randn(*shape, scale=scale)
        name = f"c{len(self.params)}"
        self.params[name] = t
        return name

    def add(self, name: str, fn: Callable, args: tuple) -> bool:
        vals = [self.params[a] if isinstance(a, str) else self.values[a] for a in args]
        try:
            with torch.no_grad():
                out = fn(*vals)
        except (RuntimeError, ValueError, IndexError, TypeError):
            return False
        if not isinstance(out, torch.Tensor) or out.numel() == 0 or out.numel() > 65536 or out.dim() == 0:
            return False
        if not bool(torch.isfinite(out).all()):
            return False
        self.values.append(out)
        self.steps.append(Step(name, fn, args))
        self.ops.append(name)
        return True

    # Op choices -------------------------------------------------------------------------------------

    def pick(self, ranks=(1, 2, 3, 4)) -> Optional[int]:
        choices = [i for i, v in enumerate(self.values) if v.dim() in ranks]
        if not choices:
            return None
        # Recent values more often: chains, not only a fan of ops over the inputs.
        return choices[-1] if self.rng.random() < 0.5 else self.rng.choice(choices)

    def broadcast_partner(self, shape: tuple) -> object:
        """A value or parameter whose shape broadcasts against `shape` (or a Python scalar)."""
        r = self.rng.random()
        same = [i for i, v in enumerate(self.values) if tuple(v.shape) == shape]
        if r < 0.3 and same:
            return self.rng.choice(same)
        if r < 0.45:
            return round(self.rng.uniform(-2, 2), 3)
        pshape = list(shape)
        for d in range(len(pshape)):
            if self.rng.random() < 0.5:
                pshape[d] = 1
        if self.rng.random() < 0.3:
            pshape = pshape[self.rng.randrange(len(pshape)):]  # fewer dims: leading broadcast
        if self.dynamic and len(pshape) == len(shape):
            pshape[0] = 1  # the batch dim of a dynamic program is not known to a parameter
        return self.param(pshape or [1])

    def step(self) -> None:
        rng = self.rng
        kind = rng.choices(["unary", "binary", "linear", "conv", "pool", "reduce", "shape", "norm", "cat",
                            "softmax", "bmm"],
                           weights=[5, 6, 4, 3, 2, 2, 4, 2, 2, 2, 1])[0]
        if self.dynamic and kind in ("conv", "pool", "bmm", "shape"):
            kind = rng.choice(["unary", "binary", "linear", "norm", "softmax"])
        getattr(self, "_" + kind)()

    def _unary(self) -> None:
        i = self.pick()
        if i is not None:
            name = self.rng.choice(sorted(UNARY))
            self.add(name, UNARY[name], (i,))

    def _binary(self) -> None:
        i = self.pick()
        if i is None:
            return
        name = self.rng.choice(sorted(BINARY))
        other = self.broadcast_partner(tuple(self.values[i].shape))
        fn = BINARY[name]
        if isinstance(other, float):
            if name in ("maximum", "minimum"):
                self.add(f"{name}_scalar", lambda a, _s=other, _f=fn: _f(a, torch.tensor(_s, dtype=a.dtype)), (i,))
            else:
                scalar = abs(other) + 0.5 if name == "div" else other
                op = {"div": torch.div, "add": torch.add, "sub": torch.sub, "mul": torch.mul}[name]
                self.add(f"{name}_scalar", lambda a, _s=scalar, _f=op: _f(a, _s), (i,))
        elif self.rng.random() < 0.5:
            self.add(name, fn, (i, other))
        else:
            self.add(name, fn, (other, i))

    def _linear(self) -> None:
        i = self.pick((2, 3, 4))
        if i is None:
            return
        k = self.values[i].shape[-1]
        n = self.rng.choice([8, 16, 32, 64] if self.variant == "8da4w" else [1, 3, 8, 16, 33])
        if self.variant == "8da4w" and k % 32:
            return
        w = self.param((n, k), scale=1 / math.sqrt(k))
        if self.rng.random() < 0.75:
            b = self.param((n,), scale=0.2)
            self.add("linear", F.linear, (i, w, b))
        else:
            self.add("linear_nobias", F.linear, (i, w))

    def _conv(self) -> None:
        i = self.pick((4,))
        if i is None:
            i = self.pick((3,))
            if i is None or self.values[i].shape[-1] < 2:
                return
            c = self.values[i].shape[1]
            self.add("unsqueeze", lambda x: x.unsqueeze(-1), (i,))
            i = len(self.values) - 1
        n, c, h, w = self.values[i].shape
        rng = self.rng
        k = rng.choice([1, 1, 3, 3, 5]) if min(h, w) >= 5 else 1
        stride = rng.choice([1, 1, 2])
        pad = rng.choice([0, k // 2])
        depthwise = c > 1 and rng.random() < 0.3
        transposed = not depthwise and rng.random() < 0.12
        if transposed:
            out_c = rng.choice([2, 4, 8])
            weight = self.param((c, out_c, k, k), scale=1 / math.sqrt(c * k * k))
            bias = self.param((out_c,), scale=0.2)
            self.add("conv_transpose2d", lambda x, wt, b, _s=stride, _p=pad: F.conv_transpose2d(
                x, wt, b, stride=_s, padding=_p), (i, weight, bias))
            return
        out_c, groups = (c, c) if depthwise else (rng.choice([1, 4, 8, 16]), 1)
        weight = self.param((out_c, c // groups, k, k), scale=1 / math.sqrt(c // groups * k * k))
        args = (i, weight) + ((self.param((out_c,), scale=0.2),) if rng.random() < 0.8 else ())
        name = "conv2d_dw" if depthwise else "conv2d"
        self.add(name, lambda x, wt, b=None, _s=stride, _p=pad, _g=groups: F.conv2d(
            x, wt, b, stride=_s, padding=_p, groups=_g), args)
        if rng.random() < 0.3:
            j = len(self.values) - 1
            self.add("relu", torch.relu, (j,))

    def _pool(self) -> None:
        i = self.pick((4,))
        if i is None or min(self.values[i].shape[2:]) < 2:
            return
        k = self.rng.choice([2, 3])
        stride = self.rng.choice([1, 2])
        if self.rng.random() < 0.5:
            self.add("max_pool2d",
                     lambda x, _k=k, _s=stride: F.max_pool2d(x, _k, _s, padding=_k // 2 if _k == 3 else 0), (i,))
        else:
            self.add("avg_pool2d", lambda x, _k=k, _s=stride: F.avg_pool2d(x, _k, _s), (i,))

    def _reduce(self) -> None:
        i = self.pick((3, 4))
        if i is None:
            return
        x = self.values[i]
        dims = [-1] if x.dim() == 3 else self.rng.choice([[-1], [-2, -1], [-1, -2]])
        keep = x.dim() == 4 and dims != [-1] or self.rng.random() < 0.5
        self.add("mean", lambda t, _d=tuple(dims), _k=keep: t.mean(_d, keepdim=_k), (i,))

    def _shape(self) -> None:
        i = self.pick()
        if i is None:
            return
        x = self.values[i]
        rng = self.rng
        choice = rng.choice(["permute", "reshape", "slice", "select", "unsqueeze", "squeeze", "pad", "expand",
                             "transpose"])
        if choice == "permute" and x.dim() >= 2:
            perm = list(range(x.dim()))
            rng.shuffle(perm)
            self.add("permute", lambda t, _p=tuple(perm): t.permute(_p).contiguous(), (i,))
        elif choice == "transpose" and x.dim() >= 2:
            self.add("transpose", lambda t: t.transpose(-1, -2), (i,))
        elif choice == "reshape":
            n = x.numel()
            shapes = [(n,), (x.shape[0], -1)] + [(a, n // a) for a in (2, 4, 8) if n % a == 0]
            if x.dim() >= 3:
                shapes.append((x.shape[0] * x.shape[1], -1))
            shape = rng.choice(shapes)
            self.add("reshape", lambda t, _s=shape: t.reshape(_s), (i,))
        elif choice == "slice" and max(x.shape) > 2:
            d = max(range(x.dim()), key=lambda j: x.shape[j] + rng.random())
            start = rng.randrange(x.shape[d] - 1)
            stop = rng.randrange(start + 1, x.shape[d] + 1)
            step = rng.choice([1, 1, 2])
            self.add("slice", lambda t, _d=d, _a=start, _b=stop, _s=step: t.narrow(_d, 0, t.shape[_d])[
                (slice(None),) * _d + (slice(_a, _b, _s),)], (i,))
        elif choice == "select" and x.dim() >= 2:
            d = rng.randrange(x.dim())
            idx = rng.randrange(x.shape[d])
            self.add("select", lambda t, _d=d, _i=idx: t.select(_d, _i), (i,))
        elif choice == "unsqueeze" and x.dim() < 4:
            d = rng.randrange(x.dim() + 1)
            self.add("unsqueeze", lambda t, _d=d: t.unsqueeze(_d), (i,))
        elif choice == "squeeze" and 1 in x.shape:
            d = list(x.shape).index(1)
            self.add("squeeze", lambda t, _d=d: t.squeeze(_d), (i,))
        elif choice == "pad" and x.dim() >= 2:
            pads = tuple(rng.choice([0, 1, 2]) for _ in range(4))
            value = rng.choice([0.0, 0.5])
            self.add("constant_pad", lambda t, _p=pads, _v=value: F.pad(t, _p, value=_v), (i,))
        elif choice == "expand" and 1 in x.shape:
            shape = [rng.choice([2, 3]) if s == 1 else s for s in x.shape]
            self.add("expand", lambda t, _s=tuple(shape): t.expand(_s).contiguous(), (i,))

    def _norm(self) -> None:
        i = self.pick((2, 3, 4))
        if i is None:
            return
        x = self.values[i]
        if x.dim() == 4 and self.rng.random() < 0.5 and not self.dynamic:
            c = x.shape[1]
            mean, var = self.param((c,), 0.3), self.param((c,), 0.1)
            var_t = self.params[var]
            self.params[var] = var_t.abs() + 0.5
            w, b = self.param((c,), 0.5), self.param((c,), 0.2)
            self.add("batch_norm", lambda t, m, v, wt, bs: F.batch_norm(t, m, v, wt, bs, False, 0.1, 1e-5),
                     (i, mean, var, w, b))
            return
        d = x.shape[-1]
        w, b = self.param((d,), 0.5), self.param((d,), 0.2)
        self.add("layer_norm", lambda t, wt, bs, _d=d: F.layer_norm(t, (_d,), wt, bs), (i, w, b))

    def _softmax(self) -> None:
        i = self.pick((2, 3, 4))
        if i is not None:
            self.add("softmax", lambda t: torch.softmax(t, -1), (i,))

    def _cat(self) -> None:
        i = self.pick((2, 3, 4))
        if i is None:
            return
        x = self.values[i]
        d = self.rng.randrange(1, x.dim()) if self.dynamic else self.rng.randrange(x.dim())
        partners = [j for j, v in enumerate(self.values)
                    if v.dim() == x.dim() and all(a == b for k, (a, b) in enumerate(zip(v.shape, x.shape)) if k != d)]
        others = [self.rng.choice(partners) for _ in range(self.rng.randrange(1, 4))]
        self.add("cat", lambda *ts, _d=d: torch.cat(ts, _d), (i, *others))

    def _bmm(self) -> None:
        i = self.pick((3,))
        if i is None:
            return
        b, m, k = self.values[i].shape
        partners = [j for j, v in enumerate(self.values) if v.dim() == 3 and v.shape[0] == b and v.shape[1] == k]
        if partners and self.rng.random() < 0.6:
            self.add("bmm", torch.bmm, (i, self.rng.choice(partners)))
        else:
            self.add("bmm_t", lambda a, c: torch.bmm(a, c.transpose(1, 2)),
                     (i, self.rng.choice([j for j, v in enumerate(self.values) if v.dim() == 3 and v.shape[0] == b
                                          and v.shape[2] == k])))


def _input_shapes(rng: random.Random, dynamic: bool, variant: str) -> list[tuple]:
    n_inputs = rng.choice([1, 1, 2, 3])
    batch = rng.choice([1, 2, 3])
    shapes = []
    for _ in range(n_inputs):
        rank = rng.choice([2, 3, 4, 4])
        if variant == "8da4w":
            rank = rng.choice([2, 3])
        if rank == 4:
            shape = (batch, rng.choice([1, 3, 4, 8]), rng.choice([5, 7, 8]), rng.choice([5, 6, 8]))
        elif rank == 3:
            shape = (batch, rng.choice([1, 4, 7]), rng.choice([8, 16, 32, 64] if variant == "8da4w" else [3, 8, 16]))
        else:
            shape = (batch, rng.choice([32, 64] if variant == "8da4w" else [1, 5, 16, 24]))
        if shapes and rng.random() < 0.5:
            shape = shapes[0]  # inputs of one shape: binary ops between inputs
        shapes.append(shape)
    return shapes


def make_program(seed: int, variant: str = "fp32", dynamic: bool = False) -> Program:
    """The program for `seed`: the same seed, variant and dynamism give the same program."""
    rng = random.Random(f"{seed}-{variant}-{dynamic}")
    b = Builder(rng, variant, dynamic)
    shapes = _input_shapes(rng, dynamic, variant)
    if dynamic:
        batch = max(2, shapes[0][0])
        shapes = [(batch,) + s[1:] for s in shapes]
    for s in shapes:
        b.values.append(b.randn(*s))
    n_inputs = len(shapes)
    target = rng.randrange(2, 9)
    for _ in range(40):
        if len(b.steps) >= target:
            break
        b.step()
    if not b.steps:
        b.add("relu", torch.relu, (0,))
    candidates = list(range(len(b.values)))
    outputs = [len(b.values) - 1]
    if rng.random() < 0.4:
        outputs.append(rng.choice(candidates[n_inputs:]))
    if rng.random() < 0.15:
        outputs.append(rng.randrange(n_inputs))  # an output that is an input
    module = RandomModule(b.steps, b.params, outputs).eval()
    inputs = tuple(b.values[:n_inputs])
    program = Program(seed, variant, dynamic, module, inputs, ops=b.ops, run_inputs=inputs)
    if dynamic:
        dim = torch.export.Dim("batch", min=1, max=8)
        program.dynamic_shapes = (tuple({0: dim} for _ in inputs),)  # forward(*inputs): one argument
        other = rng.choice([1, 3, 5, 8])
        program.run_inputs = tuple(torch.randn((other,) + tuple(t.shape[1:]), generator=b.gen).to(t.dtype)
                                   for t in inputs)
    return program


# Lowering --------------------------------------------------------------------------------------------


def _quantized(program: Program):
    """The module to export for a quantized variant (a converted pt2e graph, or torchao's 8da4w
    module), or the float module."""
    module, inputs = program.module, program.inputs
    if program.variant in ("int8", "qd8"):
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

        from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
            XNNPACKQuantizer, get_symmetric_quantization_config)

        config = get_symmetric_quantization_config(is_per_channel=True, is_dynamic=program.variant == "qd8")
        graph = torch.export.export(module, inputs, dynamic_shapes=program.dynamic_shapes).module()
        graph = prepare_pt2e(graph, XNNPACKQuantizer().set_global(config))
        graph(*inputs)
        return convert_pt2e(graph)
    if program.variant == "8da4w":
        from torchao.quantization import Int8DynamicActivationIntxWeightConfig, quantize_
        from torchao.quantization.granularity import PerGroup

        linears = [s for s in program.module.steps if s.name.startswith("linear")]
        if not linears:
            return module
        wrapped = _LinearModules(program.module)
        quantize_(wrapped, Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int4,
                                                                  weight_granularity=PerGroup(32)))
        return wrapped
    return module


class _LinearModules(nn.Module):
    """`module` with each linear step as an nn.Linear, which torchao's quantize_ replaces."""

    def __init__(self, module: RandomModule) -> None:
        super().__init__()
        self.inner = module
        self.linears = nn.ModuleList()
        steps = []
        for s in module.steps:
            if s.name.startswith("linear"):
                w = module.params[s.args[1]]
                lin = nn.Linear(w.shape[1], w.shape[0], bias=len(s.args) > 2)
                with torch.no_grad():
                    lin.weight.copy_(w)
                    if len(s.args) > 2:
                        lin.bias.copy_(module.params[s.args[2]])
                self.linears.append(lin)
                steps.append(Step(s.name, lambda x, *_, _l=lin: _l(x), s.args))
            else:
                steps.append(s)
        self.steps = steps

    def forward(self, *inputs):
        values = list(inputs)
        params = self.inner.params
        for step in self.steps:
            values.append(step.fn(*[params[a] if isinstance(a, str) else values[a] for a in step.args]))
        return tuple(values[i] for i in self.inner.outputs)


def lower(program: Program) -> tuple[bytes, list, float]:
    """(the .pte bytes, the reference outputs on `run_inputs`, an error budget): the budget is what
    rounding alone can move a float program's result, or, negated, what quantization moved a
    quantized program's."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    with torch.no_grad():
        eager = [t.clone() for t in program.module(*program.run_inputs)]
    module = _quantized(program)
    program.converted = module
    with torch.no_grad():
        reference = [t.clone() for t in module(*program.run_inputs)]
    # Quantization that turns a finite float result into inf or NaN (a sum of squares plus 0.25 whose
    # int8 scale rounds it to zero, then rsqrt) leaves nothing to compare: which elements overflow
    # depends on rounding boundaries each runtime may land on either side of.
    program.degenerate = module is not program.module and any(
        bool((~torch.isfinite(r) & torch.isfinite(e)).any())
        for r, e in zip(reference, eager) if r.is_floating_point() and r.shape == e.shape)
    # A quantized runtime's result and the converted module's are each within quantization error of
    # the float result, but not of each other: an activation on a rounding boundary lands on either
    # side, and XNNPACK quantizes dynamic activations per row where the converted module takes the
    # whole tensor. Allow twice what quantization moved the converted module. A float program is
    # allowed what rounding alone can move it (see `sensitivity`).
    if module is program.module:
        budget = 8 * sensitivity(program)
    else:
        # Rounding counts too (x4 in `check`): the float ops around the quantized ones round in each
        # runtime's own order, which a layer norm of a constant row magnifies past what quantization moved.
        budget = -max(_moved(reference, eager), 2 * sensitivity(program), 1e-4)
    ep = torch.export.export(module, program.inputs, dynamic_shapes=program.dynamic_shapes)
    partitioner = [] if program.variant == "portable" else [XnnpackPartitioner()]
    pte = to_edge_transform_and_lower(ep, partitioner=partitioner).to_executorch().buffer
    return pte, reference, budget


def sensitivity(program: Program, runs: int = 3) -> float:
    """How far one rounding per op can move the outputs, relative to their scale: the program run
    in float64 with every op's operands and result (and every parameter) perturbed by a random
    relative error of one unit in the last place of the program's dtype. A layer norm of a near-constant row, say,
    turns a one-ulp difference in its mean into a 1e-4 difference in its output; two correct
    runtimes that round in another order differ that much, and the comparison must allow it."""
    eps = torch.finfo(torch.float16 if program.variant == "fp16" else torch.float32).eps
    gen = torch.Generator().manual_seed(program.seed)

    def noisy(t):
        return t * (1 + eps * (2 * torch.rand(t.shape, generator=gen, dtype=torch.float64) - 1))

    def noisy_layer_norm(t, w, b):
        # Its mean and variance are results a runtime rounds too (XNNPACK's decomposition computes the
        # mean as a product with 1/n): x - mean of a constant row is then one rounding of x, not 0,
        # and the normalization scales it by 1 / sqrt(eps).
        mean = noisy(t.mean(-1, keepdim=True))
        centred = noisy(t - mean)
        var = noisy((centred * centred).mean(-1, keepdim=True))
        return centred * torch.rsqrt(var + 1e-5) * w + b

    def run(noise: bool) -> list:
        module = program.module
        values = [t.double() for t in program.run_inputs]
        params = {k: (noisy(v.double()) if noise else v.double()) for k, v in module.params.items()}
        for step in module.steps:
            operands = [params[a] if isinstance(a, str) else values[a] for a in step.args]
            if noise:
                # Each operand rounded once more: what a reduction's order moves is one rounding of
                # each term, not of the result (a mean of terms that cancel, say).
                operands = [noisy(o) if isinstance(o, torch.Tensor) and o.is_floating_point() else o
                            for o in operands]
            if noise and step.name == "layer_norm":
                out = noisy_layer_norm(*operands)
            else:
                out = step.fn(*operands)
            values.append(noisy(out) if noise else out)
        return [values[i] for i in module.outputs]

    with torch.no_grad():
        exact = run(False)
        return max(_moved(run(True), exact) for _ in range(runs))


def _moved(a: list, b: list) -> float:
    worst = 0.0
    for x, y in zip(a, b):
        if x.dtype.is_floating_point and y.numel():
            scale = float(y.abs().max()) or 1.0
            worst = max(worst, float((x.float() - y.float()).abs().max()) / scale)
    return worst


# Running ---------------------------------------------------------------------------------------------


def project_engines() -> dict:
    import importlib

    from executorch.runtime import Runtime
    from executorch.runtime._backend import _MODULES

    found = {"python": Runtime("python", importlib.import_module(_MODULES["python"]))}
    try:
        found["native"] = Runtime("native", importlib.import_module(_MODULES["native"]))
    except ImportError:
        pass
    return found


def run_engine(runtime, pte: bytes, inputs) -> list:
    method = runtime.load_program(pte).load_method("forward")
    return list(method.execute(list(inputs)))


# Refusals that are documented gaps, not findings: the native XnnpackBackend has no 16-bit values.
KNOWN_REFUSALS = {("native", "fp16"): "xnn_datatype_fp16, which this backend does not support"}


def check(program: Program, engines: dict, published: Optional[list] = None, published_error: str = "",
          pte: Optional[bytes] = None, reference=None, budget: float = 0.0) -> list[str]:
    """The disagreements of every runtime with the reference, one line each (empty: all agree)."""
    from executorch.devtools.compare import compare_outputs, tolerance

    if pte is None:
        pte, reference, budget = lower(program)
    findings = []
    tol = tolerance(torch.float16 if program.variant == "fp16" else torch.float32)
    quant_error = -budget if budget < 0 else 0.0
    # Against the reference, a quantized result may be off by its own quantization error plus the
    # converted module's (XNNPACK quantizes dynamic activations per row, the converted module per
    # tensor); against the published runtime, which runs the same int8 arithmetic, only by values on
    # a rounding boundary landing on the other side.
    tol = {k: max(v, budget, 4 * quant_error) for k, v in tol.items()}
    cross = {k: max(v, quant_error / 2) for k, v in tolerance(torch.float32).items()}
    results = {}
    for name, runtime in engines.items():
        try:
            results[name] = run_engine(runtime, pte, program.run_inputs)
        except Exception as e:  # noqa: BLE001 - any refusal is reported with its reason
            known = KNOWN_REFUSALS.get((name, program.variant))
            if known is None or known not in str(e):
                findings.append(f"{program.name} {name}: refused: {type(e).__name__}: {str(e)[:300]}")
    if published is not None:
        results["published"] = published
    elif published_error:
        findings.append(f"{program.name} published: {published_error[:300]}")
    if getattr(program, "degenerate", False):
        # every runtime must still load and run it (a refusal or a crash is reported above)
        return findings + [f"note: {program.name} degenerate quantization: the converted module's reference "
                           "is inf or NaN where the float model is finite; values not compared"]
    for name, got in results.items():
        verdict = compare_outputs(*_unit_scaled(got, reference), **tol)
        if not verdict.ok:
            known = name == "published" and _published_numerics(program, findings)
            findings.append(f"{'note: ' if known else ''}{program.name} {name}: {verdict}")
        elif quant_error and name != "published" and "published" in results:
            verdict = compare_outputs(*_unit_scaled(got, results["published"]), **cross)
            if not verdict.ok:
                findings.append(f"{program.name} {name} against the published runtime: {verdict}")
    return findings


def _unit_scaled(got: list, reference: list) -> tuple[list, list]:
    """`got` and `reference` as compared. `compare_outputs` scales its absolute tolerance to the largest
    |reference| of an output, so an all-zero reference admits only exact zeros; but a zero the program
    makes by cancellation (a layer norm of a constant row: x - mean) is exact, or a few ulps, in eager and
    rounding noise of the inputs' scale elsewhere. An output no larger than rounding noise at the
    generator's scale (its values are of order one) is compared at that scale: both shifted by one."""
    got, reference = list(got), list(reference)
    for i, (g, r) in enumerate(zip(got, reference)):
        if (isinstance(g, torch.Tensor) and isinstance(r, torch.Tensor) and r.is_floating_point() and r.numel()
                and g.shape == r.shape and g.dtype == r.dtype
                and float(r.abs().max()) <= 4 * torch.finfo(r.dtype).eps):
            got[i], reference[i] = g + 1, r + 1
    return got, reference


QUANTIZED = ("int8", "qd8", "8da4w")


def recheck(program: Program, engines: dict, published_python: Optional[str], work: Path, pte: bytes,
            budget: float) -> list[str]:
    """The findings of a quantized `program` on a second sample of inputs (seeded by the program). A float
    op's result (a sum, in each runtime's own order) may land within an ulp or two of a quantization
    boundary and round to either side: one whole step, which later ops can amplify past the tolerance.
    Such a tie belongs to the exact values (and a small nudge does not move it: the inputs are quantized
    first), so other inputs do not meet it; a wrong formula, or a tie the program makes itself (integers
    from floor() on a boundary), disagrees again."""
    gen = torch.Generator().manual_seed(program.seed + 1)
    inputs = tuple(torch.randn(t.shape, generator=gen).to(t.dtype) if t.is_floating_point() else t
                   for t in program.run_inputs)
    other = replace(program, run_inputs=inputs)
    module = program.converted if program.converted is not None else program.module
    with torch.no_grad():
        reference = [t.clone() for t in module(*inputs)]
    got, error = None, ""
    if published_python:
        name = program.name + "_recheck"
        _stage(work, name, pte, inputs)
        error = run_published(published_python, work, [name]).get(name, "")
        got = None if error else torch.load(work / f"{name}.out.pt")
    return check(other, engines, got, error, pte, reference, budget)


def _stage(work: Path, name: str, pte: bytes, inputs) -> None:
    """NAME.pte and NAME.in.pt in `work`, as the published runner reads them."""
    (work / f"{name}.pte").write_bytes(pte)
    torch.save(list(inputs), work / f"{name}.in.pt")


def _numeric_only(findings: list[str]) -> bool:
    """Every finding is a disagreement of values (no refusal, no crash)."""
    return bool(findings) and all("max rel err" in f and ": refused" not in f for f in findings)


def _published_numerics(program: Program, findings: list) -> bool:
    """A published-runtime result off where its own portable kernel is known to lose digits, ours
    both right: its layer norm takes the variance as E[x^2] - E[x]^2, which cancels on rows whose
    mean is large against their spread (4e-2 relative error where eager's is 3e-5). A file whose
    delegate payload we wrote is never excused: there a published-only difference is ours to find."""
    return program.variant == "portable" and "layer_norm" in program.ops and not findings


def published_env() -> dict:
    """The environment for the published runtime's process: without PYTHONPATH, which may point at
    this project (its Python would then import our package and compare us with ourselves)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def run_published(python: str, root: Path, names: list[str], timeout: float = 1800,
                  runner: Path = HERE / "reference_runner.py") -> dict[str, str]:
    """Run root/NAME.pte on the published runtime, all in one process, restarting after a file that
    kills it. Returns name -> failure reason for those that did not run."""
    failures: dict[str, str] = {}
    todo = list(names)
    while todo:
        proc = subprocess.run([python, str(runner), str(root), *todo], capture_output=True, text=True,
                              timeout=timeout, env=published_env())
        ran = proc.stdout.split()
        if proc.returncode == 0:
            break
        if not ran:
            raise RuntimeError(f"the published runtime's runner did not start: {proc.stderr[-1500:]}")
        failures[ran[-1]] = f"process died (exit {proc.returncode})"
        todo = todo[todo.index(ran[-1]) + 1:]
    for name in names:
        err = root / f"{name}.err.txt"
        if err.exists():
            failures[name] = "refused: " + err.read_text()
    return failures


def plan(count: int, seed: int, variants: Optional[list[str]] = None) -> list[tuple[int, str, bool]]:
    """`count` (seed, variant, dynamic) triples: mostly float XNNPACK programs, every variant (or those of
    `variants`)."""
    weights = {"fp32": 40, "fp16": 8, "int8": 14, "qd8": 8, "8da4w": 6, "portable": 12}
    weights = {k: w for k, w in weights.items() if not variants or k in variants}
    rng = random.Random(seed)
    out = []
    for i in range(count):
        variant = rng.choices(list(weights), weights=list(weights.values()))[0]
        dynamic = variant in ("fp32", "portable") and rng.random() < 0.3
        out.append((seed * 1_000_000 + i, variant, dynamic))
    return out


def run(count: int, seed: int, published_python: Optional[str], keep: Optional[Path] = None,
        log=print, variants: Optional[list[str]] = None, programs: Optional[list] = None) -> dict:
    """Generate, lower and run `count` programs (or the (seed, variant, dynamic) triples of `programs`);
    returns counts and findings."""
    engines = project_engines()
    work = Path(tempfile.mkdtemp(prefix="difftest-")) if keep is None else keep
    work.mkdir(parents=True, exist_ok=True)
    stats = {"programs": 0, "export_refused": 0, "findings": [], "published_numerics": 0, "boundary_flips": 0,
             "degenerate": 0,
             "by_variant": {}}
    batch: list = []
    start = time.time()

    def flush():
        published = run_published(published_python, work, [p.name for p, *_ in batch]) if published_python else {}
        for program, pte, reference, budget in batch:
            out = work / f"{program.name}.out.pt"
            got = torch.load(out) if published_python and program.name not in published else None
            found = check(program, engines, got, published.get(program.name, ""), pte, reference, budget)
            notes = [f for f in found if f.startswith("note: ")]
            found = [f for f in found if f not in notes]
            if program.variant in QUANTIZED and _numeric_only(found) and not recheck(
                    program, engines, published_python, work, pte, budget):
                log("NOTE boundary flip (agrees on a second sample of inputs): " + "; ".join(found) + "\n    "
                    + program.describe())
                stats["boundary_flips"] += 1
                found = []
            for f in found:
                log("FINDING " + f + "\n    " + program.describe())
            for f in notes:
                log("NOTE " + f[len("note: "):] + "\n    " + program.describe())
            stats["findings"] += found
            degenerate = [f for f in notes if "degenerate quantization" in f]
            stats["degenerate"] += len(degenerate)
            stats["published_numerics"] += len(notes) - len(degenerate)
            if not found and keep is None:
                for stem in (program.name, program.name + "_recheck"):
                    for suffix in (".pte", ".in.pt", ".out.pt", ".err.txt"):
                        (work / f"{stem}{suffix}").unlink(missing_ok=True)
        batch.clear()

    for s, variant, dynamic in programs or plan(count, seed, variants):
        program = make_program(s, variant, dynamic)
        try:
            pte, reference, budget = lower(program)
        except Exception as e:  # noqa: BLE001 - an export this package refuses is counted, not a finding
            stats["export_refused"] += 1
            if not _expected_refusal(e):
                stats["findings"].append(f"{program.name} export: {type(e).__name__}: {str(e)[:300]}")
                log("FINDING export " + program.describe() + f"\n    {type(e).__name__}: {str(e)[:500]}")
            continue
        _stage(work, program.name, pte, program.run_inputs)
        batch.append((program, pte, reference, budget))
        stats["programs"] += 1
        stats["by_variant"][variant] = stats["by_variant"].get(variant, 0) + 1
        if len(batch) >= 50:
            flush()
            log(f"{stats['programs']} programs, {len(stats['findings'])} findings, {time.time() - start:.0f} s")
    if batch:
        flush()
    stats["seconds"] = time.time() - start
    if keep is None and not stats["findings"]:
        shutil.rmtree(work, ignore_errors=True)
    stats["work"] = str(work)
    return stats


def _expected_refusal(e: Exception) -> bool:
    """torch.export's own refusals of a random graph (a guard on a dynamic dim) are not ours to fix."""
    text = f"{type(e).__name__}: {e}"
    return "Constraints violated" in text or "guard" in text.lower() and "dynamic" in text.lower()


def _program_name(text: str) -> tuple[int, str, bool]:
    """A program's name (`Program.name`: p<seed>_<variant>[_dyn]) as its (seed, variant, dynamic) triple."""
    parts = text.split("_")
    if not (2 <= len(parts) <= 3 and parts[0][:1] == "p" and parts[0][1:].isdigit() and parts[1] in VARIANTS
            and parts[2:] in ([], ["dyn"])):
        raise argparse.ArgumentTypeError(f"{text!r} is not a program name such as p300000473_int8 or p5_fp32_dyn")
    return int(parts[0][1:]), parts[1], len(parts) == 3


def main(argv=None) -> int:
    import os

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--variant", action="append", choices=VARIANTS,
                    help="generate only this variant (repeatable; default: all, weighted)")
    ap.add_argument("--program", action="append", type=_program_name, metavar="NAME",
                    help="run this program again, as a finding names it (p300000473_int8, p5_fp32_dyn; repeatable)")
    ap.add_argument("--keep", type=Path, help="keep every program's files here (default: only findings)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    published = os.environ.get("ET_REFERENCE_PYTHON")
    if not published:
        print("ET_REFERENCE_PYTHON is not set: the published runtime is left out", file=sys.stderr)
    stats = run(args.programs, args.seed, published, args.keep, variants=args.variant, programs=args.program)
    print(f"programs {stats['programs']} (by variant {stats['by_variant']}), refused at export "
          f"{stats['export_refused']}, findings {len(stats['findings'])}, published portable layer-norm numerics "
          f"{stats['published_numerics']}, quantization boundary flips {stats['boundary_flips']}, "
          f"degenerate quantization {stats['degenerate']}, "
          f"{stats['seconds']:.0f} s, "
          f"engines: eager, {', '.join(project_engines())}{', published' if published else ''}; "
          f"files in {stats['work']}")
    return 1 if stats["findings"] else 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    raise SystemExit(main())
