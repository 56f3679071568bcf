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


def load_logged(data: bytes, capfd) -> tuple[object, str]:
    """`data`'s forward method loaded natively, and what the runtime logged while loading it."""
    from executorch.extension.pybindings import _portable_lib

    capfd.readouterr()
    _portable_lib.set_log_echo(True)
    try:
        method = _native.load_program(data, Verification.InternalConsistency).load_method("forward")
    finally:
        _portable_lib.set_log_echo(False)
    return method, capfd.readouterr().err
