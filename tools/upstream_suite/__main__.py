"""Command line of the upstream-suite harness: prints the per-file table and, with --failures, the causes."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tools.upstream_suite import FILES, find_site_packages, format_failures, format_table, run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.upstream_suite", description=__doc__)
    parser.add_argument("--site-packages", help="the published wheel's site-packages (default: ET_REFERENCE_PYTHON's)")
    parser.add_argument("--files", nargs="+", default=list(FILES), metavar="GLOB",
                        help="test files under site-packages/executorch (default: the issue's set)")
    parser.add_argument("--failures", action="store_true", help="list the failing tests grouped by cause")
    parser.add_argument("--workers", type=int, default=1, help="pytest-xdist workers (each file whole in one)")
    parser.add_argument("--keep", type=Path, help="work in this (new) folder and leave it, to rerun a test by hand")
    parser.add_argument("--min-fraction", type=float, help="exit 1 when fewer than this fraction of the tests pass")
    args = parser.parse_args(argv)
    report = run(find_site_packages(args.site_packages), args.files, workers=args.workers, keep=args.keep)
    print(format_table(report))
    if args.failures:
        print()
        print(format_failures(report))
    if report.collect_errors:
        return 1
    if args.min_fraction is not None and report.fraction < args.min_fraction:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
