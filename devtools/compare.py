"""Compare a program's outputs with reference outputs: tolerances scaled to the reference, exact for integers.

Floating-point outputs pass when, element by element, |actual - expected| <= atol * scale + rtol * |expected|,
where `scale` is the largest finite |expected| in that output. Scaling the absolute term to the reference
means an output whose values are all around 1e-9 cannot pass as zeros, as it would under an absolute 1e-5.
NaN and infinities must sit in the same places. Integer and bool outputs must be equal. Counts, shapes and
dtypes must match. The reported error is max |actual - expected| / scale over all floating outputs.

This module needs only torch, so scripts may load it by path under another `executorch` install.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import torch
from torch.utils._pytree import tree_flatten

# (rtol, atol) per dtype; atol is relative to the output's largest |value|. float32 is looser than
# torch.testing's default because the runtimes accumulate convolutions and matmuls in another order.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (1.6e-2, 1e-2),
    torch.float32: (1e-5, 1e-5),
    torch.float64: (1e-7, 1e-7),
    torch.complex64: (1e-5, 1e-5),
    torch.complex128: (1e-7, 1e-7),
}


def tolerance(dtype: torch.dtype, ulps: Optional[float] = None) -> dict[str, float]:
    """The `rtol`/`atol` keyword arguments for outputs of a floating `dtype`: its TOLERANCES row, or,
    with `ulps`, at least that many units in the last place (`ulps * eps`) for both, for results
    that round to the dtype several times (a chain of 16-bit ops, an accumulation)."""
    rtol, atol = TOLERANCES[dtype]
    if ulps is not None:
        eps = torch.finfo(dtype).eps
        rtol, atol = max(rtol, ulps * eps), max(atol, ulps * eps)
    return {"rtol": rtol, "atol": atol}


@dataclass(frozen=True)
class Comparison:
    """The verdict on a list of outputs: how many, the worst relative error, and what did not match."""

    count: int
    max_rel_err: float
    mismatches: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def __str__(self) -> str:
        head = f"{self.count} output{'' if self.count == 1 else 's'}, max rel err {self.max_rel_err:.3g}"
        return head if self.ok else f"{head}; " + "; ".join(self.mismatches)


def compare_outputs(actual: Any, expected: Any, *, rtol: Optional[float] = None,
                    atol: Optional[float] = None) -> Comparison:
    """Compare `actual` with `expected` (tensors, scalars, or nested lists/tuples/dicts of them).

    `rtol`/`atol` override the per-dtype defaults in TOLERANCES for every floating output.
    """
    got, _ = tree_flatten(actual)
    want, _ = tree_flatten(expected)
    if len(got) != len(want):
        return Comparison(len(got), float("inf"), (f"{len(got)} outputs, expected {len(want)}",))
    worst = 0.0
    mismatches = []
    for i, (a, e) in enumerate(zip(got, want)):
        problem, err = _compare_one(a, e, rtol, atol)
        worst = max(worst, err)
        if problem:
            mismatches.append(f"output {i}: {problem}")
    return Comparison(len(got), worst, tuple(mismatches))


def assert_outputs_close(actual: Any, expected: Any, *, rtol: Optional[float] = None,
                         atol: Optional[float] = None) -> Comparison:
    """compare_outputs that raises AssertionError naming every mismatch; returns the comparison."""
    result = compare_outputs(actual, expected, rtol=rtol, atol=atol)
    if not result.ok:
        raise AssertionError(f"outputs differ from the reference: {result}")
    return result


def _compare_one(a: Any, e: Any, rtol: Optional[float], atol: Optional[float]) -> tuple[Optional[str], float]:
    if not isinstance(e, torch.Tensor):
        return _compare_scalar(a, e, rtol, atol)
    if not isinstance(a, torch.Tensor):
        return f"got {type(a).__name__}, expected a tensor {_describe(e)}", float("inf")
    if a.dtype != e.dtype or a.shape != e.shape:
        return f"got {_describe(a)}, expected {_describe(e)}", float("inf")
    a, e = a.detach().cpu(), e.detach().cpu()
    if not (e.dtype.is_floating_point or e.dtype.is_complex):
        if torch.equal(a, e):
            return None, 0.0
        return (f"{int((a != e).sum())} of {e.numel()} values differ (integer and bool outputs must be equal)",
                float("inf"))
    default_rtol, default_atol = TOLERANCES.get(e.dtype, TOLERANCES[torch.float32])
    return _compare_float(a, e, default_rtol if rtol is None else rtol, default_atol if atol is None else atol)


def _compare_float(a: torch.Tensor, e: torch.Tensor, rtol: float, atol: float) -> tuple[Optional[str], float]:
    if e.numel() == 0:
        return None, 0.0
    a64 = a.to(torch.complex128 if e.dtype.is_complex else torch.float64)
    e64 = e.to(a64.dtype)
    finite = torch.isfinite(e64)
    # Non-finite references must be reproduced exactly (NaN where NaN, the same infinity).
    special_ok = torch.equal(torch.isnan(a64), torch.isnan(e64)) and \
        torch.equal(a64[torch.isinf(e64)], e64[torch.isinf(e64)])
    if not bool(finite.any()):
        return (None if special_ok else "NaN or infinity where the reference has none, or the reverse"), 0.0
    scale = float(e64[finite].abs().max())
    diff = (a64 - e64).abs()
    diff = torch.where(finite, diff, torch.zeros_like(diff))
    diff = torch.where(torch.isnan(diff), torch.full_like(diff, float("inf")), diff)
    if scale == 0.0:
        err = 0.0 if float(diff.max()) == 0.0 else float("inf")
    else:
        err = float(diff.max()) / scale
    allowed = atol * scale + rtol * e64.abs()
    bad = int((finite & (diff > allowed)).sum())
    if bad:
        where = int(diff.argmax())
        return (f"{bad} of {e.numel()} values beyond tolerance (rtol {rtol:g}, atol {atol:g} x max|ref| {scale:.3g}); "
                f"worst at flat index {where}: {a.reshape(-1)[where].item():.6g} "
                f"vs {e.reshape(-1)[where].item():.6g}"), err
    if not special_ok:
        return "NaN or infinity where the reference has none, or the reverse", err
    return None, err


def _compare_scalar(a: Any, e: Any, rtol: Optional[float], atol: Optional[float]) -> tuple[Optional[str], float]:
    if isinstance(e, (bool, int)) or e is None or isinstance(e, str):
        # bool is an int subclass: True must not pass for 1, so the types must agree too.
        return (None if type(a) is type(e) and a == e else f"got {a!r}, expected {e!r}"), 0.0
    if isinstance(e, float):
        if not isinstance(a, (float, int)) or isinstance(a, bool):
            return f"got {a!r}, expected the float {e!r}", float("inf")
        return _compare_float(torch.tensor([float(a)], dtype=torch.float64), torch.tensor([e], dtype=torch.float64),
                              TOLERANCES[torch.float32][0] if rtol is None else rtol,
                              TOLERANCES[torch.float32][1] if atol is None else atol)
    return (None if a == e else f"got {a!r}, expected {e!r}"), 0.0


def _describe(t: torch.Tensor) -> str:
    return f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)}"
