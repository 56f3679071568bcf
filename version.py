"""The package version: the published ExecuTorch release whose Python API this package implements."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path
from typing import Optional

__all__ = ["__version__", "git_version"]


def _version() -> str:
    # A source checkout reads version.txt (the one home of the number); a wheel has no such file
    # and reads the number the wheel was built with from its metadata.
    source = Path(__file__).with_name("version.txt")
    if source.is_file():
        return source.read_text().strip()
    return metadata.version("executorch")


__version__: str = _version()
git_version: Optional[str] = None
