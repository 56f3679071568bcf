"""Hugging Face optimum-executorch 1.1.0, unchanged, against this package: `optimum-cli export executorch`
of tiny random Llama and Qwen2 models (built here, never downloaded), loaded with
`ExecuTorchModelForCausalLM` and decoded greedily, against eager transformers."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from conftest import project_runtimes  # noqa: E402

if importlib.util.find_spec("optimum") is None or importlib.util.find_spec("optimum.executorch") is None:
    pytest.skip("optimum-executorch is not installed (pip install -r requirements-dev.txt, then "
                "pip install --no-deps -r requirements-dev-nodeps.txt)", allow_module_level=True)
transformers = pytest.importorskip("transformers", reason="transformers is not installed (requirements-dev.txt pins it)")

PROMPT = [1, 5, 17, 3, 42, 9]
MAX_SEQ_LEN = 24  # the exported static cache: prompt plus 18 generated tokens
_TINY = dict(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=64, bos_token_id=1, eos_token_id=63, pad_token_id=0)
ARCHS = {
    "llama": lambda: (transformers.LlamaConfig(**_TINY), transformers.LlamaForCausalLM),
    "qwen2": lambda: (transformers.Qwen2Config(**_TINY, use_sliding_window=False), transformers.Qwen2ForCausalLM),
}
# (optimum recipe, --qlinear); the xnnpack recipe lowers with ExecutorchBackendConfig(do_quant_fusion_and_const_prop=True).
EXPORTS = [("portable", None), ("xnnpack", None), ("portable", "8da4w"), ("xnnpack", "8da4w")]


def _needs_native() -> None:
    # ExecuTorchModelForCausalLM loads with executorch.extension.pybindings.portable_lib.
    if "native" not in project_runtimes():
        pytest.skip("the native runtime is not built (bash tools/run_tests.sh builds it); "
                    "optimum-executorch runs programs through portable_lib")


def _needs_partitioner() -> None:
    # optimum-executorch imports every one of its recipe modules at start-up, xnnpack's included.
    if importlib.util.find_spec("executorch.backends.xnnpack.partition") is None:
        pytest.skip("optimum-executorch imports executorch.backends.xnnpack.partition.xnnpack_partitioner at "
                    "start-up, and XnnpackPartitioner is not in this tree yet")


def _env() -> dict:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict:
    """Each architecture saved with seed-0 random weights, as `from_pretrained` reads a local folder."""
    root = tmp_path_factory.mktemp("hf_checkpoints")
    out = {}
    for arch, make in ARCHS.items():
        config, cls = make()
        torch.manual_seed(0)
        cls(config).eval().save_pretrained(root / arch)
        out[arch] = root / arch
    return out


def _export(checkpoint: Path, recipe: str, qlinear, out: Path) -> Path:
    cli = Path(sys.executable).with_name("optimum-cli")
    args = [str(cli), "export", "executorch", "--model", str(checkpoint), "--task", "text-generation",
            "--recipe", recipe, "--max_seq_len", str(MAX_SEQ_LEN), "--output_dir", str(out)]
    if qlinear:
        args += ["--qlinear", qlinear]
    done = subprocess.run(args, capture_output=True, text=True, timeout=1200, env=_env(), cwd=out.parent)
    assert done.returncode == 0, f"optimum-cli {recipe} {qlinear or ''} failed:\n{done.stderr[-4000:]}"
    assert (out / "model.pte").is_file(), list(out.iterdir())
    return out


def _eager(checkpoint: Path, qlinear):
    """The eager model, quantized as optimum-executorch quantizes it before export when `qlinear` is set."""
    model = transformers.AutoModelForCausalLM.from_pretrained(checkpoint).eval()
    if qlinear:
        from optimum.exporters.executorch.quantization import quantize_model_

        quantize_model_(model, qlinear_config=qlinear, qlinear_group_size=32)
    return model


def _eager_greedy(model, prompt: list, count: int) -> list:
    """`count` greedy tokens after `prompt`, each from a full causal forward pass of eager transformers."""
    tokens = list(prompt)
    with torch.no_grad():
        for _ in range(count):
            tokens.append(int(model(torch.tensor([tokens])).logits[0, -1].argmax()))
    return tokens[len(prompt):]


def _eager_logits(model, tokens: list) -> torch.Tensor:
    """Logits at every position of `tokens`, one causal forward pass over the whole sequence."""
    with torch.no_grad():
        return model(torch.tensor([tokens])).logits[0]


def _et_logits(et_model, tokens: list) -> torch.Tensor:
    """Logits at every position, decoding `tokens` one at a time through the program's cache."""
    steps = []
    for pos, tok in enumerate(tokens):
        logits = et_model.forward(input_ids=torch.tensor([[tok]]), cache_position=torch.tensor([pos]))
        steps.append(logits.reshape(-1, logits.shape[-1])[-1])
    return torch.stack(steps)


@pytest.mark.parametrize("recipe,qlinear", EXPORTS,
                         ids=["portable-fp32", "xnnpack-fp32", "portable-8da4w", "xnnpack-8da4w"])
@pytest.mark.parametrize("arch", list(ARCHS))
def test_export_load_and_decode_like_eager(checkpoints, tmp_path, arch, recipe, qlinear):
    _needs_native()
    _needs_partitioner()
    if qlinear and importlib.util.find_spec("torchao") is None:
        pytest.skip("torchao is not installed (pip install torchao==0.18.0)")
    from optimum.executorch import ExecuTorchModelForCausalLM

    out = _export(checkpoints[arch], recipe, qlinear, tmp_path / "out")
    et_model = ExecuTorchModelForCausalLM.from_pretrained(str(out))
    assert et_model.max_cache_size == MAX_SEQ_LEN
    eager = _eager(checkpoints[arch], qlinear)
    generated = et_model.generate(prompt_tokens=list(PROMPT), max_seq_len=MAX_SEQ_LEN)
    tokens = list(PROMPT) + generated
    got, want = _et_logits(et_model, tokens), _eager_logits(eager, tokens)
    scale = float(want.abs().max())
    if not qlinear:
        # fp32: the same greedy tokens, and logits equal to float32 rounding (summation order differs).
        assert generated == _eager_greedy(eager, list(PROMPT), len(generated))
        # generate stops at the cache's end, or at an end-of-sequence token after the first one it makes.
        assert len(tokens) == MAX_SEQ_LEN or generated[-1] == _TINY["eos_token_id"]
        assert float((got - want).abs().max()) <= 1e-4 * scale
        return
    # 8da4w: the reference is the same torchao-quantized model run eagerly (int8 activations per token,
    # int4 weights per group of 32, computed on dequantized values). The program computes the same
    # quantized values; where float summation order puts an activation on the other side of a rounding
    # boundary it moves by one int8 step, which over two layers stays far inside what quantization
    # itself moves the logits. Tolerance: a quarter of that movement (eager fp32 vs eager 8da4w), and
    # at least 1e-3 of the largest logit.
    fp32 = _eager_logits(_eager(checkpoints[arch], None), tokens)
    moved = float((fp32 - want).abs().max())
    assert moved > 1e-3 * scale, "quantize_ changed nothing: the 8da4w reference is not quantized"
    err = float((got - want).abs().max())
    assert err <= max(0.25 * moved, 1e-3 * scale), f"max |logit error| {err:.3g}, quantization moves {moved:.3g}"
