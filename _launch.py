"""Console-script entry points that run the native tools shipped inside the package."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def _exec(tool: str) -> None:
    binary = Path(__file__).resolve().parent / "bin" / (tool + (".exe" if os.name == "nt" else ""))
    if not binary.is_file():
        sys.exit(
            f"{tool}: {binary} is missing from this install (only the full executorch wheel ships it); "
            f"install the full wheel or build the runner from source with CMake"
        )
    args = [str(binary), *sys.argv[1:]]
    if os.name == "nt":
        sys.exit(subprocess.call(args))
    os.execv(binary, args)


def executor_runner() -> None:
    """Run the packaged `executor_runner` binary with this process's arguments."""
    _exec("executor_runner")
