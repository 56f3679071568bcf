"""The component table: every package is classified, patterns mean what they say, modes select the right rows."""

from __future__ import annotations

import subprocess
import sys

import pytest

from _packaging import REPO  # noqa: E402  (also puts the source root on sys.path)
from tools.packaging import sourcetree  # noqa: E402
from tools.packaging.components import COMPONENTS, EXCLUDED, ZOPFLI  # noqa: E402
from tools.packaging.mode import BuildConfigError, Mode  # noqa: E402
from tools.packaging.plan import WheelKind, absent_packages, classify, plan  # noqa: E402


def test_every_python_directory_is_classified():
    unclassified = [name for name in sourcetree.python_dirs(REPO) if name != "executorch" and classify(name) is None]
    assert not unclassified, (
        f"add these to a row or to EXCLUDED in tools/packaging/components.py: {unclassified}"
    )


def test_every_row_names_packages_the_source_tree_has():
    # A row for a package that does not exist ships nothing and misleads the reader of the table.
    phantom = {row.name: missing for row in COMPONENTS if (missing := absent_packages(REPO, row))}
    assert not phantom, f"remove these patterns from tools/packaging/components.py or add the packages: {phantom}"


def test_shipped_python_directories_are_regular_packages():
    # A directory a row names but without __init__.py would silently drop out of the wheel.
    regular = set(sourcetree.regular_packages(REPO))
    missing = [
        name for name in sourcetree.python_dirs(REPO)
        if classify(name) not in (None, "excluded") and name not in regular
    ]
    assert not missing, f"these directories need an __init__.py to ship: {missing}"


@pytest.mark.parametrize(
    "pattern, name, expected",
    [
        ("executorch.exir.**", "executorch.exir", True),
        ("executorch.exir.**", "executorch.exir.passes.sub", True),
        ("executorch.exir.**", "executorch.exirx", False),
        ("executorch.exir.**", "executorch.export", False),
        ("executorch.**.tests", "executorch.tests", True),
        ("executorch.**.tests", "executorch.exir.emit.tests", True),
        ("executorch.**.tests", "executorch.exir.tests_helpers", False),
        ("executorch.*.pytree", "executorch.extension.pytree", True),
        ("executorch.*.pytree", "executorch.a.b.pytree", False),
        ("executorch.extension.pybindings", "executorch.extension.pybindings.sub", False),
    ],
)
def test_pattern_semantics(pattern, name, expected):
    assert sourcetree.matches(pattern, name) is expected


def test_rows_are_well_formed():
    names = [row.name for row in COMPONENTS]
    assert len(names) == len(set(names))
    for row in COMPONENTS:
        assert row.modes, row.name
        assert bool(row.install_component) <= bool(row.cmake_targets), row.name
        assert not row.python_extension or row.cmake_targets, row.name
        for pattern in row.packages:
            assert pattern.startswith("executorch."), pattern
    assert all(pattern.startswith("executorch.") for pattern in EXCLUDED)


def test_minimal_plan_is_pure_python_with_only_flatbuffers():
    minimal = plan(REPO, Mode.MINIMAL)
    assert minimal.kind is WheelKind.PURE
    assert not minimal.cmake_targets and not minimal.install_components
    # Its one build requirement is zopfli, which deflates its members; no other mode uses it.
    assert minimal.build_requires == (ZOPFLI,) and minimal.zopfli
    assert not plan(REPO, Mode.FULL).zopfli and ZOPFLI not in plan(REPO, Mode.FULL).build_requires
    # Its Python files lose their comments as the build copies them; the other wheels keep them.
    assert minimal.strip_comments
    assert not plan(REPO, Mode.FULL).strip_comments and not plan(REPO, Mode.MINIMAL_FLATC).strip_comments
    assert [req.split(">")[0].split("=")[0] for req in minimal.install_requires] == ["flatbuffers"]
    assert not any(value for value in minimal.cmake_options.values())
    assert "executorch.exir" in minimal.whole_packages
    assert not any(sourcetree.matches("executorch.**.tests", p) for p in minimal.packages)
    # The example models ship (vendor scripts import the registry at start-up), and the Llama package's custom
    # KV caches (optimum-executorch imports them); nothing else under examples.
    assert ([p for p in minimal.packages if p.startswith("executorch.examples")]
            == ["executorch.examples", "executorch.examples.models", "executorch.examples.models.llama",
                "executorch.examples.models.llama.source_transformation"])


