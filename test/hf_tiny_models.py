"""Tiny random-config HF decoders (no hub download) and their static-cache export wrapper; torch and
transformers only, so an environment holding just the installed wheel can import it too."""

from __future__ import annotations

import torch
import transformers
from transformers.integrations.executorch import TorchExportableModuleForDecoderOnlyLM

MAX_CACHE = 8
PROMPT = [5, 17, 3, 42, 9]
ARCHS = ["llama", "qwen2", "gemma", "phi3"]
_TINY = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=64, use_cache=True, pad_token_id=0)


def configs() -> dict:
    t = transformers
    return {
        "llama": (t.LlamaConfig(**_TINY), t.LlamaForCausalLM),
        "qwen2": (t.Qwen2Config(**_TINY, use_sliding_window=False, sliding_window=None), t.Qwen2ForCausalLM),
        "gemma": (t.GemmaConfig(**_TINY, head_dim=8), t.GemmaForCausalLM),
        "phi3": (t.Phi3Config(**_TINY, sliding_window=None), t.Phi3ForCausalLM),
    }


def make_wrapper(arch: str) -> TorchExportableModuleForDecoderOnlyLM:
    """The architecture with seed-0 weights in HF's static-cache export wrapper."""
    config, cls = configs()[arch]
    torch.manual_seed(0)
    model = cls(config).eval()
    model.generation_config = transformers.GenerationConfig(
        use_cache=True, cache_implementation="static", max_length=MAX_CACHE,
        cache_config={"batch_size": 1, "max_cache_len": MAX_CACHE})
    return TorchExportableModuleForDecoderOnlyLM(model, batch_size=1, max_cache_len=MAX_CACHE)


def export(wrapper: TorchExportableModuleForDecoderOnlyLM) -> torch.export.ExportedProgram:
    with torch.no_grad():
        return wrapper.export(input_ids=torch.tensor([[1]]), cache_position=torch.tensor([0]))


def calls() -> list:
    """(method, inputs) for each decode step of the prompt, one token at a time."""
    return [("forward", [torch.tensor([[tok]]), torch.tensor([pos])]) for pos, tok in enumerate(PROMPT)]


def eager_steps(wrapper: TorchExportableModuleForDecoderOnlyLM) -> list:
    """Eager logits of each step, from the cache's start state (call after exporting)."""
    with torch.no_grad():
        # The wrapper's own forward drops cache_position; its inner module is what export traced.
        return [wrapper.model(input_ids=ids, cache_position=pos) for _, (ids, pos) in calls()]
