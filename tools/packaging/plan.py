"""Derive packages, data, requirements, CMake work and wheel kind from the rows a mode selects."""

from __future__ import annotations

import glob
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from . import sourcetree
from .components import COMPONENTS, EXCLUDED, ZOPFLI, Component
from .mode import FLATC_VAR, BuildConfigError, Mode
from .target import TARGET_VAR, Target, host_machine


class WheelKind(str, Enum):
    """What the wheel's tag must say: pure Python, a native tool, or a CPython extension."""

    PURE = "py3-none-any"
    TOOL = "py3-none-<platform>"
    EXTENSION = "cpXY-cpXY-<platform>"


@dataclass(frozen=True)
class BuildPlan:
    """Everything setup.py and the build commands need, computed once from the table."""

    mode: Mode
    target: Target
    rows: tuple[Component, ...]
    skipped: tuple[tuple[str, str], ...]
    absent: tuple[tuple[str, str], ...]
    packages: tuple[str, ...]
    whole_packages: frozenset[str]
    modules: frozenset[str]
    # Modules a row names that this mode does not select: they stay out of their whole package.
    withheld: frozenset[str]
    package_data: dict[str, list[str]]
    install_requires: tuple[str, ...]
    build_requires: tuple[str, ...]
    # Entry points by group (the console scripts and the runtime's plugins), as setuptools takes them.
    entry_points: dict[str, list[str]] = field(default_factory=dict)
    cmake_options: dict[str, bool] = field(default_factory=dict)
    cmake_targets: tuple[str, ...] = ()
    install_components: tuple[str, ...] = ()
    # Optional dependencies by extra name (`pip install executorch[devtools]`).
    extras_require: dict[str, list[str]] = field(default_factory=dict)

    @property
    def zopfli(self) -> bool:
        """True when the wheel's members are deflated again with zopfli rather than zlib's best level."""
        return ZOPFLI in self.build_requires

    @property
    def strip_comments(self) -> bool:
        """True when the wheel's Python files lose their comments (each line kept) as the build copies them."""
        return any(row.strip_comments for row in self.rows)

    @property
    def kind(self) -> WheelKind:
        if any(row.python_extension for row in self.rows):
            return WheelKind.EXTENSION
        if self.cmake_targets:
            return WheelKind.TOOL
        return WheelKind.PURE

    def ships_module(self, package: str, module: str) -> bool:
        """True when `package.module` belongs in the wheel: a row names it, or it is in a whole package
        and no unselected row claims it (parents ship only `__init__`)."""
        name = f"{package}.{module}"
        return (name in self.modules or module == "__init__"
                or (package in self.whole_packages and name not in self.withheld))


def excluded(name: str) -> bool:
    """True when an EXCLUDED pattern names the package."""
    return any(sourcetree.matches(pattern, name) for pattern in EXCLUDED)


def classify(name: str) -> str | None:
    """The first row whose package patterns name `name`, 'excluded', or None if nothing does."""
    if excluded(name):
        return "excluded"
    for row in COMPONENTS:
        if any(sourcetree.matches(pattern, name) for pattern in row.packages):
            return row.name
        if any(module.rpartition(".")[0] == name for module in row.modules):
            return row.name
    return None


def absent_packages(root: Path, row: Component) -> tuple[str, ...]:
    """The row's package patterns that name no package in the source tree (the row ships nothing for them)."""
    available = sourcetree.regular_packages(root)
    return tuple(pattern for pattern in row.packages if not any(sourcetree.matches(pattern, p) for p in available))


def _skip_reason(root: Path, row: Component, targets: set[str] | None) -> str | None:
    if not row.cmake_targets:
        return None
    if not (root / "CMakeLists.txt").is_file():
        return "the source tree has no CMakeLists.txt"
    missing = [t for t in row.cmake_targets if t not in targets]
    if missing:
        return f"CMakeLists.txt defines no target {', '.join(missing)}"
    return None


def _cross_reason(row: Component, target: Target) -> str | None:
    if row.host_binary and target.cross:
        return (f"it copies the build machine's {target.host} binary from a package, which cannot run on "
                f"{target.machine} ({TARGET_VAR}={target.machine})")
    return None


def _module_file(root: Path, module: str) -> Path:
    return root.joinpath(*module.split(".")[1:]).with_suffix(".py")


