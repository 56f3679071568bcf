"""Files written by the published ExecuTorch exporter run on executorch.runtime and match eager torch.

Needs ET_REFERENCE_PYTHON (the published exporter); skipped without it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import torch
from torch.utils._pytree import tree_flatten

from executorch.devtools.compare import assert_outputs_close
from executorch.runtime import ExecuTorchError, Runtime

import runtime_models  # noqa: E402


@pytest.fixture(scope="module")
def published(reference_runtime, tmp_path_factory) -> Path:
    """Every model of runtime_models exported once by the published exporter."""
    out = tmp_path_factory.mktemp("published")
    # The reference environment must import its own executorch, not one a PYTHONPATH points at.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [reference_runtime.python, str(Path(runtime_models.__file__)), str(out), *runtime_models.FACTORIES],
        capture_output=True, text=True, timeout=1800, env=env)
    if proc.returncode != 0:
        raise AssertionError(f"the published exporter failed: {proc.stderr[-2000:]}")
    return out


def _eager(model, inputs) -> list[torch.Tensor]:
    with torch.no_grad():
        return tree_flatten(model(*inputs))[0]


def _check(outputs, expected) -> None:
    assert_outputs_close(outputs, expected)


@pytest.mark.parametrize("name", sorted(runtime_models.FACTORIES))
def test_published_file_matches_eager(published, name):
    model, inputs = runtime_models.FACTORIES[name]()
    method = Runtime.get().load_program(published / f"{name}.pte").load_method("forward")
    _check(method.execute(list(inputs)), _eager(model, inputs))
    # A second run reuses the planned memory and must give the same answer.
    _check(method.execute(list(inputs)), _eager(model, inputs))


def test_published_mobilenet_v2_repeated_with_new_inputs(published):
    model, _ = runtime_models.FACTORIES["mobilenet_v2"]()
    method = Runtime.get().load_program(published / "mobilenet_v2.pte").load_method("forward")
    torch.manual_seed(1)
    for _ in range(2):
        x = torch.randn(1, 3, 224, 224)
        _check(method.execute([x]), _eager(model, (x,)))


def test_published_dynamic_shapes_within_bound(published):
    model, _ = runtime_models.FACTORIES["dynamic_mlp"]()
    method = Runtime.get().load_program(published / "dynamic_mlp.pte").load_method("forward")
    meta = method.metadata.input_tensor_meta(0)
    assert meta.sizes() == (10, 8)  # the upper bound of the batch dimension
    torch.manual_seed(2)
    for batch in (1, 3, 10, 4):
        x = torch.randn(batch, 8)
        _check(method.execute([x]), _eager(model, (x,)))
    with pytest.raises(ExecuTorchError, match=r"input 0 .* past its upper bound \[10, 8\]"):
        method.execute([torch.randn(11, 8)])
    with pytest.raises(ExecuTorchError, match=r"input 0 .* must have 2 dimensions"):
        method.execute([torch.randn(4, 8, 1)])
    x = torch.randn(2, 8)
    _check(method.execute([x]), _eager(model, (x,)))


def test_published_two_outputs_come_back_in_order(published):
    model, inputs = runtime_models.FACTORIES["two_outputs"]()
    outputs = Runtime.get().load_program(published / "two_outputs.pte").load_method("forward").execute(inputs)
    assert isinstance(outputs, list) and len(outputs) == 2
    assert torch.all(outputs[0] >= 0) and torch.all((outputs[1] > 0) & (outputs[1] < 1))


def test_every_operator_of_the_published_portable_runtime_is_available(reference_runtime):
    from executorch.exir import schema
    from executorch.runtime._python._ops import resolve

    code = ("from executorch.extension.pybindings import portable_lib as p; "
            "print('\\n'.join(sorted(p._get_operator_names())))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([reference_runtime.python, "-c", code], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    names = [line for line in proc.stdout.splitlines() if "::" in line]
    assert len(names) > 100
    missing = []
    for qualified in names:
        base, _, overload = qualified.partition("::")[2].partition(".")
        try:
            resolve(schema.Operator(f"{qualified.partition('::')[0]}::{base}", overload))
        except ExecuTorchError as exc:
            missing.append(f"{qualified}: {exc}")
    assert missing == []


def test_published_control_flow_takes_both_branches_and_loops(published):
    cond = Runtime.get().load_program(published / "cond.pte").load_method("forward")
    model, _ = runtime_models.FACTORIES["cond"]()
    for sign in (1.0, -1.0):
        x, y = torch.full((4,), sign), torch.arange(4.0)
        _check(cond.execute([x, y]), _eager(model, (x, y)))
    mapped = Runtime.get().load_program(published / "map.pte").load_method("forward")
    model, (xs, y) = runtime_models.FACTORIES["map"]()
    for scale in (1.0, -3.0):
        _check(mapped.execute([xs * scale, y]), _eager(model, (xs * scale, y)))
