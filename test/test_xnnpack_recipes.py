"""`executorch.backends.xnnpack.recipes`: XNNPACK's export recipes, as published (names, quantizers, torchao
configs, lowering), end to end through `executorch.export` and its command line."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import xnnpack_quant_models as models  # noqa: E402
import xnnpack_recipe_describe as described  # noqa: E402

from executorch.backends.xnnpack.recipes import XNNPackRecipeType  # noqa: E402
from executorch.devtools.compare import compare_outputs  # noqa: E402
from executorch.export import ExportRecipe, StageType, export, recipe_registry  # noqa: E402

R = XNNPackRecipeType
HAS_TORCHAO = importlib.util.find_spec("torchao") is not None
needs_torchao = pytest.mark.skipif(not HAS_TORCHAO, reason="torchao is not installed (pip install torchao==0.18.0)")


def test_recipe_types_are_the_published_names():
    assert {r.name: r.value for r in R} == {
        "FP32": "xnnpack_fp32",
        "PT2E_INT8_DYNAMIC_PER_CHANNEL": "xnnpack_pt2e_int8_dynamic_per_channel",
        "PT2E_INT8_STATIC_PER_CHANNEL": "xnnpack_pt2e_int8_static_per_channel",
        "PT2E_INT8_STATIC_PER_TENSOR": "xnnpack_pt2e_int8_static_per_tensor",
        "TORCHAO_INT8_DYNAMIC_ACT_INT4_WEIGHT_PER_CHANNEL": "xnnpack_torchao_int8da_int4w_per_channel",
        "TORCHAO_INT8_DYNAMIC_ACT_INT4_WEIGHT_PER_TENSOR": "xnnpack_torchao_int8da_int4w_per_tensor",
    }
    assert R.get_backend_name() == "xnnpack" and "xnnpack" in recipe_registry.list_backends()
    assert list(recipe_registry.get_supported_recipes("xnnpack")) == list(R)


def test_options_are_refused_by_name():
    with pytest.raises(ValueError, match=r"xnnpack_fp32 takes no options; got \['group_size'\]"):
        ExportRecipe.get_recipe(R.FP32, group_size=8)
    with pytest.raises(ValueError, match=r"takes only 'group_size'; got \['bits'\]"):
        ExportRecipe.get_recipe(R.TORCHAO_INT8_DYNAMIC_ACT_INT4_WEIGHT_PER_TENSOR, bits=4)
    for bad in (0, -32, 16.0, True):
        with pytest.raises(ValueError, match="group_size must be a positive int"):
            ExportRecipe.get_recipe(R.TORCHAO_INT8_DYNAMIC_ACT_INT4_WEIGHT_PER_TENSOR, group_size=bad)


def test_quantized_recipes_name_the_torchao_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torchao" else real(name, *a))
    with pytest.raises(ModuleNotFoundError, match=r"xnnpack_pt2e_int8_static_per_channel needs the torchao .*"
                                                  r"pip install torchao==0\.18\.0"):
        ExportRecipe.get_recipe(R.PT2E_INT8_STATIC_PER_CHANNEL)


@needs_torchao
def test_recipes_hold_what_the_published_ones_hold():
    recipes = {r.name: described.describe(ExportRecipe.get_recipe(r)) for r in R}
    assert recipes["FP32"]["quantizers"] is None and recipes["FP32"]["ao"] is None
    static = recipes["PT2E_INT8_STATIC_PER_TENSOR"]["quantizers"][0]
    assert static["type"] == "XNNPACKQuantizer" and static["weight"]["qscheme"] == "torch.per_tensor_symmetric"
    dynamic = recipes["PT2E_INT8_DYNAMIC_PER_CHANNEL"]["quantizers"][0]
    assert dynamic["input_activation"]["dynamic"] and dynamic["output_activation"] is None
    assert dynamic["weight"]["qscheme"] == "torch.per_channel_symmetric"
    per_channel = recipes["TORCHAO_INT8_DYNAMIC_ACT_INT4_WEIGHT_PER_CHANNEL"]["ao"][0]
    assert per_channel["weight_dtype"] == "torch.int4" and per_channel["granularity"] == "PerAxis(axis=0)"
    assert (recipes["TORCHAO_INT8_DYNAMIC_ACT_INT4_WEIGHT_PER_TENSOR"]["ao"][0]["granularity"]
            == "PerGroup(group_size=32)")
    grouped = described.describe(ExportRecipe.get_recipe(R.TORCHAO_INT8_DYNAMIC_ACT_INT4_WEIGHT_PER_TENSOR,
                                                         group_size=16))
    assert grouped["ao"][0]["granularity"] == "PerGroup(group_size=16)"
    assert all(r["partitioners"] == ["XnnpackPartitioner"] for r in recipes.values())


@needs_torchao
def test_same_recipes_as_published(reference_runtime, tmp_path):
    script = Path(described.__file__)
    ours = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    theirs = subprocess.run([reference_runtime.python, str(script)], capture_output=True, text=True, timeout=600,
                            cwd=tmp_path)  # not this checkout's folder, so it imports the published package
    assert ours.returncode == 0 and theirs.returncode == 0, (ours.stderr[-2000:], theirs.stderr[-2000:])
    ours, theirs = json.loads(ours.stdout), json.loads(theirs.stdout)
    assert ours["members"] == theirs["members"]
    for name, recipe in theirs["recipes"].items():
        assert ours["recipes"][name] == recipe, name


def _delegate_count(session) -> int:
    return sum(len(plan.delegates) for plan in session.get_executorch_program().execution_plan)


def _xnn_datatypes(session) -> set:
    """The datatypes of every value in the session's XNNPACK payloads."""
    from executorch.backends.xnnpack.serialization import xnnpack_graph_schema as xs
    from executorch.backends.xnnpack.serialization.xnnpack_graph_serialize import deserialize_xnnpack_binary
    from executorch.exir._serialize._program import read_program

    program = read_program(session.get_pte_buffer())
    graphs = [deserialize_xnnpack_binary(program.segment_data[d.processed.index]).graph
              for plan in program.execution_plan for d in plan.delegates]
    return {xs.tensor_value(v).datatype.name for g in graphs for v in g.xvalues}


