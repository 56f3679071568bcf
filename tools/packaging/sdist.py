"""The sdist's file list, from the table: what any mode's build reads, and nothing else."""

from __future__ import annotations

import glob
from pathlib import Path

from .components import BUILD_SOURCES, COMPONENTS
from .mode import Mode
from .plan import plan


def _globbed(root: Path, patterns) -> set[str]:
    found = set()
    for pattern in patterns:
        hits = [h for h in glob.glob(pattern, root_dir=root, recursive=True) if (root / h).is_file()]
        found.update(Path(h).as_posix() for h in hits)
    return found


def _python_files(root: Path, mode: Mode) -> set[str]:
    chosen = plan(root, mode)
    files = set()
    for package in chosen.packages:
        directory = root.joinpath(*package.split(".")[1:])
        for path in directory.glob("*.py"):
            if chosen.ships_module(package, path.stem):
                files.add(path.relative_to(root).as_posix())
    for package, names in chosen.package_data.items():
        directory = root.joinpath(*package.split(".")[1:])
        files.update((directory / name).relative_to(root).as_posix() for name in names)
    return files


def sdist_files(root: Path) -> list[str]:
    """Every source file the sdist holds, relative to `root`, sorted: the build system, then for
    every row of every mode its packages, data and `sources`."""
    files = _globbed(root, BUILD_SOURCES)
    for mode in Mode:
        files |= _python_files(root, mode)
    files |= _globbed(root, [pattern for row in COMPONENTS for pattern in row.sources])
    return sorted(f for f in files if "__pycache__" not in f and not f.endswith((".pyc", ".so")))