def _with_parents(names: set[str]) -> set[str]:
    out = set(names)
    for name in names:
        parts = name.split(".")
        out.update(".".join(parts[:i]) for i in range(1, len(parts)))
    return out


def _package_data(root: Path, rows: list[Component], packages: set[str]) -> dict[str, list[str]]:
    data: dict[str, list[str]] = {}
    for row in rows:
        for pattern in row.data:
            for hit in sorted(glob.glob(pattern, root_dir=root)):
                owner = Path(hit).parent
                while sourcetree.dotted(root, root / owner) not in packages:
                    owner = owner.parent
                package = sourcetree.dotted(root, root / owner)
                data.setdefault(package, []).append(Path(hit).relative_to(owner).as_posix())
    return {package: sorted(set(files)) for package, files in sorted(data.items())}


def plan(root: Path, mode: Mode, target: Target | None = None) -> BuildPlan:
    """Select the rows for `mode`, drop native rows the CMake files cannot build (for `target`), derive the rest.

    A dropped row is a note in the full mode; in the flatc mode, whose point is that row, it is an error.
    `target` is the CPU the compiled rows run on (default: this machine).
    """
    target = target or Target(machine=host_machine(), host=host_machine())
    if target.cross and mode is not Mode.FULL:
        # The flatc mode's one native part is the build machine's flatc binary; the minimal one has none.
        raise BuildConfigError(
            f"{TARGET_VAR}={target.machine} cross-compiles the full wheel's native code, but the {mode.value} "
            f"wheel compiles nothing for it: unset {TARGET_VAR}, or build the full wheel"
        )
    wanted = [row for row in COMPONENTS if mode in row.modes]
    targets = sourcetree.defined_cmake_targets(root) if any(r.cmake_targets for r in wanted) else set()
    rows, skipped = [], []
    for row in wanted:
        reason = _skip_reason(root, row, targets) or _cross_reason(row, target)
        if reason:
            skipped.append((row.name, reason))
        else:
            rows.append(row)

    if mode is Mode.MINIMAL_FLATC and skipped:
        # Here the native row is the point of the mode, so going without it would be a silent lie.
        raise BuildConfigError(
            f"{FLATC_VAR}=1 asks for flatc, but {skipped[0][1]}: build from a complete source tree, "
            f"or unset {FLATC_VAR} to build the pure-Python wheel"
        )
    available = [p for p in sourcetree.regular_packages(root) if not excluded(p)]
    whole = {p for p in available for row in rows if any(sourcetree.matches(pat, p) for pat in row.packages)}
    modules = {m for row in rows for m in row.modules if _module_file(root, m).is_file()}
    withheld = {m for row in COMPONENTS if row not in rows for m in row.modules} - modules
    packages = _with_parents(whole | {m.rpartition(".")[0] for m in modules}) | {sourcetree.ROOT_PACKAGE}
    options = {row.cmake_option: row in rows for row in COMPONENTS if row.cmake_option}
    return BuildPlan(
        mode=mode,
        target=target,
        rows=tuple(rows),
        skipped=tuple(skipped),
        absent=tuple((row.name, ", ".join(missing)) for row in rows if (missing := absent_packages(root, row))),
        packages=tuple(sorted(packages)),
        whole_packages=frozenset(whole),
        modules=frozenset(modules),
        withheld=frozenset(withheld),
        package_data=_package_data(root, rows, packages),
        install_requires=tuple(sorted({req for row in rows for req in row.requires})),
        extras_require={name: sorted({req for row in rows for extra, reqs in row.extras if extra == name
                                      for req in reqs})
                        for name in sorted({extra for row in rows for extra, _ in row.extras})},
        build_requires=tuple(sorted({req for row in rows for req in row.build_requires})),
        entry_points=_entry_points(rows),
        cmake_options=options,
        cmake_targets=tuple(t for row in rows for t in row.cmake_targets),
        install_components=tuple(row.install_component for row in rows if row.install_component),
    )


def _entry_points(rows) -> dict[str, list[str]]:
    groups: dict[str, set[str]] = {}
    for row in rows:
        for group, entry in row.entry_points:
            groups.setdefault(group, set()).add(entry)
    return {group: sorted(entries) for group, entries in sorted(groups.items())}
