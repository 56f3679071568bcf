"""Checks a method's inputs against its metadata, so every backend rejects bad inputs alike."""

from __future__ import annotations

from typing import Callable, Optional

import torch

from executorch.runtime import _layout
from executorch.runtime._errors import ExecuTorchError
from executorch.runtime._meta import MethodMeta, TensorInfo

_STATIC, _BOUND = 0, 1


def input_checker(meta: MethodMeta) -> Callable[[list], None]:
    """A function that raises ExecuTorchError naming the first input that does not fit `meta`."""
    method = meta.name()
    infos: list[Optional[TensorInfo]] = list(meta._inputs)

    def check(inputs: list) -> None:
        if len(inputs) != len(infos):
            raise ExecuTorchError(f"method {method!r} takes {len(infos)} inputs, got {len(inputs)}")
        for pos, (info, value) in enumerate(zip(infos, inputs)):
            if info is not None:
                _check_tensor(method, pos, info, value)

    return check


def _check_tensor(method: str, pos: int, info: TensorInfo, value: object) -> None:
    where = f"input {pos} of method {method!r}"
    dtype = _layout.to_dtype(info.dtype())
    want = str(dtype) if dtype is not None else _layout.dtype_name(info.dtype())
    if not isinstance(value, torch.Tensor):
        raise ExecuTorchError(f"{where} must be a tensor ({want}, shape {list(info.sizes())}), "
                              f"got {type(value).__name__}")
    if value.layout is not torch.strided:
        raise ExecuTorchError(f"{where} is a {value.layout} tensor; the runtime reads dense tensors: pass "
                              f"x.to_dense()")
    if _layout.dtype_code(value.dtype) != info.dtype():
        raise ExecuTorchError(f"{where} must have dtype {want}, got {value.dtype}; convert it with .to({want})")
    if value.dtype == torch.bool and value.numel():
        # A bool tensor made by reinterpreting other bytes can hold values no kernel may read as bool.
        worst = int(value.contiguous().view(torch.uint8).max())
        if worst > 1:
            raise ExecuTorchError(f"{where}: bool data holds byte {worst}; bools must be 0 or 1")
    shape, bound = tuple(value.shape), info.sizes()
    if shape == bound:
        return
    dynamism = info.shape_dynamism()
    if dynamism == _STATIC:
        raise ExecuTorchError(f"{where} must have shape {list(bound)}, got {list(shape)} (the shape is static)")
    if len(shape) != len(bound):
        raise ExecuTorchError(f"{where} must have {len(bound)} dimensions, got shape {list(shape)}")
    if dynamism == _BOUND:
        # The program's sizes are the per-dimension maxima the exporter planned memory for.
        over = [d for d, (got, most) in enumerate(zip(shape, bound)) if got > most]
        if over:
            raise ExecuTorchError(
                f"{where} has shape {list(shape)}, past its upper bound {list(bound)} in dim {over[0]}; "
                f"re-export with larger Dim bounds")
