"""Check cheaply, without importing torch, that the installed PyTorch can run the export path."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

MINIMUM = (2, 13)
# The torch the project is tested with: requirements-torch.txt in the source tree (not in the wheel;
# test/test_facts_agree.py checks the two agree).
TESTED = "torch==2.13.0"
_INSTALL = f"pip install {TESTED} (a CPU build is enough for export; any torch>={MINIMUM[0]}.{MINIMUM[1]} works)"
_VERSION_LINE = re.compile(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", re.MULTILINE)


def installed_torch_version() -> str | None:
    """The version of the torch that `import torch` would load, '' if unknown, None if there is none."""
    loaded = sys.modules.get("torch")
    if loaded is not None:
        return str(getattr(loaded, "__version__", ""))
    spec = importlib.util.find_spec("torch")
    if spec is None:
        return None
    # Reading torch/version.py costs a file read; importing torch costs seconds.
    for location in spec.submodule_search_locations or ():
        version_file = Path(location) / "version.py"
        if version_file.is_file():
            found = _VERSION_LINE.search(version_file.read_text(errors="replace"))
            if found:
                return found[1]
    return ""


def require_torch() -> None:
    """Raise ImportError naming the torch to install when torch is missing or older than MINIMUM."""
    version = installed_torch_version()
    if version is None:
        raise ImportError(
            f"executorch.exir needs PyTorch, which is not installed in {sys.prefix}; the executorch "
            f"wheel leaves the choice of torch build to you: {_INSTALL}"
        )
    found = re.match(r"(\d+)\.(\d+)", version)
    # A torch whose version cannot be read (a source build, say) gets the benefit of the doubt.
    if found and (int(found[1]), int(found[2])) < MINIMUM:
        raise ImportError(f"executorch.exir needs torch>={MINIMUM[0]}.{MINIMUM[1]} "
                          f"but torch {version} is installed: {_INSTALL}")
