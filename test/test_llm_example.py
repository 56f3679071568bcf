"""The KV-cache Llama example against eager: dynamic-shape prefill and decode steps on one loaded
method, and prefill and decode as two methods of one program sharing the cache."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from executorch.devtools.compare import assert_outputs_close, compare_outputs
from executorch.exir import ExecutorchBackendConfig, to_edge
from executorch.exir import schema as S
from executorch.exir.passes import MemoryPlanningPass
from executorch.runtime import ExecuTorchError

from conftest import REPO, project_runtimes  # noqa: E402

sys.path.insert(0, str(REPO / "examples" / "models"))
from llama_kv_cache import (  # noqa: E402
    generate,
    make_llama_kv_cache,
    make_llama_kv_cache_dynamic_shapes,
    make_llama_kv_cache_methods,
)

PROMPT = [1, 5, 9, 200, 17]
RUNTIMES = project_runtimes()


def _calls() -> list:
    first = [torch.tensor([PROMPT]), torch.arange(len(PROMPT))]
    steps = [[torch.tensor([[t]]), torch.tensor([len(PROMPT) + i])] for i, t in enumerate([3, 250, 64])]
    return [("forward", first)] + [("forward", s) for s in steps]


@pytest.fixture(scope="module")
def lowered(tmp_path_factory):
    model, example = make_llama_kv_cache()
    ep = torch.export.export(copy.deepcopy(model), example, dynamic_shapes=make_llama_kv_cache_dynamic_shapes())
    root = tmp_path_factory.mktemp("llama_kv")
    (root / "llama.pte").write_bytes(to_edge(ep).to_executorch().buffer)
    torch.save(_calls(), root / "llama.calls.pt")
    eager = copy.deepcopy(model)
    with torch.no_grad():
        want = [eager(*inputs) for _, inputs in _calls()]
    return {"root": root, "model": model, "eager": want}


@pytest.mark.parametrize("engine", sorted(RUNTIMES))
def test_prefill_then_decode_matches_eager(lowered, engine):
    method = RUNTIMES[engine].load_program(lowered["root"] / "llama.pte").load_method("forward")
    for i, ((_, inputs), want) in enumerate(zip(_calls(), lowered["eager"])):
        result = compare_outputs([method.execute(inputs)[0]], [want], rtol=1e-4, atol=1e-4)
        assert result.ok, f"call {i}: {result}"


@pytest.mark.parametrize("engine", sorted(RUNTIMES))
def test_generate_matches_eager(lowered, engine):
    method = RUNTIMES[engine].load_program(lowered["root"] / "llama.pte").load_method("forward")
    eager = copy.deepcopy(lowered["model"])
    with torch.no_grad():
        want = generate(lambda args: [eager(*args)], PROMPT, 12)
    assert generate(method.execute, PROMPT, 12) == want


def test_generate_refuses_a_prompt_past_the_cache():
    with pytest.raises(ValueError, match="must fit the 64-position cache"):
        generate(lambda args: None, list(range(60)), 8)


def test_published_runtime_decodes_the_example(lowered, reference_runtime):
    root = lowered["root"]
    runner = Path(__file__).with_name("reference_stateful.py")
    proc = subprocess.run([reference_runtime.python, str(runner), str(root), "llama"], capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0 and not (root / "llama.err.txt").exists(), proc.stderr[-2000:]
    for outs, want in zip(torch.load(root / "llama.out.pt"), lowered["eager"]):
        assert_outputs_close(outs, [want], rtol=1e-4, atol=1e-4)


SHARED = ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(share_mutable_buffers=True))


def _two_method_calls() -> list:
    return [("prefill", inputs) if i == 0 else ("decode", inputs) for i, (_, inputs) in enumerate(_calls())]


@pytest.fixture(scope="module")
def two_methods(tmp_path_factory):
    model, _ = make_llama_kv_cache()
    edge = to_edge(make_llama_kv_cache_methods(copy.deepcopy(model)))
    root = tmp_path_factory.mktemp("llama_two")
    program = edge.to_executorch(SHARED)
    (root / "llama2.pte").write_bytes(program.buffer)
    (root / "unshared.pte").write_bytes(edge.to_executorch().buffer)
    torch.save(_two_method_calls(), root / "llama2.calls.pt")
    eager = copy.deepcopy(model)
    with torch.no_grad():
        want = [eager(*inputs) for _, inputs in _two_method_calls()]
    return {"root": root, "model": model, "eager": want, "program": program.executorch_program}


def _run_calls(runtime, path, calls) -> list:
    program = runtime.load_program(path)
    methods = {}
    outs = []
    for name, inputs in calls:
        if name not in methods:  # each method loads when first called: after the prefill has run
            methods[name] = program.load_method(name)
        outs.append(methods[name].execute(inputs)[0])
    return outs


def test_two_methods_plan_one_cache_in_arena_2(two_methods):
    plans = {p.name: p for p in two_methods["program"].execution_plan}
    assert set(plans) == {"prefill", "decode"}
    places = {}
    for name, plan in plans.items():
        found = {}
        for v in plan.values:
            t = v.val
            if isinstance(t, S.Tensor) and t.allocation_info is not None and t.allocation_info.memory_id == 2:
                found[t.allocation_info.memory_offset] = (tuple(t.sizes), t.scalar_type)
        places[name] = found
    # 2 layers x (k, v), each (1, 2 kv heads, 64 positions, 16) float32, at the same places in both methods
    assert places["prefill"] == places["decode"] and len(places["decode"]) == 4
    assert {s for s, _ in places["decode"].values()} == {(1, 2, 64, 16)}
    sizes = {name: list(plan.non_const_buffer_sizes) for name, plan in plans.items()}
    assert sizes["prefill"][2] == sizes["decode"][2] == 4 * 64 * 2 * 16 * 4


@pytest.mark.parametrize("engine", sorted(RUNTIMES))
def test_two_methods_prefill_then_decode_match_eager(two_methods, engine):
    got = _run_calls(RUNTIMES[engine], two_methods["root"] / "llama2.pte", _two_method_calls())
    for i, (g, want) in enumerate(zip(got, two_methods["eager"])):
        result = compare_outputs([g], [want], rtol=1e-4, atol=1e-4)
        assert result.ok, f"call {i} ({_two_method_calls()[i][0]}): {result}"


@pytest.mark.parametrize("engine", sorted(RUNTIMES))
def test_two_methods_without_sharing_lose_the_prefill(two_methods, engine):
    # The gate's own check: planned apart, the decode method starts from an empty cache.
    got = _run_calls(RUNTIMES[engine], two_methods["root"] / "unshared.pte", _two_method_calls())
    assert compare_outputs([got[0]], [two_methods["eager"][0]], rtol=1e-4, atol=1e-4).ok
    assert not compare_outputs([got[1]], [two_methods["eager"][1]], rtol=1e-4, atol=1e-4).ok


@pytest.mark.parametrize("engine", sorted(RUNTIMES))
def test_two_methods_generate_matches_eager(two_methods, engine):
    program = RUNTIMES[engine].load_program(two_methods["root"] / "llama2.pte")
    prefill, decode = program.load_method("prefill"), program.load_method("decode")
    eager = copy.deepcopy(two_methods["model"])
    with torch.no_grad():
        want = generate(lambda args: [eager(*args)], PROMPT, 12)
    assert generate(prefill.execute, PROMPT, 12, decode=decode.execute) == want


def test_published_runtime_runs_the_two_methods(two_methods, reference_runtime):
    root = two_methods["root"]
    runner = Path(__file__).with_name("reference_stateful.py")
    proc = subprocess.run([reference_runtime.python, str(runner), str(root), "llama2"], capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0 and not (root / "llama2.err.txt").exists(), proc.stderr[-2000:]
    for i, (outs, want) in enumerate(zip(torch.load(root / "llama2.out.pt"), two_methods["eager"])):
        assert_outputs_close(outs, [want], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("engine", sorted(RUNTIMES))
def test_two_methods_refuse_bad_positions(two_methods, engine):
    program = RUNTIMES[engine].load_program(two_methods["root"] / "llama2.pte")
    prefill, decode = program.load_method("prefill"), program.load_method("decode")
    token = torch.tensor([[3]])
    for pos in (64, 1000, -65):  # past the 64-position cache (and its rope tables) either way
        with pytest.raises(ExecuTorchError, match="index"):
            decode.execute([token, torch.tensor([pos])])
    with pytest.raises(ExecuTorchError, match="input 1 .* must have dtype torch.int64"):
        decode.execute([token, torch.tensor([3], dtype=torch.int32)])
    with pytest.raises(ExecuTorchError, match="input 0"):
        prefill.execute([torch.zeros(1, 65, dtype=torch.long), torch.arange(65)])  # longer than the cache
    # Both still decode correctly after the refused calls.
    got = [prefill.execute(_two_method_calls()[0][1])[0], decode.execute(_two_method_calls()[1][1])[0]]
    for g, want in zip(got, two_methods["eager"][:2]):
        assert compare_outputs([g], [want], rtol=1e-4, atol=1e-4).ok
