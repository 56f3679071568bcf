"""executorch.export: recipes, the staged ExportSession, providers, the CLI, and its errors."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from executorch.devtools.compare import assert_outputs_close, compare_outputs
from executorch.examples.models import MODELS
from executorch.exir import to_edge_transform_and_lower
from executorch.exir.error import ExportError
from executorch.export import (BackendRecipeProvider, ExportRecipe, ExportSession, LoweringRecipe, RecipeType,
                               StageType, export, recipe_registry)
from executorch.export.portable_recipes import PortableRecipeType

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["mobilenet_v2", "transformer_encoder", "multi_io"])
def test_zoo_export_matches_step_by_step_bytes_and_eager(name):
    model, inputs = MODELS[name]()
    session = export(model, [inputs], ExportRecipe.get_recipe(PortableRecipeType.FP32))
    # the recipe exports strictly (ExportRecipe.strict=True, as published); the same settings step by step
    step_by_step = to_edge_transform_and_lower(torch.export.export(model, inputs, strict=True)).to_executorch().buffer
    assert session.get_pte_buffer() == step_by_step
    with torch.no_grad():
        assert_outputs_close(session.run_method("forward"), model(*inputs))


def test_default_recipe_is_portable_fp32_and_stages_run_in_order():
    model, inputs = MODELS["multi_io"]()
    session = export(model, [inputs])
    assert list(session.get_stage_artifacts()) == [
        StageType.SOURCE_TRANSFORM, StageType.QUANTIZE, StageType.TORCH_EXPORT,
        StageType.TO_EDGE_TRANSFORM_AND_LOWER, StageType.TO_EXECUTORCH]
    assert all(a.get_context("duration_ms") is not None for a in session.get_stage_artifacts().values())
    assert session.get_executorch_program().execution_plan[0].name == "forward"


def _run_published_api_script(python: str, env=None) -> None:
    script = ROOT / "test" / "fixtures" / "published_export_api_script.py"
    done = subprocess.run([python, str(script)], capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    errors = dict(re.findall(r"^(\w+) rel_err (\S+)$", done.stdout, re.M))
    assert set(errors) == {"add", "scale"}, done.stdout
    assert all(float(e) <= 1e-5 for e in errors.values()), errors


def test_script_written_for_the_published_api_runs_unchanged():
    _run_published_api_script(sys.executable)


def test_the_script_also_runs_on_published_executorch(reference_runtime, tmp_path):
    # Proves the script uses the published API only. Published `executorch.export` imports torchao,
    # which the reference environment lacks: this environment's torchao goes on its path.
    import importlib.util

    spec = importlib.util.find_spec("torchao")
    if spec is None:
        pytest.skip("torchao is not installed here (pip install torchao==0.18.0)")
    (tmp_path / "torchao").symlink_to(Path(spec.submodule_search_locations[0]), target_is_directory=True)
    _run_published_api_script(reference_runtime.python, dict(os.environ, PYTHONPATH=str(tmp_path)))


def test_exported_program_input_and_save(tmp_path):
    model, inputs = MODELS["multi_io"]()
    ep = torch.export.export(model, inputs)
    session = export(ep, [inputs])
    assert StageType.TORCH_EXPORT not in session.get_stage_artifacts()
    session.save_to_pte(str(tmp_path / "m"))  # the suffix is added, as the published API does
    assert (tmp_path / "m.pte").read_bytes() == session.get_pte_buffer()


def test_executor_backend_provides_a_recipe_through_the_registry():
    from executorch.exir.backend.test.demos.rpc.executor_backend_recipes import ExecutorBackendRecipeType

    assert "executor_backend" in recipe_registry.list_backends()
    model, inputs = MODELS["multi_io"]()
    session = export(model, [inputs], ExportRecipe.get_recipe(ExecutorBackendRecipeType.FP32))
    info = session.get_stage_artifacts()[StageType.TO_EDGE_TRANSFORM_AND_LOWER].get_context("delegation_info")
    assert info.num_delegated_subgraphs >= 1 and info.num_non_delegated_nodes == 0
    assert session.get_executorch_program().execution_plan[0].delegates
    with torch.no_grad():
        assert_outputs_close(session.run_method("forward"), model(*inputs))


def test_a_new_backend_registers_its_provider():
    class ToyRecipeType(RecipeType):
        FAST = "toy_fast"

        @classmethod
        def get_backend_name(cls) -> str:
            return "toy"

    class ToyProvider(BackendRecipeProvider):
        backend_name = "toy"

        def get_supported_recipes(self):
            return [ToyRecipeType.FAST]

        def create_recipe(self, recipe_type, **kwargs):
            return ExportRecipe(name="toy", lowering_recipe=LoweringRecipe())

    recipe_registry.register_backend_recipe_provider(ToyProvider())
    assert ExportRecipe.get_recipe(ToyRecipeType.FAST).name == "toy"


def test_combine_merges_partitioners_and_refuses_conflicts():
    a = ExportRecipe(name="a", lowering_recipe=LoweringRecipe(partitioners=["p1"]))
    b = ExportRecipe(name="b", lowering_recipe=LoweringRecipe(partitioners=["p2"]))
    both = ExportRecipe.combine([a, b])
    assert both.name == "a_b" and both.lowering_recipe.partitioners == ["p1", "p2"]
    with pytest.raises(ValueError, match="strict"):
        ExportRecipe.combine([a, ExportRecipe(strict=False)])


def test_multi_method_runs_both():
    class Plus(torch.nn.Module):
        def forward(self, x):
            return x + 1

    class Times(torch.nn.Module):
        def forward(self, x):
            return x * 3

    x = torch.randn(3)
    session = export({"plus": Plus(), "times": Times()}, {"plus": [(x,)], "times": [(x,)]})
    assert_outputs_close(session.run_method("plus"), [x + 1])
    assert_outputs_close(session.run_method("times"), [x * 3])
    # A wrong answer fails the same gate.
    assert not compare_outputs(session.run_method("times"), [x * 3 + 1e-3]).ok


def test_unknown_recipe_lists_known_ones():
    with pytest.raises(ValueError, match=r"known recipes: .*PortableRecipeType\.FP32"):
        ExportRecipe.get_recipe("portable_fp16")


def test_mismatched_inputs_name_method_and_argument():
    class Two(torch.nn.Module):
        def forward(self, x, y):
            return x + y

    with pytest.raises(ExportError, match=r"stage 'torch_export'.*method 'forward': argument 'y' has no example input"):
        export(Two(), [(torch.randn(2),)])
    with pytest.raises(ValueError, match=r"method 'b' has no example inputs"):
        export({"a": Two(), "b": Two()}, {"a": [(torch.randn(2), torch.randn(2))]})


def test_bad_dynamic_shapes_name_the_method():
    model, inputs = MODELS["transformer_encoder"]()
    bad = {"x": {0: torch.export.Dim("batch", max=4)}, "y": None}
    with pytest.raises(ExportError, match=r"method 'forward': dynamic_shapes failed"):
        export(model, [inputs], dynamic_shapes=bad)


def test_failing_stage_is_named_and_earlier_artifacts_stay_readable():
    def broken(method, ep):
        raise RuntimeError("this pass always fails")

    model, inputs = MODELS["multi_io"]()
    recipe = ExportRecipe(lowering_recipe=LoweringRecipe(edge_transform_passes=[broken]))
    session = ExportSession(model, [inputs], recipe)
    with pytest.raises(ExportError, match=r"export stage 'to_edge_transform_and_lower' failed: this pass always fails"):
        session.export()
    assert isinstance(session.get_exported_program("forward"), torch.export.ExportedProgram)
    with pytest.raises(RuntimeError, match="to_executorch stage has not run"):
        session.get_pte_buffer()


def test_unsupported_options_are_refused_by_name():
    model, inputs = MODELS["multi_io"]()
    with pytest.raises(ValueError, match="generate_etrecord must be True or False"):
        export(model, [inputs], generate_etrecord="yes")
    with pytest.raises(ValueError, match="artifact_dir"):
        export(model, [inputs], artifact_dir="/tmp")


def test_generate_etrecord_gives_the_session_an_etrecord(tmp_path):
    from executorch.devtools.etrecord import parse_etrecord

    model, inputs = MODELS["multi_io"]()
    session = export(model, [inputs], generate_etrecord=True)
    session.get_etrecord().save(tmp_path / "s.etrecord")
    record = parse_etrecord(tmp_path / "s.etrecord")
    handles = set(record._debug_handle_map["forward"].values())
    graph_handles = {n.meta.get("debug_handle") for n in record.edge_dialect_program.graph.nodes
                     if n.op == "call_function"}
    assert handles and handles <= graph_handles  # every kernel instruction maps to a recorded node
    with pytest.raises(ExportError, match="generate_etrecord=True"):
        export(model, [inputs]).get_etrecord()


def test_cli_prints_each_stage_and_verifies(tmp_path):
    out = tmp_path / "m.pte"
    done = subprocess.run([sys.executable, "-m", "executorch.export", "multi_io", "--recipe", "portable", "-o",
                           str(out)], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    for stage in ("torch_export", "to_edge_transform_and_lower", "to_executorch"):
        assert re.search(rf"^  {stage}\s+\d+\.\d\ds$", done.stdout, re.M), done.stdout
    assert "OK: " in done.stdout and out.is_file()
    bad = subprocess.run([sys.executable, "-m", "executorch.export", "multi_io", "--recipe", "nope", "-o",
                          str(out)], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert bad.returncode == 2 and "known recipes: " in bad.stderr and "portable_int8" in bad.stderr
