"""kernels/portable/functions.yaml is the only list of registrations (codegen turns it into each
source's registration include), names kernels the sources define, and covers
every operator the published exporter used for MobileNetV2."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

KERNELS = Path(__file__).resolve().parents[1] / "kernels" / "portable"
SOURCES = sorted(KERNELS.glob("op_*.cpp")) + [KERNELS.parent / "prim_ops" / "register_prim_ops.cpp"]
# A kernel: void NAME(KernelRuntimeContext&, Args); templates and macros define the rest.
_KERNEL_DEF = re.compile(r"^void (\w+)\(KernelRuntimeContext&\s*\w*,\s*Args\s*\w*\)", re.M)


def _rel(path: Path) -> str:
    return Path("..", "prim_ops", path.name).as_posix() if path.parent.name == "prim_ops" else path.name


def _yaml_entries() -> list[tuple[str, str, str]]:
    # The file is a flat list of three-key mappings; reading it needs no YAML library.
    text = (KERNELS / "functions.yaml").read_text()
    entries = re.findall(r"^- op: (\S+)\n  kernel: (\S+)\n  file: (\S+)$", text, re.M)
    assert len(entries) == text.count("- op:"), "functions.yaml has an entry not in the op/kernel/file form"
    return entries


def test_registration_only_through_the_generated_file():
    # The yaml is the only list: no source registers by hand, each includes what codegen writes.
    for path in SOURCES:
        text = path.read_text()
        assert "ET_REGISTER_KERNEL" not in text, path.name
        assert f'#include "portable_registrations/{path.stem}.inc"' in text, path.name
    assert {_rel(p) for p in SOURCES} == {f for _, _, f in _yaml_entries()}


def test_yaml_kernels_exist_and_every_kernel_is_listed():
    by_file: dict[str, set[str]] = {}
    for _, kernel, file in _yaml_entries():
        by_file.setdefault(file, set()).add(re.sub(r"<.*>$", "", kernel))
    for path in SOURCES:
        text, listed = path.read_text(), by_file.get(_rel(path), set())
        for kernel in listed:
            # Macro-made kernels (NAME##_out) show only their stem.
            stem = kernel.removesuffix("_out")
            assert re.search(rf"\b({kernel}|{stem})\b", text), f"{path.name}: no kernel {kernel}"
        # A kernel a load pass installs on an instruction (set_kernel) is called, never looked up by name.
        installed = set(re.findall(r"set_kernel\(\w+, (\w+),", text))
        unlisted = set(_KERNEL_DEF.findall(text)) - listed - installed
        assert not unlisted, f"{path.name}: kernels not in functions.yaml (never registered): {unlisted}"


def test_yaml_has_no_duplicates():
    entries = _yaml_entries()
    assert len(entries) == len(set(entries)), "duplicate entries in functions.yaml"


def test_each_op_registered_once():
    ops = [op for op, _, _ in _yaml_entries()]
    assert len(ops) == len(set(ops))
    assert all(re.fullmatch(r"[a-z_]+::[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)?", op) for op in ops)


@pytest.mark.parametrize("op", [
    "aten::convolution.out", "aten::_native_batch_norm_legit_no_training.out", "aten::hardtanh.out",
    "aten::add.out", "aten::mean.out", "dim_order_ops::_clone_dim_order.out", "aten::permute_copy.out",
    "aten::addmm.out", "aten::max_pool2d_with_indices.out", "aten::relu.out", "aten::_softmax.out",
    "aten::native_layer_norm.out", "aten::bmm.out", "aten::sym_size.int", "executorch_prim::et_view.default",
])
def test_model_zoo_operators_listed(op):
    assert op in {o for o, _, _ in _yaml_entries()}
