"""Attention for the Llama family: grouped-query attention with a static KV cache, and the ring-buffer
bookkeeping sliding-window caches use (which absolute position each cache slot holds)."""

from __future__ import annotations

from enum import Enum

import torch
from torch import nn


def _create_causal_mask_for_ring_buffer(cache_positions: torch.Tensor, window_size: int, start_pos,
                                        seq_len: int) -> torch.Tensor:
    """An additive mask [seq_len, slots]: 0 where query `start_pos + i` may attend to the slot (it holds a
    position at or before the query and less than `window_size` behind it), -inf elsewhere."""
    query = start_pos + torch.arange(seq_len, dtype=torch.long, device=cache_positions.device).view(-1, 1)
    behind = query - cache_positions
    visible = (cache_positions >= 0) & (behind >= 0) & (behind < window_size)
    return torch.where(visible, 0.0, float("-inf"))


class CacheUpdateStrategy(Enum):
    """How a cache reuses its slots; only a ring buffer is defined."""

    RING_BUFFER = "RingBuffer"
    INVALID = "Invalid"


class CachePositionsManager(nn.Module):
    """Tracks, per cache slot, the absolute token position written there (-1: never written since the
    sequence restarted), in a `cache_positions` buffer that export keeps as program state."""

    def __init__(self, max_context_length: int,
                 cache_update_strategy: CacheUpdateStrategy = CacheUpdateStrategy.RING_BUFFER) -> None:
        super().__init__()
        if cache_update_strategy != CacheUpdateStrategy.RING_BUFFER:
            raise ValueError(f"CachePositionsManager: {cache_update_strategy} is not supported; use RING_BUFFER")
        self.max_context_length = max_context_length
        self.register_buffer("cache_positions", torch.zeros((max_context_length,), dtype=torch.long))

    def calculate_positions_and_update_indices(self, input_pos: torch.Tensor, seq_len: int) -> torch.Tensor:
        """The slots `seq_len` tokens from `input_pos[0]` go to (positions modulo the slot count), recording
        their positions; slots at or past the start position that this write does not reach become -1, so a
        sequence that restarts at 0 never sees stale entries."""
        start_pos = input_pos[0].item()
        torch._check_is_size(start_pos)
        positions = torch.arange(seq_len, dtype=torch.long) + start_pos
        slots = positions % self.max_context_length
        kept = torch.arange(self.max_context_length, dtype=torch.long) < start_pos
        self.cache_positions.copy_(torch.where(kept, self.cache_positions,
                                               torch.full_like(self.cache_positions, -1)))
        self.cache_positions.index_copy_(0, slots, positions)
        return slots


