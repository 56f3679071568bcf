"""Where the full wheel's C++ SDK is installed: `python -m executorch.sdk --cmake-prefix-path`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parent

# The prefix to give CMake (CMAKE_PREFIX_PATH) so that find_package(executorch) finds the SDK, as
# torch.utils.cmake_prefix_path does for torch.
cmake_prefix_path = str(_ROOT)
include_dir = str(_ROOT / "include")
lib_dir = str(_ROOT / "lib")
_CONFIG = _ROOT / "lib" / "cmake" / "executorch" / "executorch-config.cmake"


def installed() -> bool:
    """True when this executorch holds the C++ SDK (the full wheel does; the minimal wheel and a source tree do not)."""
    return _CONFIG.is_file()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m executorch.sdk", description=__doc__)
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--cmake-prefix-path", action="store_true", help="print the prefix for CMAKE_PREFIX_PATH")
    which.add_argument("--include-dir", action="store_true", help="print the directory holding executorch/...")
    which.add_argument("--lib-dir", action="store_true", help="print the directory holding the libraries")
    args = parser.parse_args(argv)
    if not installed():
        print(f"error: no C++ SDK under {_ROOT} ({_CONFIG.relative_to(_ROOT)} is missing): it ships in the full "
              "executorch wheel, not the minimal one or a source checkout; install the full wheel",
              file=sys.stderr)
        return 1
    print(cmake_prefix_path if args.cmake_prefix_path else include_dir if args.include_dir else lib_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
