"""The runtime layer's errors: every message names the thing, the cause and the fix."""

from __future__ import annotations

from executorch.exir.error import SerializeError


class ExecuTorchError(RuntimeError):
    """Raised when a program cannot be loaded or a method cannot run."""


class InvalidProgramError(ExecuTorchError, SerializeError):
    """Raised when a program's contents are inconsistent (bad index, offset, size or kind).

    It is also a `SerializeError`, so `except SerializeError` catches every malformed file,
    whether the reader or the runtime's checks found the fault.
    """


class MethodNotFoundError(ExecuTorchError, KeyError):
    """Raised when a program has no method of the requested name.

    It is also a `KeyError`, which is what code written against the upstream API catches.
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""
