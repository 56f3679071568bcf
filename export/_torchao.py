"""The one check that torchao, which quantization needs, is installed."""

from __future__ import annotations

import importlib.util

TORCHAO_PIN = "torchao==0.18.0"


def require_torchao(what: str) -> None:
    """Raise naming the package to install when torchao is missing."""
    if importlib.util.find_spec("torchao") is None:
        raise ModuleNotFoundError(
            f"{what} needs the torchao package, which is not installed; pip install {TORCHAO_PIN}",
            name="torchao")
