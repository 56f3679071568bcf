"""Check an sdist against the component table: exactly the files tools/packaging/sdist.py derives, plus metadata.

  python tools/packaging/check_sdist.py SDIST.tar.gz     (from the source root the sdist was built from)
"""

from __future__ import annotations

import argparse
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tools.packaging.sdist import sdist_files  # noqa: E402

# What setuptools adds around the sources: the metadata files.
METADATA = ("PKG-INFO", "setup.cfg")
METADATA_DIR = "executorch.egg-info/"


def problems(sdist: Path, root: Path = ROOT) -> tuple[list[str], int]:
    """Every way the sdist differs from the table, one line each, and how many files it holds."""
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if m.isfile()]
    tops = {m.name.split("/", 1)[0] for m in members}
    if len(tops) != 1:
        return [f"the sdist has {len(tops)} top-level folders, not one: {sorted(tops)}"], len(members)
    names = {m.name.split("/", 1)[1] for m in members}
    expected = set(sdist_files(root))
    found = []
    missing = sorted(expected - names)
    extra = sorted(n for n in names - expected if n not in METADATA and not n.startswith(METADATA_DIR))
    if missing:
        found.append(f"{len(missing)} file(s) the table's rows need are missing: {missing[:10]}")
    if extra:
        found.append(f"{len(extra)} file(s) no row names are included: {extra[:10]}")
    for name in METADATA:
        if name not in names:
            found.append(f"no {name}")
    return found, len(names)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sdist", type=Path)
    args = parser.parse_args(argv)
    found, count = problems(args.sdist)
    for line in found:
        print(f"FAIL {args.sdist.name}: {line}")
    if not found:
        print(f"{args.sdist.name}: {count} files, {args.sdist.stat().st_size / 1024:.0f} KB, exactly the table's")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
