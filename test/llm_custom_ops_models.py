"""A tiny decoder with a static KV cache whose attention is ExecuTorch's `llama::update_cache` and
`llama::custom_sdpa`: one token per call at position `input_pos`, caches kept in buffers.

Loadable by path (`llm_custom_ops_models.py:make_cached_decoder`) under this package or the published one:
both provide `executorch.extension.llm.custom_ops`.
"""

from __future__ import annotations

import torch
from torch import nn

from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401  (registers the llama ops)

MAX_SEQ = 12


class CachedDecoder(nn.Module):
    """Token [1, 1] at position input_pos [1] -> logits [1, 1, vocab]; k/v caches [1, MAX_SEQ, kv_heads, head_dim]."""

    def __init__(self, vocab: int = 40, dim: int = 32, heads: int = 4, kv_heads: int = 2):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.embed = nn.Embedding(vocab, dim)
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.register_buffer("k_cache", torch.zeros(1, MAX_SEQ, kv_heads, self.head_dim))
        self.register_buffer("v_cache", torch.zeros(1, MAX_SEQ, kv_heads, self.head_dim))

    def forward(self, tokens: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        seq = tokens.shape[1]
        q = self.wq(x).view(1, seq, self.heads, self.head_dim)
        k = self.wk(x).view(1, seq, self.kv_heads, self.head_dim)
        v = self.wv(x).view(1, seq, self.kv_heads, self.head_dim)
        start = input_pos[0].item()
        torch._check_is_size(start)
        torch._check(start + seq <= MAX_SEQ)
        torch.ops.llama.update_cache(k, self.k_cache, start)
        torch.ops.llama.update_cache(v, self.v_cache, start)
        y = torch.ops.llama.custom_sdpa(q, self.k_cache, self.v_cache, start, None, 0.0, True)
        return self.head(self.wo(y.reshape(1, seq, -1)))


def make_cached_decoder() -> tuple[nn.Module, tuple[torch.Tensor, torch.Tensor]]:
    torch.manual_seed(0)
    return CachedDecoder().eval(), (torch.tensor([[3]]), torch.tensor([0]))
