"""The runtime layer's errors: every message names the thing, the cause and the fix."""

from __future__ import annotations

import os

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


class ProgramFileError(OSError, ExecuTorchError):
    """Raised when a `.pte` or `.ptd` path cannot be read; `errno` says why, `filename` names the path.

    It is also an OSError, and for a missing path a FileNotFoundError, for a directory an
    IsADirectoryError (`file_error` picks the class): what the runtime raised before it had this
    error, so `except FileNotFoundError` written against that still catches it, as `except
    ExecuTorchError` (or upstream's `except RuntimeError`) does.
    """

    def __str__(self) -> str:
        return str(self.strerror)  # the one-line message, without OSError's "[Errno N] ...: 'path'" around it


class ProgramFileNotFoundError(ProgramFileError, FileNotFoundError):
    """A ProgramFileError for a path that does not exist."""


class ProgramIsADirectoryError(ProgramFileError, IsADirectoryError):
    """A ProgramFileError for a path that names a directory."""


def file_error(e: OSError, path, what: str, fix: str) -> ProgramFileError:
    """The runtime's error for `e`, raised reading `path` (the `what` file: "program", "data"); `fix`
    says what to pass instead of a missing file or a directory."""
    shown = repr(os.fspath(path))
    if isinstance(e, FileNotFoundError):
        return ProgramFileNotFoundError(e.errno, f"{what} file {shown} does not exist; pass {fix}", os.fspath(path))
    if isinstance(e, IsADirectoryError):
        return ProgramIsADirectoryError(e.errno, f"{what} file {shown} is a directory; pass {fix}", os.fspath(path))
    return ProgramFileError(e.errno, f"cannot read {what} file {shown}: {e.strerror or e}; check the path and its "
                                     "permissions", os.fspath(path))
