"""Standard transformer blocks end to end on every runtime at hand: files we write run on our
Python and native runtimes and on the published runtime, and the published exporter's files
run on ours, each matching eager (executorch.devtools.compare: tolerances relative to the output).

The published runtime's checks need ET_REFERENCE_PYTHON (see conftest.py); the native ones a
built native runtime. Each skips with its reason otherwise.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import torch
from torch.utils._pytree import tree_leaves

from executorch.devtools.compare import assert_outputs_close
from executorch.exir import to_edge_transform_and_lower
from executorch.exir._serialize import deserialize_pte_binary
from executorch.exir.schema import KernelCall, Tensor

import transformer_models  # noqa: E402
from conftest import project_runtimes  # noqa: E402

NAMES = sorted(transformer_models.FACTORIES)
RUNTIMES = ["python", "native"]


def _eager(name: str) -> tuple[list, list]:
    model, inputs = transformer_models.FACTORIES[name]()
    with torch.no_grad():
        return list(inputs), tree_leaves(model(*inputs))


@pytest.fixture(scope="module")
def ours(tmp_path_factory) -> Path:
    """Every model exported once by this project, as NAME.pte with its inputs as NAME.in.pt."""
    root = tmp_path_factory.mktemp("ours")
    for name in NAMES:
        model, inputs = transformer_models.FACTORIES[name]()
        program = to_edge_transform_and_lower(torch.export.export(model, inputs)).to_executorch()
        (root / f"{name}.pte").write_bytes(program.buffer)
        torch.save(list(inputs), root / f"{name}.in.pt")
    return root


@pytest.fixture(scope="module")
def published(reference_runtime, tmp_path_factory) -> Path:
    """Every model exported once by the published exporter, as NAME.pte."""
    root = tmp_path_factory.mktemp("published")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # its own executorch, not ours
    proc = subprocess.run([reference_runtime.python, transformer_models.__file__, str(root), *NAMES],
                          capture_output=True, text=True, timeout=3600, env=env)
    assert proc.returncode == 0, f"the published exporter failed: {proc.stderr[-2000:]}"
    return root


@pytest.fixture(scope="module")
def ours_on_published_runtime(ours, reference_runtime) -> dict[str, str]:
    """Our files run once on the published runtime; NAME.out.pt holds the outputs, failures by name."""
    return reference_runtime.run_batch(ours, NAMES)


def _runtime(kind: str):
    runtimes = project_runtimes()
    if kind not in runtimes:
        pytest.skip(f"the {kind} runtime is not built here (build with -DEXECUTORCH_BUILD_PYBIND=ON and copy "
                    "_portable_lib*.so into extension/pybindings/)")
    return runtimes[kind]


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("name", NAMES)
def test_our_file_runs_on_project_runtime(name, runtime, ours):
    inputs, expected = _eager(name)
    method = _runtime(runtime).load_program((ours / f"{name}.pte").read_bytes()).load_method("forward")
    assert_outputs_close(method.execute(inputs), expected)


@pytest.mark.parametrize("name", NAMES)
def test_our_file_runs_on_published_runtime(name, ours, ours_on_published_runtime):
    assert name not in ours_on_published_runtime, ours_on_published_runtime.get(name)
    _, expected = _eager(name)
    assert_outputs_close(torch.load(ours / f"{name}.out.pt"), expected)


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("name", NAMES)
def test_published_file_runs_on_project_runtime(name, runtime, published):
    inputs, expected = _eager(name)
    method = _runtime(runtime).load_program((published / f"{name}.pte").read_bytes()).load_method("forward")
    assert_outputs_close(method.execute(inputs), expected)


def _kernel_layouts(data: bytes) -> list:
    """Each kernel call as its operator and the (sizes, dim order) of its tensor arguments.
    `view_copy` calls are left out: this exporter turns static ones into aliases, the published
    one keeps those that write a method output. So are squeeze/unsqueeze copies and same-shape
    expands, which this exporter also aliases (the published one calls their kernels)."""
    plan = deserialize_pte_binary(data).program.execution_plan[0]
    calls = []
    for instruction in plan.chains[0].instructions:
        call = instruction.instr_args
        if not isinstance(call, KernelCall):
            continue
        name = plan.operators[call.op_index].name
        tensors = [plan.values[i].val for i in call.args if isinstance(plan.values[i].val, Tensor)]
        if name in ("aten::view_copy", "aten::squeeze_copy", "aten::unsqueeze_copy") or (
                name == "aten::expand_copy" and list(tensors[0].sizes) == list(tensors[-1].sizes)):
            continue
        calls.append((plan.operators[call.op_index].name, [(list(t.sizes), list(t.dim_order)) for t in tensors]))
    return calls


@pytest.mark.parametrize("name", NAMES)
def test_our_tensor_layouts_are_the_published_exporters(name, ours, published):
    # Both exporters lower the same graph to the same kernel calls; each call's tensors must have
    # the dim orders the published exporter gives them (its runtime refuses stale ones).
    assert (_kernel_layouts((ours / f"{name}.pte").read_bytes())
            == _kernel_layouts((published / f"{name}.pte").read_bytes()))


@pytest.mark.parametrize("corrupt", [torch.zeros_like, torch.neg, lambda t: t.flip(-1)],
                         ids=["zeros", "negated", "permuted"])
def test_comparison_fails_on_a_wrong_output(corrupt):
    _, expected = _eager("llama_decoder")
    with pytest.raises(AssertionError, match="beyond tolerance"):
        assert_outputs_close([corrupt(expected[0])], expected)
    assert_outputs_close([expected[0].clone()], expected)
