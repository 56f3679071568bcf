"""ExecuTorch's own operators, which torch does not have: dim-order copies, views and scalar arithmetic.

Each kernel takes the instruction's arguments in program order. `SCALAR_KERNELS` compute a
value for the instruction's last argument (the runtime stores it there); `TENSOR_KERNELS`
write into their tensor arguments and return nothing.
"""

from __future__ import annotations

import math
from typing import Callable, Optional, Sequence

import torch

from executorch.exir.tensor import stride_from_dim_order
from executorch.runtime import _layout


def resize(t: torch.Tensor, sizes: Sequence[int], dim_order: Optional[Sequence[int]] = None) -> None:
    """Give `t` shape `sizes` inside its own storage, laid out in `dim_order` (default: t's own)."""
    sizes = tuple(sizes)
    if tuple(t.shape) == sizes and dim_order is None:
        return
    if dim_order is None:
        dim_order = _layout.dim_order_of(t) if t.dim() == len(sizes) else range(len(sizes))
    t.set_(t.untyped_storage(), t.storage_offset(), sizes, stride_from_dim_order(sizes, list(dim_order)))


def _copy_in_dim_order(src: torch.Tensor, non_blocking: bool, dim_order: Optional[list], out: torch.Tensor,
                       _ret: object = None) -> None:
    resize(out, src.shape, dim_order)
    out.copy_(src)


def _empty_dim_order(size: list, dim_order: Optional[list], out: torch.Tensor, _ret: object = None) -> None:
    resize(out, size, dim_order)


def _et_view(src: torch.Tensor, size: list, out: torch.Tensor) -> None:
    if src.dtype != out.dtype:
        raise TypeError(f"et_view: view of a {src.dtype} tensor as {out.dtype}")
    if len(size) != out.dim():
        raise ValueError(f"et_view: {len(size)} sizes for a {out.dim()}-dim output")
    target = list(size)
    if target.count(-1) > 1 or any(s < -1 for s in target):
        raise ValueError(f"et_view: invalid view sizes {target}")
    if -1 in target:
        known = math.prod(s for s in target if s != -1)
        target[target.index(-1)] = src.numel() // known if known else 0
    if math.prod(target) != src.numel():
        raise ValueError(f"et_view: cannot view {src.numel()} elements as {target}")
    out.set_(src.untyped_storage(), src.storage_offset(), target, stride_from_dim_order(target, range(len(target))))


def _et_copy_index(copy_to: torch.Tensor, copy_from: torch.Tensor, index: int) -> None:
    if index < 0:
        raise ValueError(f"et_copy_index: index {index} is negative")
    if copy_to.dim() != copy_from.dim() + 1 or tuple(copy_to.shape[1:]) != tuple(copy_from.shape):
        raise ValueError(f"et_copy_index: cannot place a {list(copy_from.shape)} slice in {list(copy_to.shape)}")
    resize(copy_to, (index + 1, *copy_from.shape))
    copy_to[index].copy_(copy_from)


def _c_div(a: int, b: int) -> int:
    if b == 0:
        raise ZeroDivisionError("integer division by zero")
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _floordiv(a, b):
    if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool) and not isinstance(b, bool):
        if b == 0:
            raise ZeroDivisionError("integer division by zero")
        return a // b
    a, b = float(a), float(b)
    if b == 0:
        return math.copysign(math.inf, a)
    return a // b


def _truediv(a, b) -> float:
    a, b = float(a), float(b)
    if b == 0:
        return math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _int_only(name: str, fn: Callable[[int, int], object]) -> Callable[[int, int], object]:
    def kernel(a, b):
        if type(a) is not int or type(b) is not int:
            raise TypeError(f"{name} takes two ints, got {type(a).__name__} and {type(b).__name__}")
        return fn(a, b)
    return kernel


def _from_double(name: str, fn: Callable[[float], int]) -> Callable[[float], int]:
    def kernel(a):
        if type(a) is not float:
            raise TypeError(f"{name} takes a float, got {type(a).__name__}")
        return fn(a)
    return kernel


def _local_scalar_dense(t: torch.Tensor):
    if t.numel() < 1:
        raise ValueError("_local_scalar_dense: the tensor is empty")
    return t.reshape(-1)[0].item()


SCALAR_KERNELS: dict[str, Callable] = {
    "aten::sym_size.int": lambda t, dim: int(t.size(dim)),
    "aten::sym_stride.int": lambda t, dim: int(t.stride(dim)),
    "aten::sym_numel": lambda t: int(t.numel()),
    "aten::_local_scalar_dense": _local_scalar_dense,
    "executorch_prim::sym_max.Scalar": _int_only("sym_max", max),
    "executorch_prim::sym_min.Scalar": _int_only("sym_min", min),
    "executorch_prim::add.Scalar": lambda a, b: a + b,
    "executorch_prim::sub.Scalar": lambda a, b: a - b,
    "executorch_prim::mul.Scalar": lambda a, b: a * b,
    "executorch_prim::floordiv.Scalar": _floordiv,
    "executorch_prim::truediv.Scalar": _truediv,
    "executorch_prim::sym_float.Scalar": float,
    "executorch_prim::sym_int.Scalar": int,
    "executorch_prim::eq.Scalar": lambda a, b: a == b,
    "executorch_prim::gt.Scalar": lambda a, b: a > b,
    "executorch_prim::lt.Scalar": lambda a, b: a < b,
    "executorch_prim::ge.Scalar": lambda a, b: a >= b,
    "executorch_prim::le.Scalar": lambda a, b: a <= b,
    "executorch_prim::neg.Scalar": lambda a: -a,
    "executorch_prim::sym_not.Scalar": lambda a: not a,
    "executorch_prim::sym_ite.Scalar": lambda cond, a, b: a if cond else b,
    "executorch_prim::floordiv.int": _int_only("floordiv.int", _c_div),
    "executorch_prim::mod.int": _int_only("mod.int", lambda a, b: a - b * _c_div(a, b)),
    "executorch_prim::mod.Scalar": _int_only("mod.Scalar", lambda a, b: a - b * _c_div(a, b)),
    "executorch_prim::ceil.Scalar": _from_double("ceil", math.ceil),
    "executorch_prim::round.Scalar": _from_double("round", round),
    "executorch_prim::trunc.Scalar": _from_double("trunc", math.trunc),
}

# name -> (kernel, number of arguments the instruction passes, positions of the tensors it writes)
TENSOR_KERNELS: dict[str, tuple[Callable, int, tuple[int, ...]]] = {
    "dim_order_ops::_clone_dim_order.out": (_copy_in_dim_order, 5, (3, 4)),
    "dim_order_ops::_to_dim_order_copy.out": (_copy_in_dim_order, 5, (3, 4)),
    "dim_order_ops::_empty_dim_order.out": (_empty_dim_order, 4, (2, 3)),
    "executorch_prim::et_view": (_et_view, 3, (2,)),
    "executorch_prim::et_copy_index.tensor": (_et_copy_index, 3, (0,)),
}

# Host/device transfers (name -> whether it copies to the device): run through the device's
# allocator (executorch.runtime.device), bound by _ops with the tensors' placement.
DEVICE_COPIES: dict[str, bool] = {"et_copy::_h2d_copy.out": True, "et_copy::_d2h_copy.out": False}
