"""The sdist: exactly the files the component table's rows need, reproducible, and it builds the minimal wheel."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

from _packaging import REPO, build_wheel, copy_tree  # noqa: E402
from tools.packaging.check_sdist import problems  # noqa: E402
from tools.packaging.sdist import sdist_files  # noqa: E402

EPOCH = "1700000000"


def _sdist(src: Path, out: Path, umask: int = 0o022) -> Path:
    proc = subprocess.run([sys.executable, "-P", "-m", "build", "--sdist", "--no-isolation", "-o", str(out), str(src)],
                          cwd=out.parent, env={**os.environ, "SOURCE_DATE_EPOCH": EPOCH}, capture_output=True,
                          text=True, timeout=300, preexec_fn=lambda: os.umask(umask))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (sdist,) = out.glob("*.tar.gz")
    return sdist


def test_the_sdist_holds_exactly_the_tables_files_and_is_reproducible(tmp_path):
    first = _sdist(copy_tree(tmp_path / "a" / "src"), tmp_path / "a" / "out")
    second = _sdist(copy_tree(tmp_path / "b" / "src"), tmp_path / "b" / "out", umask=0o077)
    assert problems(first, REPO) == ([], problems(first, REPO)[1])
    assert first.read_bytes() == second.read_bytes()
    names = [m.name.split("/", 1)[1] for m in tarfile.open(first).getmembers() if m.isfile()]
    # Build inputs of every mode are in (the example models too: both wheels ship them); tests, fixtures and
    # build trees are not.
    for needed in ("CMakeLists.txt", "runtime/executor/program.cpp", "kernels/portable/functions.yaml",
                   "tools/cmake/sdk/executorch-config.cmake", "extension/module/module.cpp", "exir/__init__.py",
                   "schema/program.fbs", "tools/packaging/backend.py", "examples/models/model_factory.py"):
        assert needed in names, needed
    assert not [n for n in names if n.startswith(("test/", "cmake-out/", ".ci/"))]


def test_the_check_names_a_file_no_row_needs(tmp_path):
    sdist = _sdist(copy_tree(tmp_path / "src"), tmp_path / "out")
    extra = tmp_path / "extra.tar.gz"
    with tarfile.open(sdist) as src, tarfile.open(extra, "w:gz") as dst:
        top = src.getmembers()[0].name.split("/")[0]
        for member in src.getmembers():
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
        stray = tmp_path / "stray.py"
        stray.write_text("")
        dst.add(stray, arcname=f"{top}/test/stray.py")
    found, _ = problems(extra, REPO)
    assert found and "test/stray.py" in found[0]


def test_the_minimal_wheel_from_the_sdist_is_the_one_from_the_tree(tmp_path):
    sdist = _sdist(copy_tree(tmp_path / "src"), tmp_path / "out")
    env = {"EXECUTORCH_BUILD_MINIMAL": "1", "SOURCE_DATE_EPOCH": EPOCH}
    from_sdist = build_wheel(sdist, tmp_path / "from_sdist", env)
    from_tree = build_wheel(copy_tree(tmp_path / "tree"), tmp_path / "from_tree", env)
    assert from_sdist.name == from_tree.name
    assert from_sdist.read_bytes() == from_tree.read_bytes()
    # The sdist's Python files are the repository's, comments and all (only the minimal wheel's lose them).
    with tarfile.open(sdist) as tar:
        top = tar.getmembers()[0].name.split("/")[0]
        in_sdist = tar.extractfile(f"{top}/exir/tensor.py").read()
    assert in_sdist == (REPO / "exir" / "tensor.py").read_bytes() and b"# " in in_sdist


def test_every_listed_file_exists_and_none_is_a_build_output():
    files = sdist_files(REPO)
    assert all((REPO / f).is_file() for f in files)
    assert not [f for f in files if f.endswith((".so", ".a", ".o", ".pyc", ".pte"))]


def test_every_cmake_file_a_wheel_build_reads_is_in_the_sdist():
    # A new native directory needs a row's `sources`, or the sdist cannot build the full wheel.
    # Tests and examples/cpp are configured on their own, never by the wheel build.
    files = set(sdist_files(REPO))
    out = subprocess.run(["git", "-C", str(REPO), "ls-files", "--cached", "--others", "--exclude-standard"],
                         capture_output=True, text=True, check=True).stdout.split()
    cmake = [f for f in out
             if f.endswith(("CMakeLists.txt", ".cmake")) and not f.startswith(("test/", "examples/cpp/"))]
    assert cmake and not [f for f in cmake if f not in files]


def test_every_source_file_the_top_level_cmake_names_is_in_the_sdist():
    # Sources named by path in the root CMakeLists.txt (e.g. extension/flat_tensor's data map) must
    # ship, or the full wheel fails to configure from the sdist.
    import re

    files = set(sdist_files(REPO))
    text = (REPO / "CMakeLists.txt").read_text()
    named = set(re.findall(r"[\w./-]+\.(?:cpp|h|fbs)\b", text.replace("${CMAKE_CURRENT_SOURCE_DIR}/", "")))
    named = {n for n in named if (REPO / n).is_file()}
    assert named and not sorted(named - files)
