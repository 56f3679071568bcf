"""Check, cheaply and once, that the installed PyTorch can run the export path; say what to install if not."""

from __future__ import annotations

import re

MINIMUM = (2, 13)
_INSTALL = (
    "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu "
    "(the CPU build is enough for export; any torch>={}.{} works)"
).format(*MINIMUM)


def _parse(version: str) -> tuple[int, int] | None:
    found = re.match(r"(\d+)\.(\d+)", version)
    return (int(found[1]), int(found[2])) if found else None


def require_torch() -> None:
    """Raise ImportError naming the torch to install when torch is missing or older than MINIMUM."""
    try:
        import torch
    except ImportError as err:
        raise ImportError(
            f"executorch.exir needs PyTorch, which is not importable ({err}); the executorch wheel "
            f"does not install it so that you choose the build: {_INSTALL}"
        ) from err
    version = getattr(torch, "__version__", "")
    found = _parse(str(version))
    if found is None or found < MINIMUM:
        raise ImportError(
            f"executorch.exir needs torch>={MINIMUM[0]}.{MINIMUM[1]} but found torch {version or '(unknown version)'} "
            f"at {getattr(torch, '__file__', '?')}: {_INSTALL}"
        )
