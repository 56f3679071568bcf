"""XNNPACK's quantized arithmetic on torch tensors: quantize, requantize, per-token dynamic quantization."""

from __future__ import annotations

import math

import torch

from executorch.backends.xnnpack.runtime._values import Value

F32 = torch.float32


def f32(x: float) -> torch.Tensor:
    return torch.tensor(x, dtype=F32)


def quantize(x: torch.Tensor, v: Value) -> torch.Tensor:
    """A float tensor in `v`'s per-tensor quantization: round half to even of x / scale, plus the zero point."""
    lo, hi = v.qrange
    inv = f32(1.0) / v.scale
    return torch.clamp(torch.round(x.to(F32) * inv) + v.zero_point, lo, hi).to(_int_dtype(v))


def dequantize(q: torch.Tensor, v: Value) -> torch.Tensor:
    """`v`'s integers as float32 (per tensor, or per channel along v.channel_dim)."""
    scale = v.scale
    if scale.dim() == 1:
        shape = [1] * q.dim()
        shape[v.channel_dim] = -1
        scale = scale.reshape(shape)
    return (q.to(F32) - v.zero_point) * scale


def bound(x: float, v: Value, upper: bool) -> int:
    """An output min or max (float) in `v`'s integers, as XNNPACK quantizes fused activation bounds."""
    lo, hi = v.qrange
    if math.isinf(x) or math.isnan(x):
        return hi if upper else lo
    q = torch.round(f32(x) / v.scale).item() + v.zero_point
    return int(min(max(q, lo), hi))


def requantize(acc: torch.Tensor, scale: torch.Tensor, out: Value, lo: int, hi: int) -> torch.Tensor:
    """An exact integer accumulator (float64) to `out`'s integers: float32(acc) * scale, rounded, clamped."""
    y = torch.round(acc.to(F32) * scale) + out.zero_point
    return torch.clamp(y, lo, hi).to(_int_dtype(out))


def dynamic_quantize(x: torch.Tensor, num_nonbatch_dims: int) -> tuple:
    """Per-row asymmetric int8 quantization of `x` (a row: its last num_nonbatch_dims dims), as XNNPACK's
    fp32 -> qdint8 convert: the row's range widened to hold 0, scale (max - min) / 255, a nudged zero point.
    Returns (int8 values, per-row scale, per-row zero point), the last two shaped to broadcast over x."""
    x = x.to(F32)
    batch = list(x.shape[:x.dim() - num_nonbatch_dims])
    shape = batch + [1] * num_nonbatch_dims
    if x.numel() == 0:
        ones = torch.ones(shape)
        return x.to(torch.int8), ones, torch.zeros_like(ones)
    rows = x.reshape(batch + [-1])
    rmin = torch.clamp(rows.amin(-1), max=0.0)
    rmax = torch.clamp(rows.amax(-1), min=0.0)
    inv = torch.where(rmin == rmax, f32(1.0), f32(255.0) / (rmax - rmin))
    lo_err, hi_err = -128.0 + rmin * inv, 127.0 + rmax * inv
    zp = torch.where(lo_err + hi_err > 0, -128.0 - rmin * inv, 127.0 - rmax * inv)
    zp = torch.round(torch.clamp(zp, -128.0, 127.0))
    inv, zp = inv.reshape(shape), zp.reshape(shape)
    q = torch.clamp(torch.round(x * inv) + zp, -128, 127).to(torch.int8)
    return q, f32(1.0) / inv, zp


def _int_dtype(v: Value) -> torch.dtype:
    return torch.uint8 if v.qrange[0] == 0 else (torch.int32 if v.qrange[1] > 255 else torch.int8)


def add_params(a: Value, b: Value, out: Value, b_sign: int = 1) -> tuple[int, int, int, int]:
    """XNNPACK's fixed-point QS8 add (subtract: b_sign -1): multipliers of 20 bits for the two input/output
    scale ratios, a shift, and a bias holding the zero points and the rounding (half up)."""
    ra = float(f32(float(a.scale)) / f32(float(out.scale)))
    rb = float(f32(float(b.scale)) / f32(float(out.scale))) * b_sign
    exponent = math.frexp(max(abs(ra), abs(rb)))[1] - 1
    shift = 20 - exponent
    if not 12 <= shift <= 30:
        raise ValueError(f"input/output scale ratio {max(abs(ra), abs(rb)):.3g} is outside what XNNPACK's "
                         "quantized add takes")
    ma, mb = int(round_half_even(math.ldexp(ra, shift))), int(round_half_even(math.ldexp(rb, shift)))
    bias = (1 << (shift - 1)) - ma * a.zero_point - mb * b.zero_point
    return ma, mb, shift, bias


def fixed_add(qa: torch.Tensor, qb: torch.Tensor, params: tuple, out: Value, lo: int, hi: int) -> torch.Tensor:
    ma, mb, shift, bias = params
    acc = qa.to(torch.int64) * ma + qb.to(torch.int64) * mb + bias
    y = torch.bitwise_right_shift(acc, shift)
    return torch.clamp(y, lo - out.zero_point, hi - out.zero_point).add_(out.zero_point).to(_int_dtype(out))


def round_half_even(x: float) -> float:
    return float(torch.round(torch.tensor(x, dtype=torch.float64)))
