"""`executorch_call_delegate`: the graph operator that stands for one lowered partition."""

from __future__ import annotations

import torch
from torch._ops import HigherOrderOperator


class _CallDelegate(HigherOrderOperator):
    def __init__(self) -> None:
        super().__init__("executorch_call_delegate")

    def __call__(self, lowered_module, *args):
        return super().__call__(lowered_module, *args)


executorch_call_delegate = _CallDelegate()


def _run_original(lowered_module, *args):
    # Eager calls (ep.module()(x) after lowering) run the partition's own graph, so a lowered
    # program still computes what it did before delegation.
    return lowered_module.original_module.module()(*args)


for _key in (torch._C.DispatchKey.CompositeExplicitAutograd, torch._C.DispatchKey.Autograd):
    executorch_call_delegate.py_impl(_key)(_run_original)


def get_lowered_module_name(root: torch.nn.Module, lowered_module) -> str:
    """A free attribute name on `root` for `lowered_module` (lowered_module_0, _1, ...)."""
    i = 0
    while hasattr(root, f"lowered_module_{i}"):
        i += 1
    name = f"lowered_module_{i}"
    root.add_module(name, lowered_module)
    return name