def test_extras_reach_the_wheel_metadata():
    # setuptools drops setup.py's extras_require unless pyproject.toml lists them as dynamic.
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert plan(REPO, Mode.MINIMAL).extras_require["devtools"] == ["pandas", "tabulate"]
    # matplotlib draws the profile command's chart, and the command ships with the full wheel only.
    assert plan(REPO, Mode.FULL).extras_require["devtools"] == ["matplotlib", "pandas", "tabulate"]
    assert plan(REPO, Mode.MINIMAL).extras_require["optimum"] == plan(REPO, Mode.FULL).extras_require["optimum"]
    assert "optional-dependencies" in project["dynamic"] and "dependencies" in project["dynamic"]


def test_minimal_ships_exir_modules_but_parents_ship_only_init():
    minimal = plan(REPO, Mode.MINIMAL)
    assert minimal.ships_module("executorch.exir", "schema")
    assert minimal.ships_module("executorch", "__init__")
    assert not minimal.ships_module("executorch", "setup")
    assert not minimal.ships_module("executorch", "_launch")


@pytest.mark.parametrize("mode", list(Mode))
def test_every_mode_ships_executor_backend_partitioner_and_nothing_else_under_test(mode):
    built = plan(REPO, mode)
    rpc = "executorch.exir.backend.test.demos.rpc"
    assert built.ships_module(rpc, "executor_backend_partitioner")
    assert built.ships_module(rpc, "executor_backend_preprocess")
    assert not built.ships_module(rpc, "executor_backend_recipes")
    assert rpc in built.packages and rpc not in built.whole_packages


def test_every_wheel_ships_the_schemas_of_its_formats():
    # .pte, XNNPACK payload, .ptd and .bpte: the minimal wheel writes and reads them all (issues 3 and 12).
    data = plan(REPO, Mode.MINIMAL).package_data
    assert data == plan(REPO, Mode.FULL).package_data
    assert "schema/program.fbs" in data["executorch"] and "schema/scalar_type.fbs" in data["executorch"]
    assert data["executorch.backends.xnnpack.serialization"] == ["schema.fbs"]
    assert data["executorch.extension.flat_tensor.serialize"] == ["flat_tensor.fbs"]
    assert data["executorch.devtools.bundled_program.schema"] == ["bundled_program_schema.fbs"]
    shipped = [f for files in data.values() for f in files]
    assert all(f.endswith(".fbs") for f in shipped), shipped


def test_a_module_a_row_names_leaves_its_package_with_that_row():
    # runtime/_native.py adapts the compiled extension: in the pybindings row, not in runtime_py's package.
    minimal, full = plan(REPO, Mode.MINIMAL), plan(REPO, Mode.FULL)
    assert "executorch.runtime" in minimal.whole_packages
    assert not minimal.ships_module("executorch.runtime", "_native")
    assert minimal.ships_module("executorch.runtime", "_backend")
    if "pybindings" in {row.name for row in full.rows}:
        assert full.ships_module("executorch.runtime", "_native")


def test_flatc_mode_adds_only_the_flatc_row():
    minimal = plan(REPO, Mode.MINIMAL)
    if "flatbuffers_ep" not in sourcetree.defined_cmake_targets(REPO):
        with pytest.raises(BuildConfigError):
            plan(REPO, Mode.MINIMAL_FLATC)
        return
    with_flatc = plan(REPO, Mode.MINIMAL_FLATC)
    added = {row.name for row in with_flatc.rows} - {row.name for row in minimal.rows}
    assert added == {"flatbuffers_ep"} and not with_flatc.skipped
    assert with_flatc.install_requires == minimal.install_requires
    assert with_flatc.kind is WheelKind.TOOL and with_flatc.install_components == ("flatc",)
    assert with_flatc.cmake_targets == ("flatbuffers_ep",) and not any(with_flatc.cmake_options.values())


