"""A Llama-style decoder with a static KV cache, and a `generate` loop on executorch.runtime.

`forward(tokens (1, s), input_pos (s,)) -> logits of the last token (1, vocab)` runs both the
prefill (s = prompt length) and each decode step (s = 1); the cache lives in buffers the method
updates in place, so it carries over between calls. Export it as one method with a dynamic
prompt length, or as two methods of one program, `prefill` (dynamic length) and `decode` (one
token), sharing one cache (`make_llama_kv_cache_methods`). Self-contained apart from the blocks
it shares with `llama_decoder.py`, so tools can load it by path: `llama_kv_cache.py:make_llama_kv_cache`.

    model, example = make_llama_kv_cache()
    config = ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(share_mutable_buffers=True))
    to_edge(make_llama_kv_cache_methods(model)).to_executorch(config).write_to_file("llama.pte")
    program = Runtime.get().load_program("llama.pte")
    prefill, decode = program.load_method("prefill"), program.load_method("decode")
    tokens = generate(prefill.execute, [1, 5, 9], max_new_tokens=8, decode=decode.execute)
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from typing import Callable, Optional, Sequence

import torch
from torch import nn


def _blocks():
    # Loaded by path so this file works both inside the zoo package and as FILE.py:FACTORY.
    name = "llama_decoder_blocks"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("llama_decoder.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


_b = _blocks()


class CachedAttention(nn.Module):
    """Grouped-query attention whose keys and values go into a static cache at `input_pos`; each
    query attends to every cached position up to its own."""

    def __init__(self, dim: int, heads: int, kv_heads: int, max_seq: int):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.wq = nn.Linear(dim, heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(heads * self.head_dim, dim, bias=False)
        self.register_buffer("k_cache", torch.zeros(1, kv_heads, max_seq, self.head_dim))
        self.register_buffer("v_cache", torch.zeros(1, kv_heads, max_seq, self.head_dim))
        self.max_seq = max_seq

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = _b.apply_rope(q, cos, sin), _b.apply_rope(k, cos, sin)
        self.k_cache.index_copy_(2, input_pos, k)
        self.v_cache.index_copy_(2, input_pos, v)
        group = self.heads // self.kv_heads
        keys = self.k_cache.repeat_interleave(group, dim=1)
        values = self.v_cache.repeat_interleave(group, dim=1)
        scores = q @ keys.transpose(2, 3) / math.sqrt(self.head_dim)
        future = torch.arange(self.max_seq) > input_pos[:, None]  # (s, max_seq): not yet written
        scores = scores.masked_fill(future, float("-inf"))
        out = scores.softmax(-1) @ values
        return self.wo(out.transpose(1, 2).reshape(b, s, -1))


class CachedBlock(nn.Module):
    def __init__(self, dim: int, heads: int, kv_heads: int, hidden: int, max_seq: int):
        super().__init__()
        self.attention_norm = _b.RMSNorm(dim)
        self.attention = CachedAttention(dim, heads, kv_heads, max_seq)
        self.ffn_norm = _b.RMSNorm(dim)
        self.feed_forward = _b.FeedForward(dim, hidden)

    def forward(self, x, cos, sin, input_pos):
        x = x + self.attention(self.attention_norm(x), cos, sin, input_pos)
        return x + self.feed_forward(self.ffn_norm(x))


class LlamaKVCache(nn.Module):
    """(tokens (1, s), input_pos (s,)) -> logits of the last token (1, vocab)."""

    def __init__(self, vocab: int = 256, dim: int = 64, layers: int = 2, heads: int = 4, kv_heads: int = 2,
                 hidden: int = 172, max_seq: int = 64):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(CachedBlock(dim, heads, kv_heads, hidden, max_seq) for _ in range(layers))
        self.norm = _b.RMSNorm(dim)
        self.output = nn.Linear(dim, vocab, bias=False)
        cos, sin = _b.rope_tables(dim // heads, max_seq)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.max_seq = max_seq

    def forward(self, tokens: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        cos, sin = self.rope_cos[input_pos], self.rope_sin[input_pos]
        x = self.tok_embeddings(tokens)
        for layer in self.layers:
            x = layer(x, cos, sin, input_pos)
        return self.output(self.norm(x[:, -1]))


def make_llama_kv_cache(**sizes) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The decoder in eval mode with seed-0 weights, and a 4-token prompt at positions 0..3."""
    torch.manual_seed(0)
    model = LlamaKVCache(**sizes).eval()
    return model, (torch.tensor([[1, 7, 42, 3]]), torch.arange(4))


def make_llama_kv_cache_dynamic_shapes(max_seq: int = 64):
    """The prompt length as a dimension from 1 (a decode step) to the cache's length."""
    seq = torch.export.Dim("seq", min=1, max=max_seq)
    return ({1: seq}, {0: seq})


def make_llama_kv_cache_methods(model: nn.Module, max_seq: int = 64) -> dict:
    """`prefill` (the prompt length a dimension up to the cache's length) and `decode` (one token),
    exported from one module, so both update the same cache buffers. Lower them with
    `MemoryPlanningPass(share_mutable_buffers=True)` to give the program one cache both methods use."""
    prompt = (torch.tensor([[1, 7, 42, 3]]), torch.arange(4))
    step = (torch.tensor([[5]]), torch.tensor([4]))
    return {
        "prefill": torch.export.export(model, prompt, dynamic_shapes=make_llama_kv_cache_dynamic_shapes(max_seq)),
        "decode": torch.export.export(model, step),
    }


def generate(step: Callable[[list], Sequence[torch.Tensor]], prompt: Sequence[int], max_new_tokens: int,
             max_seq: int = 64, decode: Optional[Callable[[list], Sequence[torch.Tensor]]] = None) -> list[int]:
    """Greedy decoding: one prefill call over the prompt, then one call per new token.
    `step` runs the model: a loaded method's `execute`, or `lambda args: [model(*args)]` for eager;
    `decode`, when given, runs the per-token calls (a program's `decode` method)."""
    if not prompt or len(prompt) + max_new_tokens > max_seq:
        raise ValueError(f"prompt ({len(prompt)} tokens) plus {max_new_tokens} new tokens must fit the "
                         f"{max_seq}-position cache and be non-empty")
    logits = step([torch.tensor([list(prompt)]), torch.arange(len(prompt))])[0]
    out = []
    for pos in range(len(prompt), len(prompt) + max_new_tokens):
        token = int(logits.argmax(-1))
        out.append(token)
        if len(out) == max_new_tokens:
            break
        logits = (decode or step)([torch.tensor([[token]]), torch.tensor([pos])])[0]
    return out
