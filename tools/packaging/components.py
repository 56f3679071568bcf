"""The component table: which parts of the source tree go into which wheel, and what each needs.

This is an allowlist. A file is in a wheel only when a selected row names it: a package pattern
(`executorch.exir` is that package, `executorch.exir.**` it and every package below it), a module, a
data glob (relative to the source root), or a CMake install component. Parent packages of what a
row names ship their `__init__.py` and nothing else. Every Python package in the source tree must
match a row or an `EXCLUDED` pattern; a test enforces it, so a new package is classified on purpose.
"""

from __future__ import annotations

from dataclasses import dataclass

from .mode import Mode

MINIMAL, MINIMAL_FLATC, FULL = Mode.MINIMAL, Mode.MINIMAL_FLATC, Mode.FULL
EVERY_MODE = frozenset(Mode)
NATIVE_BUILD = ("cmake>=3.24", "ninja")


@dataclass(frozen=True)
class Component:
    """One row of the table; empty fields mean the row adds nothing of that kind."""

    name: str
    why: str
    modes: frozenset[Mode]
    packages: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    data: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()
    build_requires: tuple[str, ...] = ()
    cmake_option: str | None = None
    cmake_targets: tuple[str, ...] = ()
    install_component: str | None = None
    scripts: tuple[str, ...] = ()
    python_extension: bool = False


COMPONENTS: tuple[Component, ...] = (
    # --- pure Python: every wheel -------------------------------------------------------------
    Component(
        "exir", "the export path: torch.export -> edge -> .pte, FlatBuffers written from Python",
        EVERY_MODE,
        packages=("executorch.exir.**",),
        modules=("executorch.version",),
        data=("schema/*.fbs",),
        requires=("flatbuffers>=24.3",),
    ),
    Component(
        "devtools", "output comparison shared by tests, the CLI's verification and the benchmarks",
        EVERY_MODE,
        packages=("executorch.devtools",),
    ),
    Component(
        "cli", "the command line (python -m executorch.exir export|inspect), on top of exir and runtime",
        EVERY_MODE,
        packages=("executorch.cli",),
    ),
    Component(
        "export", "export recipes and sessions on top of exir",
        EVERY_MODE,
        packages=("executorch.export.**",),
    ),
    Component(
        "pytree", "pytree flattening used by exported programs",
        EVERY_MODE,
        packages=("executorch.extension.pytree.**",),
    ),
    Component(
        "runtime_py", "the runtime API and its pure-Python interpreter (Python files only)",
        EVERY_MODE,
        packages=("executorch.runtime.**",),
    ),
    Component(
        "flat_tensor", ".ptd (external tensor data) serializer",
        EVERY_MODE,
        packages=("executorch.extension.flat_tensor.serialize.**",),
        data=("extension/flat_tensor/serialize/*.fbs",),
    ),
    Component(
        "bundled_program", ".bpte (program + test cases) serializer",
        EVERY_MODE,
        packages=("executorch.devtools.bundled_program.**",),
        data=("devtools/bundled_program/schema/*.fbs",),
    ),
    # --- native, built by CMake ---------------------------------------------------------------
    Component(
        "flatbuffers_ep", "flatc: the schema compiler, for the native build and for vendors who want it",
        frozenset({MINIMAL_FLATC, FULL}),
        build_requires=NATIVE_BUILD + ("flatc",),
        cmake_targets=("flatbuffers_ep",), install_component="flatc",
    ),
    Component(
        "runtime", "C++ core and executor, linked into the bindings and the runner",
        frozenset({FULL}),
        build_requires=NATIVE_BUILD, cmake_option="EXECUTORCH_BUILD_RUNTIME",
        cmake_targets=("executorch_core", "executorch"),
    ),
    Component(
        "portable_kernels", "portable C++ operator kernels",
        frozenset({FULL}),
        build_requires=NATIVE_BUILD, cmake_option="EXECUTORCH_BUILD_PORTABLE_KERNELS",
        cmake_targets=("portable_kernels",),
    ),
    Component(
        "pybindings", "native runtime as a Python extension behind executorch.runtime",
        frozenset({FULL}),
        packages=("executorch.extension.pybindings",),
        requires=("torch>=2.13",),
        build_requires=NATIVE_BUILD + ("pybind11>=2.13",),
        cmake_option="EXECUTORCH_BUILD_PYBIND", cmake_targets=("_portable_lib",),
        install_component="python", python_extension=True,
    ),
    Component(
        "executor_runner", "command-line program that runs a .pte natively",
        frozenset({FULL}),
        modules=("executorch._launch",),
        build_requires=NATIVE_BUILD, cmake_option="EXECUTORCH_BUILD_EXECUTOR_RUNNER",
        cmake_targets=("executor_runner",), install_component="runner",
        scripts=("executor_runner = executorch._launch:executor_runner",),
    ),
)

# Packages that are never shipped, and why. A pattern here wins over a row.
EXCLUDED: dict[str, str] = {
    "executorch.**.test.**": "tests and their fixtures run from the source tree",
    "executorch.**.tests.**": "tests and their fixtures run from the source tree",
    "executorch.examples.**": "example models are inputs for demos and CI, not library code",
    "executorch.tools.**": "build-time helpers (packaging, codegen, selective build)",
    "executorch.benchmarks.**": "benchmark scripts run from the source tree",
}