# What each quantized recipe's XNNPACK payload computes in: int8 values, or int8 rows quantized at run time.
QUANTIZED_VALUES = {
    R.PT2E_INT8_STATIC_PER_CHANNEL: {"xnn_datatype_qint8", "xnn_datatype_qcint8"},
    R.PT2E_INT8_STATIC_PER_TENSOR: {"xnn_datatype_qint8"},
    R.PT2E_INT8_DYNAMIC_PER_CHANNEL: {"xnn_datatype_qdint8", "xnn_datatype_qcint8"},
    R.TORCHAO_INT8_DYNAMIC_ACT_INT4_WEIGHT_PER_CHANNEL: {"xnn_datatype_qdint8", "xnn_datatype_qcint4"},
    # Groups of 16 here (CASES): XNNPACK's blockwise int4 takes groups of a multiple of 32 only, so these
    # linears stay float (a torchao program's linears are lowered quantized all together or not at all).
    R.TORCHAO_INT8_DYNAMIC_ACT_INT4_WEIGHT_PER_TENSOR: set(),
}


def _quantized_tolerance(model, inputs, reference) -> float:
    from executorch.cli.recipe import _quantized_tolerance as tolerance

    return tolerance(model, inputs, reference)


# (recipe, options, model factory): every recipe on a model with the ops it quantizes.
CASES = [
    (R.FP32, {}, models.make_pattern_mix),
    (R.PT2E_INT8_STATIC_PER_CHANNEL, {}, models.make_pattern_mix),
    (R.PT2E_INT8_STATIC_PER_TENSOR, {}, models.make_linear_stack),
    (R.PT2E_INT8_DYNAMIC_PER_CHANNEL, {}, models.make_linear_stack),
    (R.TORCHAO_INT8_DYNAMIC_ACT_INT4_WEIGHT_PER_CHANNEL, {}, models.make_linear_stack),
    (R.TORCHAO_INT8_DYNAMIC_ACT_INT4_WEIGHT_PER_TENSOR, {"group_size": 16}, models.make_linear_stack),
]


@pytest.mark.parametrize("recipe,options,factory", CASES, ids=[c[0].name for c in CASES])
def test_recipe_exports_delegates_and_runs(recipe, options, factory):
    if recipe is not R.FP32 and not HAS_TORCHAO:
        pytest.skip("torchao is not installed (pip install torchao==0.18.0)")
    model, inputs = factory()
    session = export(model, [inputs], ExportRecipe.get_recipe(recipe, **options))
    assert _delegate_count(session) > 0, "nothing was delegated to XNNPACK"
    assert QUANTIZED_VALUES.get(recipe, set()) <= _xnn_datatypes(session), _xnn_datatypes(session)
    from executorch.export._torch_threads import one_torch_thread

    with torch.no_grad(), one_torch_thread():
        got = session.run_method("forward", inputs)
        if recipe is R.FP32:
            # XNNPACK sums in its own order: float32 rounding, relative to the largest output.
            result = compare_outputs(got, model(*inputs), rtol=1e-4, atol=1e-4)
        else:
            # Against what the file computes: the converted pt2e module, or the torchao-transformed model.
            reference = session.get_stage_artifacts()[StageType.QUANTIZE].data["forward"](*inputs)
            atol = _quantized_tolerance(model, inputs, reference)
            if recipe is R.PT2E_INT8_DYNAMIC_PER_CHANNEL:
                # XNNPACK quantizes each row at run time where the converted module quantizes the whole
                # tensor: they part by about what quantization itself moves the outputs (the published
                # runtime too, 1.4e-2 here), not half of it.
                atol *= 2
            result = compare_outputs(got, reference, rtol=0.0, atol=atol)
    assert result.ok, f"{recipe.value}: {result}"


@pytest.mark.parametrize("name", ["xnnpack", "xnnpack_int8"])
def test_cli_exports_with_xnnpack_recipes(tmp_path, name):
    if name != "xnnpack" and not HAS_TORCHAO:
        pytest.skip("torchao is not installed (pip install torchao==0.18.0)")
    out = tmp_path / "m.pte"
    factory = f"{models.__file__}:make_pattern_mix"
    done = subprocess.run([sys.executable, "-m", "executorch.export", factory, "--recipe", name, "-o", str(out)],
                          capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "OK: " in done.stdout and "delegate call" in done.stdout and out.is_file()


def test_cli_lists_xnnpack_recipes(tmp_path):
    bad = subprocess.run([sys.executable, "-m", "executorch.export", "multi_io", "--recipe", "nope", "-o",
                          str(tmp_path / "m.pte")], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert bad.returncode == 2
    for name in ("xnnpack", "xnnpack_int8", "xnnpack_8da4w", "xnnpack_pt2e_int8_dynamic_per_channel"):
        assert name in bad.stderr, bad.stderr
