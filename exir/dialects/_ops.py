"""ExecuTorch-only operators (`dim_order_ops::*`), registered with torch so graphs can hold them.

The runtime names memory layout by dim order rather than by memory format, so the edge
dialect replaces `clone` and `_to_copy` with these variants that carry an explicit dim order.
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch

_NAMESPACE = "dim_order_ops"
_SCHEMAS = {
    "_to_dim_order_copy": "(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
    "bool? pin_memory=None, bool non_blocking=False, int[]? dim_order=None) -> Tensor",
    "_to_dim_order_copy.out": "(Tensor self, *, bool non_blocking=False, int[]? dim_order=None, "
    "Tensor(a!) out) -> Tensor(a!)",
    "_clone_dim_order": "(Tensor self, *, bool non_blocking=False, int[]? dim_order=None) -> Tensor",
    "_clone_dim_order.out": "(Tensor self, *, bool non_blocking=False, int[]? dim_order=None, "
    "Tensor(a!) out) -> Tensor(a!)",
}


def memory_format_for(dim_order: Optional[Sequence[int]], ndim: int) -> torch.memory_format:
    """The torch memory format a dim order stands for (contiguous or channels-last only)."""
    if dim_order is None or list(dim_order) == list(range(ndim)):
        return torch.contiguous_format
    if ndim == 4 and list(dim_order) == [0, 2, 3, 1]:
        return torch.channels_last
    if ndim == 5 and list(dim_order) == [0, 2, 3, 4, 1]:
        return torch.channels_last_3d
    raise ValueError(f"dim order {list(dim_order)} has no torch memory format; use a contiguous or channels-last order")


def dim_order_for(t: torch.Tensor, memory_format: Optional[torch.memory_format] = None) -> list[int]:
    """The dim order of `t`, or of a tensor of its rank laid out in `memory_format`."""
    if memory_format in (None, torch.preserve_format):
        return _order_of(t)
    if memory_format == torch.channels_last and t.dim() == 4:
        return [0, 2, 3, 1]
    if memory_format == torch.channels_last_3d and t.dim() == 5:
        return [0, 2, 3, 4, 1]
    return list(range(t.dim()))


def _order_of(t: torch.Tensor) -> list[int]:
    # Outermost first: sort by stride descending; ties keep the natural order (size-1 dims).
    return sorted(range(t.dim()), key=lambda d: (-t.stride()[d], d))


def _to_dim_order_copy(self, *, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False,
                       dim_order=None):
    fmt = memory_format_for(dim_order, self.dim())
    return torch.ops.aten._to_copy.default(
        self, dtype=dtype, layout=layout, device=device, pin_memory=pin_memory,
        non_blocking=non_blocking, memory_format=fmt,
    )


def _to_dim_order_copy_out(self, *, non_blocking=False, dim_order=None, out):
    out.copy_(self.to(memory_format=memory_format_for(dim_order, self.dim())))
    return out


def _clone_dim_order(self, *, non_blocking=False, dim_order=None):
    return torch.ops.aten.clone.default(self, memory_format=memory_format_for(dim_order, self.dim()))


def _clone_dim_order_out(self, *, non_blocking=False, dim_order=None, out):
    out.copy_(self)
    return out


_IMPLS = {
    "_to_dim_order_copy": _to_dim_order_copy,
    "_to_dim_order_copy.out": _to_dim_order_copy_out,
    "_clone_dim_order": _clone_dim_order,
    "_clone_dim_order.out": _clone_dim_order_out,
}


def _register() -> None:
    if hasattr(torch.ops, _NAMESPACE) and hasattr(getattr(torch.ops, _NAMESPACE), "_clone_dim_order"):
        return  # registered already (by us on re-import, or by another ExecuTorch install)
    lib = torch.library.Library(_NAMESPACE, "FRAGMENT")
    for name, schema in _SCHEMAS.items():
        base, _, overload = name.partition(".")
        lib.define(f"{base}{'.' + overload if overload else ''}{schema}")
        lib.impl(name, _IMPLS[name], "CompositeExplicitAutograd")
    _LIBS.append(lib)


_LIBS: list = []  # keeps the Library objects alive; dropping them would unregister the ops
_register()

# `from executorch.exir.dialects._ops import ops as exir_ops`, as ExecuTorch code imports it.
from executorch.exir.dialects._edge_namespace import ops  # noqa: E402,F401  (re-exported at upstream's path)
from executorch.exir.dialects.backend._ops import _BACKEND_OP_LIB  # noqa: E402,F401  (Arm's TOSA library appends to it)
