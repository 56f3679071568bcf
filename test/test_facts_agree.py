"""Facts that other languages or build steps must spell again agree with their one home.

The ScalarType codes live in exir/schema.py and the dtype table in exir/_dtypes.py; the FlatBuffer
schema, the C++ runtime header and the build-time codegen repeat them, read here as text.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from executorch.exir import _dtypes
from executorch.exir.schema import ScalarType

ROOT = Path(__file__).resolve().parents[1]


def _enum_body(path: Path, head: str) -> str:
    text = re.sub(r"//[^\n]*", "", (ROOT / path).read_text())
    found = re.search(head + r"\s*\{(.*?)\}", text, flags=re.S)
    assert found, f"{path}: no {head!r} block"
    return found.group(1)


def _enum(path: Path, head: str) -> dict[str, int]:
    members = {}
    for item in filter(None, (part.strip() for part in _enum_body(path, head).split(","))):
        name, value = (x.strip() for x in item.split("="))
        members[name] = int(value)
    return members


def _key(name: str) -> str:
    """C++ spells Float8_e5m2 where the schema spells FLOAT8E5M2."""
    return name.replace("_", "").upper()


def test_flatbuffer_schema_has_the_python_codes():
    assert _enum(Path("schema/scalar_type.fbs"), r"enum ScalarType : byte") == {t.name: t.value for t in ScalarType}


def test_cpp_header_has_the_python_codes():
    cpp = _enum(Path("runtime/core/scalar_type.h"), r"enum class ScalarType : int8_t")
    assert {_key(n): v for n, v in cpp.items()} == {_key(t.name): t.value for t in ScalarType}
    assert len(cpp) == len(ScalarType)


def _cpp_switch(function: str) -> dict[str, str]:
    """The `case ScalarType::X:` labels of a switch in scalar_type.cpp and the value each returns."""
    text = (ROOT / "runtime/core/scalar_type.cpp").read_text()
    body = re.search(function + r"\(ScalarType type\) \{(.*?)\n\}", text, flags=re.S)
    assert body, f"runtime/core/scalar_type.cpp: no {function}"
    out, pending = {}, []
    for label, value in re.findall(r"case ScalarType::(\w+):|return ([^;]+);", body.group(1)):
        if label:
            pending.append(label)
        else:
            out.update({_key(p): value.strip().strip('"') for p in pending})
            pending = []
    return out


def test_cpp_element_sizes_and_names_follow_the_dtype_table():
    sizes = _cpp_switch("size_t element_size")
    names = _cpp_switch("const char\\* scalar_type_name")
    assert sizes == {_key(d.scalar_type.name): str(d.itemsize) for d in _dtypes.DTYPES}
    assert names == {_key(d.scalar_type.name): d.name for d in _dtypes.DTYPES}


def test_codegen_codes_are_the_schema_codes():
    from executorch.tools.selective_build import gen_registrations as g

    assert (g._FLOAT, g._HALF, g._BFLOAT16) == (ScalarType.FLOAT, ScalarType.HALF, ScalarType.BFLOAT16)


def test_a_drifted_header_is_caught(tmp_path, monkeypatch):
    """The check reads what the header says: a renumbered enumerator fails it."""
    header = (ROOT / "runtime/core/scalar_type.h").read_text().replace("Float = 6,", "Float = 8,")
    (tmp_path / "runtime/core").mkdir(parents=True)
    (tmp_path / "runtime/core/scalar_type.h").write_text(header)
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    with pytest.raises(AssertionError):
        test_cpp_header_has_the_python_codes()



def test_alignment_defaults_and_checks_have_one_home():
    from executorch.exir import ExportError
    from executorch.exir._serialize import DEFAULT_CONSTANT_TENSOR_ALIGNMENT, DEFAULT_DELEGATE_ALIGNMENT
    from executorch.exir._serialize import _alignment
    from executorch.exir._serialize._named_data_store import NamedDataStore
    from executorch.exir.config import ExecutorchBackendConfig
    from executorch.exir.memory_planning import MemoryPlanningPass
    from executorch.exir.tensor import ALIGNMENT
    from executorch.extension.flat_tensor.serialize.serialize import FlatTensorConfig

    assert ExecutorchBackendConfig().segment_alignment == FlatTensorConfig().segment_alignment \
        == _alignment.DEFAULT_SEGMENT_ALIGNMENT
    assert DEFAULT_CONSTANT_TENSOR_ALIGNMENT == DEFAULT_DELEGATE_ALIGNMENT == _alignment.DEFAULT_TENSOR_ALIGNMENT
    assert MemoryPlanningPass().alignment == ALIGNMENT
    assert [v for v in (True, 0, -4, 3, 24, 1.0, 1, 2, 16, 128) if _alignment.is_power_of_two(v)] == [1, 2, 16, 128]
    with pytest.raises(ExportError, match="segment_alignment=24"):
        ExecutorchBackendConfig(segment_alignment=24)
    with pytest.raises(ExportError, match="alignment=24"):
        MemoryPlanningPass(alignment=24)
    with pytest.raises(ExportError, match="alignment 24"):
        NamedDataStore().add_named_data("k", b"1234", alignment=24)


def _torch_pin() -> str:
    lines = [ln.strip() for ln in (ROOT / "requirements-torch.txt").read_text().splitlines()]
    (pin,) = [ln for ln in lines if ln.startswith("torch==")]
    return pin


def test_the_wheel_names_the_pinned_torch():
    from executorch.exir import _torch_check

    assert _torch_check.TESTED == _torch_pin()


# Where the docs and scripts give a torch install spec; each must be the pinned one.
_DOCS = ["README.md", "README-wheel.md", "BENCHMARKS.md", "docs/*.md", "requirements-dev.txt", "tools/*.sh",
         ".ci/scripts/*.sh", "benchmarks/*.sh"]
_MENTION = re.compile(r"\btorch==(\d+\.\d+\.\d+)")


def _mentions() -> list[tuple[str, str]]:
    found = []
    for pattern in _DOCS:
        for path in sorted(ROOT.glob(pattern)):
            for line in path.read_text().splitlines():
                # A sysroot's torch for a cross build is the user's choice, given as an example.
                if "e.g. torch==" not in line:
                    found += [(str(path.relative_to(ROOT)), v) for v in _MENTION.findall(line)]
    return found


def test_docs_and_scripts_name_the_pinned_torch():
    pinned = _torch_pin().removeprefix("torch==")
    mentions = _mentions()
    assert len(mentions) >= 3, f"the docs give few torch install specs ({mentions}): is the check reading them?"
    wrong = [(path, version) for path, version in mentions if version != pinned]
    assert not wrong, f"these name another torch than requirements-torch.txt ({pinned}): {wrong}"


def test_view_copies_the_emitter_aliases_are_edge_copies():
    from executorch.exir.dialects import _edge_ops

    copies = set(_edge_ops.VIEW_TO_COPY.values())
    assert _edge_ops.ALIAS_VIEW_COPIES | _edge_ops.SAME_ORDER_COPIES <= copies
    assert not _edge_ops.ALIAS_VIEW_COPIES & _edge_ops.SAME_ORDER_COPIES


def test_both_engines_stop_a_run_at_the_same_instruction_count():
    from executorch.runtime._python import _method

    header = (ROOT / "runtime/executor/method.h").read_text()
    found = re.search(r"kDefaultInstructionLimit\s*=\s*([0-9']+);", header)
    assert found, "runtime/executor/method.h: no kDefaultInstructionLimit"
    assert int(found.group(1).replace("'", "")) == _method.MAX_INSTRUCTIONS
