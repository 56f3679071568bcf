"""Build the minimal wheel from a copy of the tree: contents, metadata, tag, and byte-for-byte reproducibility."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import sysconfig
import tokenize
import zipfile
import zlib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from _packaging import REPO, build_wheel, copy_tree, same_code, wheel_metadata  # noqa: E402

from tools.packaging.comments import same_program, strip_private_docstrings  # noqa: E402
from tools.packaging.components import COMPONENTS  # noqa: E402
from tools.packaging.inspect_wheel import LISTED  # noqa: E402

MINIMAL = {"EXECUTORCH_BUILD_MINIMAL": "1", "SOURCE_DATE_EPOCH": "1700000000"}
_COMPILED = (".so", ".pyd", ".dylib", ".a", ".o", ".dll", ".lib", ".exe")
_NATIVE_SOURCE = (".h", ".hpp", ".c", ".cc", ".cpp", ".cxx", ".cmake", ".yaml")


@pytest.fixture(scope="module")
def source_copy(tmp_path_factory) -> Path:
    # One snapshot of the tree, so edits made while the tests run cannot tell two builds apart.
    return copy_tree(tmp_path_factory.mktemp("src") / "executorch")


@pytest.fixture(scope="module")
def minimal_wheel(source_copy, tmp_path_factory) -> Path:
    return build_wheel(source_copy, tmp_path_factory.mktemp("wheel"), MINIMAL)


def _source_modules(package_dir: Path) -> set[str]:
    # Every .py below a shipped package, skipping test packages and directories that are not packages.
    out = set()
    for path in package_dir.rglob("*.py"):
        rel = path.relative_to(REPO)
        parents = [REPO.joinpath(*rel.parts[:i]) for i in range(1, len(rel.parts))]
        if any(p.name in ("test", "tests", "__pycache__") or not (p / "__init__.py").is_file() for p in parents):
            continue
        out.add("executorch/" + rel.as_posix())
    return out


def test_tag_is_py3_none_any(minimal_wheel):
    names, _, wheel = wheel_metadata(minimal_wheel)
    assert minimal_wheel.name.endswith("-py3-none-any.whl")
    assert wheel.get_all("Tag") == ["py3-none-any"]
    assert wheel["Root-Is-Purelib"] == "true"


def test_requires_dist_is_only_flatbuffers(minimal_wheel):
    _, metadata, _ = wheel_metadata(minimal_wheel)
    requirements = [Requirement(r) for r in metadata.get_all("Requires-Dist") or []]
    # What pip installs without extras: requirements whose marker is absent or names no extra.
    required = [r for r in requirements if r.marker is None or "extra" not in str(r.marker)]
    assert [r.name for r in required] == ["flatbuffers"]
    assert not any(r.marker for r in required)
    # The devtools extra is declared, and only behind its marker.
    devtools = {r.name for r in requirements if r.marker is not None and r.marker.evaluate({"extra": "devtools"})}
    assert {"pandas", "tabulate"} <= devtools
    assert metadata.get_all("Provides-Extra") and "devtools" in metadata.get_all("Provides-Extra")
    # The optimum extra: what optimum-executorch imports and leaves to executorch to install; Core ML's
    # tools only where the published wheel installs them (macOS, Linux x86-64, CPython < 3.14).
    def optimum(**env):
        return {r.name for r in requirements if r.marker is not None and r.marker.evaluate({"extra": "optimum", **env})}
    linux = dict(platform_system="Linux", platform_machine="x86_64", python_version="3.11")
    assert optimum(**linux) == {"coremltools", "pandas", "tabulate", "torchao"}
    assert optimum(**{**linux, "platform_machine": "aarch64"}) == {"pandas", "tabulate", "torchao"}
    assert "optimum" in metadata.get_all("Provides-Extra")
    assert metadata["Name"] == "executorch"
    assert metadata["Version"] == (REPO / "version.txt").read_text().strip()


def test_no_compiled_native_test_or_example_content(minimal_wheel):
    names, _, _ = wheel_metadata(minimal_wheel)
    files = [n for n in names if not n.endswith("/") and n not in LISTED]
    assert not [n for n in files if n.endswith(_COMPILED) or n.endswith(_NATIVE_SOURCE)]
    assert not [n for n in files if "/test/" in n or "/tests/" in n or n.split("/")[-1].startswith("test_")]
    for folder in ("kernels", "tools", "bin", "test", "benchmarks"):
        assert not [n for n in files if n.startswith(f"executorch/{folder}/")], folder
    # Of the examples, only the model registry vendor scripts import (the example_models row) and the Llama
    # package's custom KV caches optimum imports (the llm row), as Python source; export_llm's model definition
    # is the full wheel's (the llm_export row).
    examples = [n for n in files if n.startswith("executorch/examples/")]
    models = REPO / "examples" / "models"
    full_only = {m.replace(".", "/") + ".py" for row in COMPONENTS if row.name == "llm_export" for m in row.modules}
    assert sorted(examples) == sorted(
        name for p in [*models.glob("*.py"), *(models / "llama").rglob("*.py")]
        if (name := f"executorch/examples/models/{p.relative_to(models).as_posix()}") not in full_only)
    # Of the backends, only XNNPACK's ahead-of-time half and Python runtime, and its schema.
    backends = [n for n in files if n.startswith("executorch/backends/")]
    assert backends and all(n.startswith("executorch/backends/xnnpack/") and n.endswith((".py", ".fbs"))
                            for n in backends), backends
    # No adapter to the compiled runtime: the minimal wheel has no extension for it to import.
    assert "executorch/runtime/_native.py" not in files
    assert "executorch/setup.py" not in files and "executorch/_launch.py" not in files
    assert all(n.startswith(("executorch/", "executorch-")) for n in files)


def test_export_path_is_complete(minimal_wheel):
    names = set(wheel_metadata(minimal_wheel)[0])
    # upstream's graph tools that exporting does not need ship with the full wheel only
    (tools_row,) = [row for row in COMPONENTS if row.name == "exir_tools"]
    full_only = {m.replace(".", "/") + ".py" for m in tools_row.modules}
    assert full_only and not full_only & names
    expected = _source_modules(REPO / "exir") - full_only | {"executorch/__init__.py", "executorch/schema/program.fbs",
                                                             "executorch/schema/scalar_type.fbs"}
    if (REPO / "runtime" / "__init__.py").is_file():
        expected |= _source_modules(REPO / "runtime") - {"executorch/runtime/_native.py"}
    # The Python engine's XnnpackBackend, so the minimal wheel's CLI can check an XNNPACK export.
    xnnpack_runtime = {"executorch/" + p.relative_to(REPO).as_posix()
                       for p in (REPO / "backends" / "xnnpack" / "runtime").glob("*.py")}
    assert "executorch/backends/xnnpack/runtime/_backend.py" in xnnpack_runtime
    expected |= xnnpack_runtime
    assert expected <= names, sorted(expected - names)


def test_ptd_and_bpte_serializers_ship_with_their_schemas(minimal_wheel):
    names = set(wheel_metadata(minimal_wheel)[0])
    flat_tensor = {"executorch/" + p.relative_to(REPO).as_posix()
                   for p in (REPO / "extension" / "flat_tensor").rglob("*.py")}
    assert "executorch/extension/flat_tensor/serialize/serialize.py" in flat_tensor
    bundled = _source_modules(REPO / "devtools" / "bundled_program")
    assert "executorch/devtools/bundled_program/serialize/__init__.py" in bundled
    expected = (flat_tensor | bundled
                | {"executorch/extension/flat_tensor/serialize/flat_tensor.fbs",
                   "executorch/devtools/bundled_program/schema/bundled_program_schema.fbs",
                   "executorch/backends/xnnpack/serialization/schema.fbs"})
    assert expected <= names, sorted(expected - names)


def test_run_tools_stay_in_the_full_wheel(minimal_wheel):
    names = set(wheel_metadata(minimal_wheel)[0])
    # The profile command and the timeline time or view a run: full wheel only (336 KB budget).
    full_only = {"executorch/cli/profile.py", "executorch/devtools/timeline.py"}
    assert not full_only & names, sorted(full_only & names)
    assert {"executorch/devtools/inspector/_inspector.py", "executorch/devtools/__main__.py"} <= names


def _run_from_wheel(minimal_wheel, tmp_path, argv):
    site = tmp_path / "site"
    if not site.is_dir():
        with zipfile.ZipFile(minimal_wheel) as zf:
            zf.extractall(site)
    # -S: the source tree's editable install is invisible; torch comes after the wheel.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), sysconfig.get_paths()["purelib"]])}
    return subprocess.run([sys.executable, "-S", "-m", *argv], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)


def test_minimal_wheel_cli_exports_and_runs_a_bundled_program(minimal_wheel, tmp_path):
    (tmp_path / "m.py").write_text("import torch\ndef make():\n    return torch.nn.ReLU(), (torch.randn(2, 3),)\n")
    export = _run_from_wheel(minimal_wheel, tmp_path, ["executorch.cli", "export", "m.py:make", "-o", "m.pte",
                                                       "--bundled", "m.bpte"])
    assert export.returncode == 0, (export.stdout, export.stderr[-2000:])
    assert (tmp_path / "m.pte").stat().st_size > 0 and (tmp_path / "m.bpte").read_bytes()[4:8] == b"BP08"
    run = _run_from_wheel(minimal_wheel, tmp_path, ["executorch.cli", "bundled", "m.bpte"])
    assert run.returncode == 0, (run.stdout, run.stderr[-2000:])
    assert run.stdout.strip().splitlines()[-1].startswith("OK: 1/1 test cases passed"), run.stdout


def test_minimal_wheel_cli_refuses_full_wheel_commands_by_name(minimal_wheel, tmp_path):
    cases = {
        "the profile command": ["executorch.cli", "profile", "m.pte"],
        "the timeline command": ["executorch.devtools", "timeline", "x.etdp", "-o", "t.json"],
    }
    for what, argv in cases.items():
        proc = _run_from_wheel(minimal_wheel, tmp_path, argv)
        assert proc.returncode == 1, (what, proc.stdout, proc.stderr[-2000:])
        (line,) = proc.stderr.strip().splitlines()
        assert line.startswith(f"error: {what} needs executorch.") and "full executorch wheel" in line, line


def test_executor_backend_partitioner_ships_at_the_published_path_and_lowers(minimal_wheel, tmp_path):
    # The only files under a test package are ExecutorBackend's partitioner and preprocess (and parents' __init__).
    names = set(wheel_metadata(minimal_wheel)[0])
    rpc = "executorch/exir/backend/test/demos/rpc/"
    assert {rpc + "executor_backend_partitioner.py", rpc + "executor_backend_preprocess.py"} <= names
    assert {n for n in names if "/test/" in n} == {n for n in LISTED if "/test/" in n}
    with zipfile.ZipFile(minimal_wheel) as zf:
        zf.extractall(tmp_path / "site")
    script = (
        "import sys, torch; sys.path.insert(0, sys.argv[1]); import executorch\n"
        "assert executorch.__file__.startswith(sys.argv[1]), executorch.__file__\n"
        "from executorch.exir import to_edge_transform_and_lower\n"
        "from executorch.exir.backend.test.demos.rpc.executor_backend_partitioner import ExecutorBackendPartitioner\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, x): return torch.relu(x) + 1\n"
        "ep = torch.export.export(M(), (torch.randn(2, 3),))\n"
        "prog = to_edge_transform_and_lower(ep, partitioner=[ExecutorBackendPartitioner()]).to_executorch()\n"
        "assert [d.id for d in prog.executorch_program.execution_plan[0].delegates] == ['ExecutorBackend']\n"
    )
    proc = subprocess.run([sys.executable, "-P", "-c", script, str(tmp_path / "site")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_runtime_ships_python_only(minimal_wheel):
    names = [n for n in wheel_metadata(minimal_wheel)[0] if n.startswith("executorch/runtime/")]
    assert all(n.endswith(".py") for n in names), names


def _comment_lines(source: bytes) -> list[int]:
    return [t.start[0] for t in tokenize.tokenize(io.BytesIO(source).readline) if t.type == tokenize.COMMENT]


def test_python_files_have_no_comments_and_the_same_code_lines_and_public_docstrings(minimal_wheel, source_copy):
    # Each module is its source without comments and without private functions' docstrings: the same syntax tree
    # otherwise, the same bytecode, constants and line table as the source with just those docstrings dropped,
    # recursively, and the same lines, so a traceback from the wheel points at the right line of the source tree.
    with zipfile.ZipFile(minimal_wheel) as zf:
        shipped = {n: zf.read(n) for n in zf.namelist() if n.endswith(".py")}
    assert len(shipped) > 100
    stripped_some = 0
    for name, data in sorted(shipped.items()):
        source = (source_copy / name.removeprefix("executorch/")).read_bytes()
        assert data.count(b"\n") == source.count(b"\n"), name
        assert same_program(source, data, name), name
        assert same_code(compile(strip_private_docstrings(source), name, "exec"), compile(data, name, "exec")), name
        assert _comment_lines(data) == [], name
        stripped_some += data != source
    assert stripped_some > len(shipped) // 2, (stripped_some, len(shipped))
    # The check fails on a wrong transform: dropping the comment-only lines instead shifts the line table.
    name = "executorch/exir/tensor.py"
    source = (source_copy / name.removeprefix("executorch/")).read_bytes()
    commented = set(_comment_lines(source))
    dropped = b"\n".join(line for row, line in enumerate(source.split(b"\n"), 1)
                         if not (row in commented and line.lstrip().startswith(b"#")))
    assert dropped != source and same_code(compile(dropped, name, "exec"), compile(dropped, name, "exec"))
    assert not same_code(compile(source, name, "exec"), compile(dropped, name, "exec"))


def test_two_builds_are_byte_identical(minimal_wheel, source_copy, tmp_path):
    # A second copy, other file mtimes and a stricter umask must not change a byte.
    src = copy_tree(tmp_path / "executorch", source_copy)
    for path in src.rglob("*.py"):
        path.touch()
    again = build_wheel(src, tmp_path / "out", MINIMAL, umask=0o077)
    assert again.name == minimal_wheel.name
    assert again.read_bytes() == minimal_wheel.read_bytes()


def test_entries_are_dated_from_source_date_epoch_and_normalized(minimal_wheel):
    with zipfile.ZipFile(minimal_wheel) as zf:
        infos = zf.infolist()
    assert {info.date_time for info in infos} == {(2023, 11, 14, 22, 13, 20)}
    # RECORD is written last by the wheel writer itself, with its own fixed mode.
    *files, record = infos
    assert record.filename.endswith(".dist-info/RECORD")
    assert {info.external_attr >> 16 & 0o777 for info in files} == {0o644}


def test_members_are_deflated_with_zopfli(minimal_wheel):
    # The wheel writer leaves zlib's default level (6); the minimal build deflates every member again with
    # zopfli (the same settings each time), into standard streams smaller than zlib's best level.
    import zopfli.zlib

    from tools.packaging.reproducible import ZOPFLI_ITERATIONS

    with zipfile.ZipFile(minimal_wheel) as zf:
        infos = zf.infolist()
        assert {info.compress_type for info in infos} == {zipfile.ZIP_DEFLATED}
        assert zf.testzip() is None  # every stream inflates to its recorded CRC
        datas = [zf.read(info) for info in infos]
    # less zlib's 2-byte header and 4-byte checksum
    by_zopfli = [len(zopfli.zlib.compress(d, numiterations=ZOPFLI_ITERATIONS, blocksplitting=0)) - 6 for d in datas]
    at_best = [len(zlib.compress(d, 9)) - 6 for d in datas]
    assert [info.compress_size for info in infos] == by_zopfli
    assert sum(by_zopfli) < sum(at_best) - 5 * 1024, (sum(by_zopfli), sum(at_best))


def test_zip_writer_matches_zipfile_at_the_best_level(minimal_wheel, tmp_path):
    # The writer that lays out zopfli's streams, given zlib's level 9, gives zipfile's bytes exactly.
    from tools.packaging.reproducible import recompress_zip

    with zipfile.ZipFile(minimal_wheel) as src, zipfile.ZipFile(tmp_path / "by_zipfile.zip", "w") as dst:
        for info in src.infolist():
            dst.writestr(info, src.read(info), compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
    ours = tmp_path / "ours.zip"
    ours.write_bytes((tmp_path / "by_zipfile.zip").read_bytes())
    recompress_zip(ours)
    assert ours.read_bytes() == (tmp_path / "by_zipfile.zip").read_bytes()


def test_minimal_build_without_zopfli_fails_in_one_line_naming_the_fix(source_copy, tmp_path):
    # A build without isolation where zopfli cannot be imported must not fall back to a bigger wheel.
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text("import sys\nsys.modules['zopfli'] = None\n")
    pythonpath = os.pathsep.join(filter(None, [str(hide), os.environ.get("PYTHONPATH")]))
    with pytest.raises(AssertionError) as err:
        build_wheel(source_copy, tmp_path / "out", {**MINIMAL, "PYTHONPATH": pythonpath})
    lines = [line.strip() for line in str(err.value).splitlines() if "zopfli" in line]  # pip indents them
    assert lines and lines[0].startswith("error: the minimal wheel's members are deflated with zopfli"), lines
    assert "pip install zopfli" in lines[0]
    assert not list((tmp_path / "out").glob("*.whl"))
