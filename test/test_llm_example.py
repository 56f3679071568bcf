"""The KV-cache Llama example: dynamic-shape prefill and decode steps on one loaded method, against eager."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from executorch.devtools.compare import assert_outputs_close, compare_outputs
from executorch.exir import to_edge

sys.path.insert(0, str(Path(__file__).parent))
from conftest import REPO, project_runtimes  # noqa: E402

sys.path.insert(0, str(REPO / "examples" / "models"))
from llama_kv_cache import generate, make_llama_kv_cache, make_llama_kv_cache_dynamic_shapes  # noqa: E402

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