class KVCache(nn.Module):
    """A static cache of `max_context_length` positions, stored [batch, heads, positions, head_dim]."""

    def __init__(self, max_batch_size: int, max_context_length: int, n_heads: int, head_dim: int,
                 enable_dynamic_shape: bool, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.max_context_length = max_context_length
        self.enable_dynamic_shape = enable_dynamic_shape
        shape = (max_batch_size, n_heads, max_context_length, head_dim)
        self.register_buffer("k_cache", torch.zeros(shape, dtype=dtype))
        self.register_buffer("v_cache", torch.zeros(shape, dtype=dtype))

    def update(self, input_pos: torch.Tensor, k_val: torch.Tensor,
               v_val: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Writes k and v [batch, heads, seq, head_dim] at the positions from `input_pos[0]` (dynamic shapes) or
        at `input_pos` itself, and returns the whole caches."""
        if self.enable_dynamic_shape:
            start = input_pos[0].item()
            torch._check(start >= 0)
            torch._check(start < self.max_context_length)
            positions = torch.arange(k_val.size(2)) + start
            self.k_cache.index_copy_(2, positions, k_val)
            self.v_cache.index_copy_(2, positions, v_val)
        else:
            self.k_cache[:, :, input_pos] = k_val
            self.v_cache[:, :, input_pos] = v_val
        return self.k_cache, self.v_cache


class SDPA(nn.Module):
    """Attention over the whole cache with a boolean mask, each key/value head shared by `n_rep` query heads;
    returns [batch, seq, dim]."""

    def __init__(self, dim: int, head_dim: int, n_rep: int, max_context_len: int) -> None:
        super().__init__()
        self.dim, self.head_dim, self.n_rep, self.max_context_len = dim, head_dim, n_rep, max_context_len

    def forward(self, input_pos: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bsz: int,
                seqlen: int, mask: torch.Tensor) -> torch.Tensor:
        k = k.repeat_interleave(self.n_rep, dim=1)
        v = v.repeat_interleave(self.n_rep, dim=1)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0)
        return y.transpose(1, 2).reshape(bsz, seqlen, self.dim)


class AttentionMHA(nn.Module):
    """Grouped-query attention (`wq`, `wk`, `wv`, `wo`), with a KV cache when `args.use_kv_cache`; the
    `kv_cache` and `SDPA` submodules are what source transformations swap (custom ops, other cache forms)."""

    def __init__(self, args, layer_id: int, rope: nn.Module) -> None:
        super().__init__()
        self.use_kv_cache = args.use_kv_cache
        self.enable_dynamic_shape = args.enable_dynamic_shape
        self.n_heads, self.n_kv_heads, self.head_dim = args.n_heads, args.n_kv_heads, args.head_dim
        self.n_rep = self.n_heads // self.n_kv_heads
        self.max_context_len = args.max_context_len
        self.layer_id = layer_id
        self.rope = rope
        bias = args.attention_qkv_bias
        self.wq = nn.Linear(args.dim, self.n_heads * self.head_dim, bias=bias)
        self.wk = nn.Linear(args.dim, self.n_kv_heads * self.head_dim, bias=bias)
        self.wv = nn.Linear(args.dim, self.n_kv_heads * self.head_dim, bias=bias)
        self.wo = nn.Linear(self.n_heads * self.head_dim, args.dim, bias=False)
        causal = torch.tril(torch.ones(self.max_context_len, self.max_context_len, dtype=torch.bool))
        self.register_buffer("mask", causal, persistent=False)
        if self.use_kv_cache:
            self.kv_cache = KVCache(args.max_batch_size, args.max_context_len, self.n_kv_heads, self.head_dim,
                                    args.enable_dynamic_shape)
            self.SDPA = SDPA(self.n_heads * self.head_dim, self.head_dim, self.n_rep, self.max_context_len)

    def forward(self, x: torch.Tensor, freqs_cos: torch.Tensor, freqs_sin: torch.Tensor,
                **kwargs) -> torch.Tensor:
        bsz, seqlen, _ = x.shape
        q = self.wq(x).view(bsz, seqlen, self.n_heads, self.head_dim)
        k = self.wk(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim)
        v = self.wv(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim)
        q, k = self.rope(q, k, freqs_cos, freqs_sin)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        if not self.use_kv_cache:
            k = k.repeat_interleave(self.n_rep, dim=1)
            v = v.repeat_interleave(self.n_rep, dim=1)
            y = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=self.mask[:seqlen, :seqlen])
            return self.wo(y.transpose(1, 2).reshape(bsz, seqlen, -1))
        input_pos = kwargs.get("input_pos")
        if input_pos is None:
            raise ValueError("AttentionMHA: a KV-cache model needs attn_options['input_pos']")
        if self.enable_dynamic_shape:
            start = input_pos[-1].item()
            torch._check(start >= 0)
            torch._check(start < self.max_context_len)
            mask = self.mask.narrow(0, start, seqlen)
        else:
            mask = self.mask[input_pos]
        k, v = self.kv_cache.update(input_pos, k, v)
        return self.wo(self.SDPA(input_pos, q, k, v, bsz, seqlen, mask))
