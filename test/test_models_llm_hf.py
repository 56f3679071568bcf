"""HF transformers' static-cache export of tiny decoders: decoded token by token on every runtime, against eager."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from executorch.devtools.compare import compare_outputs
from executorch.exir import to_edge

sys.path.insert(0, str(Path(__file__).parent))
from conftest import project_runtimes  # noqa: E402

transformers = pytest.importorskip("transformers", reason="transformers is not installed (requirements-dev.txt pins it)")
from transformers.integrations.executorch import TorchExportableModuleForDecoderOnlyLM  # noqa: E402

MAX_CACHE = 8
PROMPT = [5, 17, 3, 42, 9]
RTOL = 1e-4  # per element, relative to the eager logits (their largest |value| scales the absolute part)
_TINY = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=64, use_cache=True, pad_token_id=0)


def _configs() -> dict:
    t = transformers
    return {
        "llama": (t.LlamaConfig(**_TINY), t.LlamaForCausalLM),
        "qwen2": (t.Qwen2Config(**_TINY, use_sliding_window=False, sliding_window=None), t.Qwen2ForCausalLM),
        "gemma": (t.GemmaConfig(**_TINY, head_dim=8), t.GemmaForCausalLM),
        "phi3": (t.Phi3Config(**_TINY, sliding_window=None), t.Phi3ForCausalLM),
    }


ARCHS = ["llama", "qwen2", "gemma", "phi3"]


def _calls() -> list:
    return [("forward", [torch.tensor([[tok]]), torch.tensor([pos])]) for pos, tok in enumerate(PROMPT)]


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict:
    """Per architecture: our .pte, the ExportedProgram saved for the published exporter, and the
    eager logits of each decode step (computed after lowering, from the cache's start state)."""
    root = tmp_path_factory.mktemp("hf_llm")
    out = {}
    for name, (config, cls) in _configs().items():
        torch.manual_seed(0)
        model = cls(config).eval()
        model.generation_config = transformers.GenerationConfig(
            use_cache=True, cache_implementation="static", max_length=MAX_CACHE,
            cache_config={"batch_size": 1, "max_cache_len": MAX_CACHE})
        wrapper = TorchExportableModuleForDecoderOnlyLM(model, batch_size=1, max_cache_len=MAX_CACHE)
        with torch.no_grad():
            ep = wrapper.export(input_ids=torch.tensor([[1]]), cache_position=torch.tensor([0]))
            torch.export.save(ep, root / f"{name}.pt2")
            (root / f"{name}.pte").write_bytes(to_edge(ep).to_executorch().buffer)
            # The wrapper's own forward drops cache_position; its inner module is what export traced.
            eager = [wrapper.model(input_ids=ids, cache_position=pos) for _, (ids, pos) in _calls()]
        torch.save(_calls(), root / f"{name}.calls.pt")
        out[name] = eager
    return {"root": root, "eager": out}


def _decode(runtime, pte: Path) -> list:
    method = runtime.load_program(pte).load_method("forward")
    return [method.execute(inputs)[0] for _, inputs in _calls()]


def _check_steps(steps: list, eager: list, what: str) -> None:
    assert len(steps) == len(eager)
    for i, (got, want) in enumerate(zip(steps, eager)):
        result = compare_outputs(got, want, rtol=RTOL, atol=RTOL)
        assert result.ok, f"{what}, decode step {i}: {result}"


@pytest.mark.parametrize("engine", ["python", "native"])
@pytest.mark.parametrize("arch", ARCHS)
def test_hf_static_cache_decodes_like_eager(exported, arch, engine):
    runtimes = project_runtimes()
    if engine not in runtimes:
        pytest.skip("the native runtime is not built (bash tools/run_tests.sh builds it)")
    steps = _decode(runtimes[engine], exported["root"] / f"{arch}.pte")
    _check_steps(steps, exported["eager"][arch], f"{arch} on the {engine} runtime")


def test_decode_check_fails_on_a_stale_cache(exported):
    # The gate's own check: the same program loaded afresh for every step (so its cache never
    # holds the earlier tokens) must not pass for the stateful decode.
    runtime = project_runtimes()["python"]
    pte = exported["root"] / "llama.pte"
    stale = [runtime.load_program(pte).load_method("forward").execute(inputs)[0] for _, inputs in _calls()]
    with pytest.raises(AssertionError, match="decode step 1"):
        _check_steps(stale, exported["eager"]["llama"], "stale cache")


@pytest.fixture(scope="module")
def published(exported, reference_runtime) -> Path:
    """One published-runtime process: our files decoded there, and the published exporter's files."""
    root = exported["root"]
    runner = Path(__file__).with_name("reference_stateful.py")
    proc = subprocess.run([reference_runtime.python, str(runner), str(root), *ARCHS], capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, f"published runtime process failed: {proc.stderr[-2000:]}"
    return root


@pytest.mark.parametrize("arch", ARCHS)
def test_our_files_decode_on_the_published_runtime(exported, published, arch):
    err = published / f"{arch}.err.txt"
    assert not err.exists(), err.read_text()
    steps = [outs[0] for outs in torch.load(published / f"{arch}.out.pt")]
    _check_steps(steps, exported["eager"][arch], f"{arch} (our file) on the published runtime")


@pytest.mark.parametrize("arch", ARCHS)
def test_published_files_decode_here(exported, published, arch):
    err = published / f"{arch}.published.err.txt"
    assert not err.exists(), err.read_text()
    runtimes = project_runtimes()
    for engine, runtime in runtimes.items():
        steps = _decode(runtime, published / f"{arch}.published.pte")
        _check_steps(steps, exported["eager"][arch], f"{arch} (published exporter's file) on the {engine} runtime")
