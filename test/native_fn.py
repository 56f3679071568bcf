"""One-function programs for the native kernel tests: `fn` exported and loaded on the native runtime."""

import torch

from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import _native
from executorch.runtime._backend import Verification


class Fn(torch.nn.Module):
    def __init__(self, fn) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def native_method(fn, inputs: tuple):
    """`fn` exported with this project's exporter for `inputs`, loaded natively ("forward")."""
    pte = to_edge_transform_and_lower(torch.export.export(Fn(fn), inputs)).to_executorch().buffer
    return _native.load_program(pte, Verification.InternalConsistency).load_method("forward")
