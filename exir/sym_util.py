"""Concrete values of symbolic sizes: the example (hint) value and the upper bound export allows.

`eval_shape(t.shape)` gives the shape a graph was traced with (None for a size no hint decides, as an
unbacked size from `nonzero`); `eval_shape_upper_bound(t.shape)` the largest shape memory is planned
for. Names as ExecuTorch's `exir.sym_util`, which vendor passes import.
"""

from __future__ import annotations

from typing import Iterable, Optional, Union

import torch

from executorch.exir.tensor import shape_upper_bound

__all__ = ["collect_free_symbols", "eval_expr", "eval_shape", "eval_shape_upper_bound", "eval_upper_bound"]

Size = Union[int, torch.SymInt]


def eval_expr(size: Size) -> Optional[int]:
    """The size's value in the example the graph was traced with, or None if no hint decides it."""
    if isinstance(size, int):
        return size
    node = size.node
    env = node.shape_env
    try:
        hint = (env.guarding_hint_or_throw(node.expr) if hasattr(env, "guarding_hint_or_throw")
                else env.size_hint(node.expr))
    except torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode:
        return None
    return None if hint is None else int(hint)


def eval_upper_bound(size: Size) -> int:
    """The largest value the size may take under the export constraints; a size without a finite
    bound gives its traced value, or a RuntimeError when it has none either."""
    bound = shape_upper_bound(size)
    if bound is not None:
        return bound
    hint = eval_expr(size)
    if hint is None:
        raise RuntimeError(f"size {size} has no finite upper bound and no traced value; give its dimension a "
                           "maximum, e.g. torch.export.Dim('n', max=1024)")
    return hint


def eval_shape(shape: Iterable[Size]) -> list[Optional[int]]:
    """Each size's traced value (None where no hint decides it), as a new list."""
    return [eval_expr(s) for s in shape]


def eval_shape_upper_bound(shape: Iterable[Size]) -> list[int]:
    """Each size's upper bound, as a new list."""
    return [eval_upper_bound(s) for s in shape]


def collect_free_symbols(shape: Iterable[Size]) -> set:
    """The sympy symbols the symbolic sizes of `shape` are expressions of."""
    found: set = set()
    for s in shape:
        if isinstance(s, torch.SymInt):
            found.update(s.node.expr.free_symbols)
    return found
