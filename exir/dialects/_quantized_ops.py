"""The out variants of pt2e's `quantized_decomposed` quantize/dequantize ops, and ExecuTorch's quantized
embeddings (`embedding_byte`, `embedding_2bit`, `embedding_4bit`; each `.dtype`, `.out`, `.dtype_out`), registered
with torch.

torch (or torchao) defines the functional ops that pt2e graphs hold; a `.pte` calls their out
variants, which only ExecuTorch defines. The schemas are ExecuTorch's, so files name the same
operators as the published exporter's; the Python implementations follow torch's reference
formulas step for step, so the Python runtime reproduces the converted module in eager.
"""

from __future__ import annotations

from typing import Optional

import torch

NAMESPACE = "quantized_decomposed"

_SCHEMAS = {
    "quantize_per_tensor.out": "(Tensor input, float scale, int zero_point, int quant_min, int quant_max, "
    "ScalarType dtype, *, Tensor(a!) out) -> Tensor(a!)",
    "quantize_per_tensor.Tensor_out": "(Tensor input, Tensor scale, Tensor zero_point, int quant_min, int quant_max, "
    "ScalarType dtype, *, Tensor(a!) out) -> Tensor(a!)",
    "dequantize_per_tensor.out": "(Tensor input, float scale, int zero_point, int quant_min, int quant_max, "
    "ScalarType dtype, *, ScalarType? out_dtype=None, Tensor(a!) out) -> Tensor(a!)",
    "dequantize_per_tensor.Tensor_out": "(Tensor input, Tensor scale, Tensor zero_point, int quant_min, "
    "int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None, Tensor(a!) out) -> Tensor(a!)",
    "quantize_per_channel.out": "(Tensor input, Tensor scales, Tensor zero_points, int axis, int quant_min, "
    "int quant_max, ScalarType dtype, *, Tensor(a!) out) -> Tensor(a!)",
    "dequantize_per_channel.out": "(Tensor input, Tensor scales, Tensor? zero_points, int axis, int quant_min, "
    "int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None, Tensor(a!) out) -> Tensor(a!)",
    "choose_qparams.Tensor_out": "(Tensor input, int quant_min, int quant_max, float eps, ScalarType dtype, *, "
    "Tensor(a!) scale_out, Tensor(b!) zero_point_out) -> (Tensor(a!), Tensor(b!))",
}

# The functional pt2e ops a `.pte` may call through the out variants above.
FUNCTIONAL_OPS = ("quantize_per_tensor.default", "quantize_per_tensor.tensor", "dequantize_per_tensor.default",
                  "dequantize_per_tensor.tensor", "quantize_per_channel.default", "dequantize_per_channel.default",
                  "choose_qparams.tensor")


def _check_dtype(name: str, dtype: torch.dtype, quant_min: int, quant_max: int) -> None:
    info = torch.iinfo(dtype) if not dtype.is_floating_point else None
    if info is None or quant_min < info.min or quant_max > info.max or quant_min > quant_max:
        raise ValueError(f"{name}: quant range [{quant_min}, {quant_max}] does not fit {dtype}")


