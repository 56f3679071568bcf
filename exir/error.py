"""The export layer's errors: every message names the thing, the cause and the fix."""

from __future__ import annotations

from enum import Enum


class ExportErrorType(Enum):
    """Why an export failed, as ExecuTorch classifies it (`ExportError(ExportErrorType.X, message)`)."""

    INVALID_INPUT_TYPE = 1
    INVALID_OUTPUT_TYPE = 2
    VIOLATION_OF_SPEC = 3
    NOT_SUPPORTED = 4
    MISSING_PROPERTY = 5
    UNINITIALIZED = 6


class InternalError(Exception):
    """Raised when the exporter breaks one of its own invariants: a bug to report, not a user error."""


def internal_assert(pred: bool, message: str) -> None:
    """Raise InternalError(message) unless `pred` holds (ExecuTorch passes call it as an assert)."""
    if not pred:
        raise InternalError(message)


class ExportError(Exception):
    """Raised when a program cannot be lowered to a `.pte` (unsupported op, bad config, bad input).

    Takes a message, or an `ExportErrorType` and a message as ExecuTorch code raises it."""

    def __init__(self, *args) -> None:
        self.error_code = args[0] if args and isinstance(args[0], ExportErrorType) else None
        if self.error_code is not None:
            args = (f"[{self.error_code.name}]: {' '.join(str(a) for a in args[1:])}",)
        super().__init__(*args)


class SerializeError(Exception):
    """Raised when a `Program` cannot be written, or bytes cannot be read back as one."""