def test_full_plan_turns_on_its_options_and_declares_more():
    full = plan(REPO, Mode.FULL)
    selected = {row.name for row in full.rows}
    assert {"runtime", "portable_kernels"} <= selected
    assert full.cmake_options["EXECUTORCH_BUILD_RUNTIME"] is True
    assert full.cmake_options["EXECUTORCH_BUILD_PYBIND"] is ("pybindings" in selected)
    assert set(plan(REPO, Mode.MINIMAL).packages) <= set(full.packages)
    assert "cmake>=3.24" in full.build_requires or not full.cmake_targets


def test_native_rows_are_skipped_with_a_reason_without_cmake(tmp_path):
    (tmp_path / "__init__.py").write_text("")
    full = plan(tmp_path, Mode.FULL)
    assert not full.cmake_targets and full.kind is WheelKind.PURE
    reasons = dict(full.skipped)
    assert set(reasons) == {row.name for row in COMPONENTS if row.cmake_targets}
    assert all("no CMakeLists.txt" in why for why in reasons.values())


def test_flatc_mode_fails_when_flatc_cannot_be_built(tmp_path):
    (tmp_path / "__init__.py").write_text("")
    with pytest.raises(BuildConfigError) as err:
        plan(tmp_path, Mode.MINIMAL_FLATC)
    assert "EXECUTORCH_MINIMAL_WITH_FLATC" in str(err.value) and "no CMakeLists.txt" in str(err.value)


def test_row_with_undefined_target_is_skipped_and_says_which(tmp_path):
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "CMakeLists.txt").write_text(
        "project(x LANGUAGES CXX)\nadd_custom_target(flatbuffers_ep)\n# add_executable(executor_runner x.cpp)\n"
    )
    full = plan(tmp_path, Mode.FULL)
    reasons = dict(full.skipped)
    assert "flatbuffers_ep" in full.cmake_targets and "flatbuffers_ep" not in reasons
    assert "executor_runner" in reasons["executor_runner"] and "_portable_lib" in reasons["pybindings"]


def test_rows_whose_packages_are_absent_say_so(tmp_path):
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "exir").mkdir()
    (tmp_path / "exir" / "__init__.py").write_text("")
    absent = dict(plan(tmp_path, Mode.MINIMAL).absent)
    assert "exir" not in absent
    assert absent["runtime_py"] == "executorch.runtime.**"
    assert set(absent) == {row.name for row in plan(tmp_path, Mode.MINIMAL).rows if row.packages} - {"exir"}


def test_table_printout_marks_absent_rows_and_only_those():
    proc = subprocess.run([sys.executable, "-m", "tools.packaging"], cwd=REPO, capture_output=True, text=True,
                          check=True)
    lines = {line.split()[0]: line for line in proc.stdout.splitlines() if line and not line.startswith(" ")}
    available = sourcetree.regular_packages(REPO)
    for row in COMPONENTS:
        present = not row.packages or any(sourcetree.matches(p, name) for p in row.packages for name in available)
        assert ("absent" in lines[row.name]) is (not present), lines[row.name]
        if not present:
            assert f"no package {row.packages[0]}" in lines[row.name]


def test_full_wheel_alone_ships_the_tutorial_partitioner_and_the_graph_tools():
    # The published wheel has these; the minimal wheel, an exporter with a size budget, leaves them out.
    shipped = {"executorch.exir.backend.test": ("op_partitioner_demo", "backend_with_compiler_demo"),
               "executorch.exir": ("_plan_checks",), "executorch.exir._serialize": ("_pte_tools",),
               "executorch.exir.emit": ("_emit_program",)}
    for mode in Mode:
        built = plan(REPO, mode)
        for package, modules in shipped.items():
            for module in modules:
                assert built.ships_module(package, module) is (mode == Mode.FULL), (mode, package, module)
        assert built.ships_module("executorch.exir._serialize", "_program")
        assert built.ships_module("executorch.exir", "memory_planning")
        # What vendor backends run in their preprocess (Vulkan's): every wheel, for the minimal one's vendors.
        for package, module in (("executorch.exir.passes", "spec_prop_pass"), ("executorch.exir.passes",
                                "sym_shape_eval_pass"), ("executorch.exir", "_spec_planners"),
                                ("executorch.exir._serialize", "_flatbuffer")):
            assert built.ships_module(package, module), (mode, package, module)