def _write(out: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    out.resize_(value.shape)
    out.copy_(value)
    return out


def _quantize(x: torch.Tensor, inv_scale, zero_point, quant_min: int, quant_max: int, dtype) -> torch.Tensor:
    # torch's reference: multiply by the reciprocal, round half to even, shift, clamp, cast.
    if x.dtype in (torch.float16, torch.bfloat16):
        x = x.to(torch.float32)
    return torch.clamp(torch.round(x * inv_scale) + zero_point, quant_min, quant_max).to(dtype)


def quantize_per_tensor_out(input, scale, zero_point, quant_min, quant_max, dtype, *, out):
    _check_dtype("quantize_per_tensor", dtype, quant_min, quant_max)
    return _write(out, _quantize(input, 1.0 / scale, zero_point, quant_min, quant_max, dtype))


def quantize_per_tensor_tensor_out(input, scale, zero_point, quant_min, quant_max, dtype, *, out):
    return quantize_per_tensor_out(input, float(scale.item()), int(zero_point.item()), quant_min, quant_max, dtype,
                                   out=out)


def dequantize_per_tensor_out(input, scale, zero_point, quant_min, quant_max, dtype, *, out_dtype=None, out):
    if input.dtype != dtype:
        raise ValueError(f"dequantize_per_tensor: input is {input.dtype}, the op says {dtype}")
    return _write(out, (input.to(out_dtype or torch.float32) - zero_point) * scale)


def dequantize_per_tensor_tensor_out(input, scale, zero_point, quant_min, quant_max, dtype, *, out_dtype=None, out):
    return dequantize_per_tensor_out(input, float(scale.item()), int(zero_point.item()), quant_min, quant_max, dtype,
                                     out_dtype=out_dtype, out=out)


def _along(t: torch.Tensor, axis: int, ndim: int) -> torch.Tensor:
    shape = [1] * ndim
    shape[axis] = t.numel()
    return t.reshape(shape)


def quantize_per_channel_out(input, scales, zero_points, axis, quant_min, quant_max, dtype, *, out):
    _check_dtype("quantize_per_channel", dtype, quant_min, quant_max)
    axis = axis % input.dim()
    if scales.numel() != input.shape[axis]:
        raise ValueError(f"quantize_per_channel: {scales.numel()} scales for {input.shape[axis]} channels")
    inv = 1.0 / _along(scales, axis, input.dim())
    return _write(out, _quantize(input, inv, _along(zero_points, axis, input.dim()), quant_min, quant_max, dtype))


def dequantize_per_channel_out(input, scales, zero_points, axis, quant_min, quant_max, dtype, *, out_dtype=None, out):
    if input.dtype != dtype:
        raise ValueError(f"dequantize_per_channel: input is {input.dtype}, the op says {dtype}")
    axis = axis % input.dim()
    if scales.numel() != input.shape[axis]:
        raise ValueError(f"dequantize_per_channel: {scales.numel()} scales for {input.shape[axis]} channels")
    # torch's reference: integer difference, times the scales in their own dtype, then the cast.
    value = input.to(torch.int64) - _along(zero_points, axis, input.dim()) if zero_points is not None else input
    return _write(out, (value * _along(scales, axis, input.dim())).to(out_dtype or torch.float32))


def choose_qparams_tensor_out(input, quant_min, quant_max, eps, dtype, *, scale_out, zero_point_out):
    """A dynamic quantization's parameters: the input's range widened to hold 0, spread over the
    quantized range (at least `eps`), and the zero point that maps the range's low end to quant_min."""
    _check_dtype("choose_qparams", dtype, quant_min, quant_max)
    if input.dtype not in (torch.float32, torch.float16, torch.bfloat16) or input.numel() == 0:
        raise ValueError(f"choose_qparams: input is a {input.dtype} tensor of {input.numel()} elements; it takes "
                         "a non-empty float one")
    # torch's reference (determine_qparams, per tensor affine), operation for operation in the input's dtype.
    lo, hi = torch.aminmax(input)
    lo, hi = torch.clamp(lo, max=0), torch.clamp(hi, min=0)
    scale = torch.max((hi - lo) / float(quant_max - quant_min), torch.tensor([eps], dtype=torch.float32))
    zero_point = torch.clamp(quant_min - torch.round(lo / scale).to(torch.int), quant_min, quant_max)
    _write(scale_out, scale.to(torch.float64))
    _write(zero_point_out, zero_point.to(torch.int64))
    return scale_out, zero_point_out


_IMPLS = {
    "quantize_per_tensor.out": quantize_per_tensor_out,
    "quantize_per_tensor.Tensor_out": quantize_per_tensor_tensor_out,
    "dequantize_per_tensor.out": dequantize_per_tensor_out,
    "dequantize_per_tensor.Tensor_out": dequantize_per_tensor_tensor_out,
    "quantize_per_channel.out": quantize_per_channel_out,
    "dequantize_per_channel.out": dequantize_per_channel_out,
    "choose_qparams.Tensor_out": choose_qparams_tensor_out,
}


_EMBEDDING_ARGS = ("(Tensor weight, Tensor weight_scales, Tensor? weight_zero_points, int weight_quant_min, "
                   "int weight_quant_max, Tensor indices")
_EMBEDDING_BITS = {"embedding_byte": 8, "embedding_2bit": 2, "embedding_4bit": 4}


def _embedding(bits: int, weight, scales, zero_points, quant_min, quant_max, indices, dtype=None):
    """Rows of `weight` (`8 // bits` values a byte, the first in the high bits for 4-bit, the low for 2-bit,
    stored offset by 2**(bits-1)) dequantized per row or per group of columns (2-D scales), then looked up."""
    if weight.dtype not in (torch.int8, torch.uint8) or weight.dim() != 2 or scales.dim() not in (1, 2) \
            or scales.size(0) != weight.size(0):
        raise ValueError(f"embedding: weight {weight.dtype} {list(weight.shape)} with scales {list(scales.shape)}; "
                         "it takes a 2-D int8/uint8 weight and one row of scales per weight row")
    if bits < 8:
        shifts = (4, 0) if bits == 4 else (0, 2, 4, 6)
        parts = [(weight.to(torch.uint8) >> s) & ((1 << bits) - 1) for s in shifts]
        weight = torch.stack(parts, dim=-1).view(weight.size(0), -1).to(torch.int8) - (1 << (bits - 1))
    groups = scales.size(1) if scales.dim() == 2 else 1
    from torch.ao.quantization.fx import _decomposed  # noqa: F401  (defines dequantize_per_channel_group)

    table = torch.ops.quantized_decomposed.dequantize_per_channel_group(
        weight, scales, zero_points, quant_min, quant_max, weight.dtype, weight.size(1) // groups,
        dtype or scales.dtype)
    return torch.nn.functional.embedding(indices, table)


def _embedding_impls(name: str, bits: int) -> dict:
    def functional(*args, dtype=None):
        return _embedding(bits, *args, dtype=dtype)

    def out_variant(*args, dtype=None, out):
        return _write(out, _embedding(bits, *args, dtype=dtype))

    return {name: functional, f"{name}.dtype": functional, f"{name}.out": out_variant,
            f"{name}.dtype_out": out_variant}


_EMBEDDING_TAILS = {"": ") -> Tensor", ".dtype": ", *, ScalarType? dtype=None) -> Tensor",
                    ".out": ", *, Tensor(a!) out) -> Tensor(a!)",
                    ".dtype_out": ", *, ScalarType? dtype=None, Tensor(a!) out) -> Tensor(a!)"}
for _name, _bits in _EMBEDDING_BITS.items():
    _SCHEMAS.update({_name + overload: _EMBEDDING_ARGS + tail for overload, tail in _EMBEDDING_TAILS.items()})
    _IMPLS.update(_embedding_impls(_name, _bits))


def _defined(name: str) -> Optional[torch._ops.OpOverload]:
    base, _, overload = name.partition(".")
    try:
        return getattr(getattr(getattr(torch.ops, NAMESPACE), base), overload or "default")
    except (AttributeError, RuntimeError):
        return None


def register() -> None:
    """Define the out variants unless another library (published ExecuTorch's) already has."""
    if _LIBS:
        return
    lib = torch.library.Library(NAMESPACE, "FRAGMENT")
    for name, schema in _SCHEMAS.items():
        if _defined(name) is not None:
            continue
        lib.define(f"{name}{schema}")
        lib.impl(name, _IMPLS[name], "CompositeExplicitAutograd")
    _LIBS.append(lib)


_LIBS: list = []  # keeps the Library alive; dropping it would unregister the ops
register()
