"""Find the Python packages and CMake targets in the source tree, and match package patterns."""

from __future__ import annotations

import functools
import re
from pathlib import Path

ROOT_PACKAGE = "executorch"
# Build and environment folders at the source root that are never source.
_TOP_LEVEL_JUNK = {"build", "dist", "cmake-out", "venv", "pip-out", "build-setuptools", "wheelhouse"}
_TARGET_DEF = re.compile(
    r"\b(?:add_library|add_executable|add_custom_target|pybind11_add_module|python_add_library"
    r"|ExternalProject_Add)\s*\(\s*([A-Za-z0-9_.+-]+)",
    re.IGNORECASE,
)
_COMMENT = re.compile(r"#.*")


def _skip(rel: Path) -> bool:
    name = rel.name
    if name.startswith(".") or name == "__pycache__" or name.endswith(".egg-info"):
        return True
    # cmake-out-aarch64 and the like: one build folder per target CPU.
    return len(rel.parts) == 1 and (name in _TOP_LEVEL_JUNK or name.startswith("cmake-out-"))


def _source_dirs(root: Path):
    stack = [root]
    while stack:
        here = stack.pop()
        yield here
        for child in sorted(here.iterdir(), reverse=True):
            if child.is_dir() and not child.is_symlink() and not _skip(child.relative_to(root)):
                stack.append(child)


def dotted(root: Path, directory: Path) -> str:
    """The import name of a source directory (the root is `executorch`)."""
    return ".".join((ROOT_PACKAGE, *directory.relative_to(root).parts))


def regular_packages(root: Path) -> list[str]:
    """Import names of every directory with an `__init__.py`, sorted."""
    return sorted(dotted(root, d) for d in _source_dirs(root) if (d / "__init__.py").is_file())


def python_dirs(root: Path) -> list[str]:
    """Import names of every directory holding a `.py` file (packages or not), sorted."""
    return sorted(dotted(root, d) for d in _source_dirs(root) if any(d.glob("*.py")))


@functools.lru_cache(maxsize=None)
def _pattern_regex(pattern: str) -> re.Pattern[str]:
    parts = pattern.split(".")
    out = re.escape(parts[0])
    for part in parts[1:]:
        if part == "**":
            out += r"(?:\.[^.]+)*"
        elif part == "*":
            out += r"\.[^.]+"
        else:
            out += r"\." + re.escape(part)
    return re.compile(out + r"\Z")


def matches(pattern: str, name: str) -> bool:
    """True when a dotted name matches a pattern (`*` is one part, `**` any number, even none)."""
    return _pattern_regex(pattern).match(name) is not None


def defined_cmake_targets(root: Path) -> set[str]:
    """Names of the targets the CMake files in the source tree define (a static scan)."""
    names: set[str] = set()
    for directory in _source_dirs(root):
        for path in sorted(directory.iterdir()):
            if path.name == "CMakeLists.txt" or path.suffix == ".cmake":
                text = _COMMENT.sub("", path.read_text(errors="replace"))
                names.update(_TARGET_DEF.findall(text))
    return names
