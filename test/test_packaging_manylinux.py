"""manylinux: the symbol-version check of shipped ELF files, the glibc stub link that satisfies it, the full wheel."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from _packaging import REPO  # noqa: E402  (also puts the source root on sys.path)
from tools.packaging import commands  # noqa: E402
from tools.packaging.check_manylinux import elf_files, elf_needs, policy, problems  # noqa: E402
from tools.packaging.mode import Mode  # noqa: E402
from tools.packaging.plan import plan  # noqa: E402

pytestmark = pytest.mark.skipif(sys.platform != "linux" or not shutil.which("cc"), reason="links ELF files with cc")

MATH = "#include <math.h>\ndouble f(double x) { return exp(x) + log(x) + pow(x, x); }\n"
PLAT = "manylinux_2_28_x86_64"


def _link(tmp_path: Path, name: str, source: str, *flags: str) -> Path:
    src = tmp_path / f"{name}.c"
    src.write_text(source)
    out = tmp_path / "files" / f"{name}.so"
    out.parent.mkdir(exist_ok=True)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(out), str(src), *flags], check=True)
    return out


@pytest.fixture(scope="module")
def stubs(tmp_path_factory) -> Path:
    pytest.importorskip("ziglang", reason="pip install ziglang (requirements-dev.txt)")
    out = tmp_path_factory.mktemp("glibc") / "glibc-2.28"
    nonshared = subprocess.run(["cc", "-print-file-name=libc_nonshared.a"], capture_output=True,
                               text=True).stdout.strip()
    subprocess.run([sys.executable, str(REPO / "tools/cmake/glibc/make_stubs.py"), "2.28", str(out),
                    "--nonshared", nonshared], check=True, capture_output=True)
    return out


def test_policy_is_auditwheels():
    entry = policy(PLAT)
    assert entry["name"] == "manylinux_2_28"
    assert "2.28" in entry["symbol_versions"]["x86_64"]["GLIBC"]
    assert "2.29" not in entry["symbol_versions"]["x86_64"]["GLIBC"]
    with pytest.raises(SystemExit, match="manylinux_9_99"):
        policy("manylinux_9_99_x86_64")


def test_host_glibc_link_is_refused_for_2_28(tmp_path):
    lib = _link(tmp_path, "host", MATH, "-lm")
    found = problems(elf_files(lib.parent), PLAT)
    assert any("GLIBC_2.29" in line and "exp" in line for line in found), found
    # The same file meets the tag of the glibc it was linked against.
    assert problems(elf_files(lib.parent), "manylinux_2_36_x86_64") == []


def test_stub_link_meets_2_28(tmp_path, stubs):
    lib = _link(tmp_path, "old", MATH, f"-L{stubs}", "-lm")
    needs = elf_needs(lib.read_bytes())
    assert needs.versions["GLIBC_2.2.5"] >= {"exp", "log", "pow"}
    assert problems(elf_files(lib.parent), PLAT) == []


def test_symbol_missing_from_the_target_glibc_fails_the_link(tmp_path, stubs):
    # fstat became a libc symbol in 2.33; before, it was a static wrapper around __fxstat.
    src = "#include <sys/stat.h>\nint f(int fd) { struct stat st; return fstat(fd, &st); }\n"
    with pytest.raises(subprocess.CalledProcessError):
        _link(tmp_path, "fstat", src, f"-L{stubs}", "-Wl,-z,defs")


def test_unresolved_symbol_is_reported(tmp_path):
    lib = _link(tmp_path, "undef", "void g(void);\nvoid f(void) { g(); }\n")
    found = problems(elf_files(lib.parent), PLAT)
    assert len(found) == 1 and "no symbol version" in found[0] and "g" in found[0].split(": ")[-1], found


def test_unlisted_library_is_reported(tmp_path):
    _link(tmp_path, "dep", "int d(void) { return 1; }\n", "-Wl,-soname,libdep.so")
    shutil.move(tmp_path / "files" / "dep.so", tmp_path / "libdep.so")
    _link(tmp_path, "user", "int d(void);\nint f(void) { return d(); }\n", f"-L{tmp_path}", "-ldep")
    found = problems(elf_files(tmp_path / "files"), PLAT)
    assert any("needs libdep.so" in line for line in found), found


def test_full_build_asks_for_glibc_2_28_by_default():
    full = plan(REPO, Mode.FULL)
    assert commands.glibc_target_args(full, {}) == ["-DEXECUTORCH_GLIBC_TARGET=2.28"]
    assert commands.glibc_target_args(full, {"EXECUTORCH_GLIBC_TARGET": "host"}) == ["-DEXECUTORCH_GLIBC_TARGET="]
    assert commands.glibc_target_args(plan(REPO, Mode.MINIMAL), {}) == []
    assert any(req.startswith("ziglang") for req in full.build_requires)


@pytest.mark.skipif(not os.environ.get("ET_FULL_WHEEL"),
                    reason="set ET_FULL_WHEEL to a full wheel (CI's test_native.sh does)")
def test_full_wheel_meets_manylinux_2_28():
    wheel = Path(os.environ["ET_FULL_WHEEL"])
    files = elf_files(wheel)
    names = {Path(n).name for n in files}
    assert {"libexecutorch.so", "libportable_kernels.so", "libextension_module.so", "executor_runner"} <= names
    assert any(n.startswith("_portable_lib") for n in names)
    for name, data in sorted(files.items()):
        if data[16] != 1:
            print(name, sorted(elf_needs(data).versions))
    assert problems(files, PLAT) == []
