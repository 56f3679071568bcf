"""The export layer's errors: every message names the thing, the cause and the fix."""

from __future__ import annotations


class ExportError(Exception):
    """Raised when a program cannot be lowered to a `.pte` (unsupported op, bad config, bad input)."""


class SerializeError(Exception):
    """Raised when a `Program` cannot be written, or bytes cannot be read back as one."""
