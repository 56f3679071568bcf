"""kernels/portable/functions.yaml lists exactly the kernels the sources register, and covers
every operator the published exporter used for MobileNetV2."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

KERNELS = Path(__file__).resolve().parents[1] / "kernels" / "portable"
_REGISTRATION = re.compile(r'ET_REGISTER_KERNEL\("([^"]+)",\s*([\w<>]+)\)')


def _yaml_entries() -> list[tuple[str, str, str]]:
    # The file is a flat list of three-key mappings; reading it needs no YAML library.
    text = (KERNELS / "functions.yaml").read_text()
    entries = re.findall(r"^- op: (\S+)\n  kernel: (\S+)\n  file: (\S+)$", text, re.M)
    assert len(entries) == text.count("- op:"), "functions.yaml has an entry not in the op/kernel/file form"
    return entries


def _registrations() -> set[tuple[str, str, str]]:
    found = set()
    for path in sorted(KERNELS.glob("op_*.cpp")) + [KERNELS.parent / "prim_ops" / "register_prim_ops.cpp"]:
        rel = Path("..", "prim_ops", path.name).as_posix() if path.parent.name == "prim_ops" else path.name
        found |= {(op, fn, rel) for op, fn in _REGISTRATION.findall(path.read_text())}
    return found


def test_yaml_equals_registrations():
    entries = _yaml_entries()
    assert len(entries) == len(set(entries)), "duplicate entries in functions.yaml"
    assert set(entries) == _registrations()


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
