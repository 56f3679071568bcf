"""Print the component table, or what one mode would build: `python -m tools.packaging [minimal|minimal+flatc|full]`."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .components import COMPONENTS, EXCLUDED
from .mode import BuildConfigError, Mode
from .plan import absent_packages, plan
from .target import target_from_env


def _table(root: Path) -> None:
    modes = list(Mode)
    print(f"{'component':<17}" + "".join(f"{m.value:<15}" for m in modes) + "why")
    for row in COMPONENTS:
        missing = absent_packages(root, row)
        # A row whose packages do not exist yet ships nothing, whatever its modes say.
        shipped = "absent" if missing and len(missing) == len(row.packages) and not row.cmake_targets else "yes"
        marks = "".join(f"{shipped if m in row.modes else '-':<15}" for m in modes)
        note = f" [absent: no package {', '.join(missing)} in the source tree]" if missing else ""
        print(f"{row.name:<17}{marks}{row.why}{note}")
    print("\nnever shipped:")
    for pattern, why in EXCLUDED.items():
        print(f"  {pattern:<28} {why}")


def _plan(mode: Mode) -> None:
    built = plan(Path.cwd(), mode, target_from_env())
    cross = f", cross-compiled for {built.target.machine}" if built.target.cross else ""
    print(f"mode {mode.value}: wheel {built.kind.value}{cross}")
    print(f"  rows:            {', '.join(r.name for r in built.rows)}")
    for name, why in built.skipped:
        print(f"  skipped:         {name} ({why})")
    for name, missing in built.absent:
        print(f"  absent:          {name} (no package {missing} in the source tree; ships nothing)")
    print(f"  packages:        {', '.join(built.packages)}")
    if built.withheld:
        print(f"  withheld:        {', '.join(sorted(built.withheld))} (named by rows this mode leaves out)")
    print(f"  data:            {dict(built.package_data)}")
    print(f"  Requires-Dist:   {', '.join(built.install_requires) or 'none'}")
    print(f"  build requires:  {', '.join(built.build_requires) or 'setuptools only'}")
    print(f"  CMake targets:   {', '.join(built.cmake_targets) or 'none (no CMake run)'}")
    print(f"  CMake options:   {', '.join(f'{k}={int(v)}' for k, v in sorted(built.cmake_options.items()))}")
    print(f"  install comps:   {', '.join(built.install_components) or 'none'}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m tools.packaging", description=__doc__.split(":")[0] + ".")
    parser.add_argument("mode", nargs="?", choices=[m.value for m in Mode],
                        help="print what this mode would build (default: print the table)")
    mode = parser.parse_args().mode
    try:
        if mode:
            _plan(Mode(mode))
        else:
            _table(Path.cwd())
        sys.stdout.flush()
    except BuildConfigError as err:
        sys.exit(f"error: {err}")
    except BrokenPipeError:  # `| head` stopped reading: end quietly, as a shell tool would
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(141)
