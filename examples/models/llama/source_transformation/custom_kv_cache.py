"""KV caches that write through ExecuTorch's `llama::update_cache` ops, stored [batch, seq, heads, head_dim]
as `llama::custom_sdpa` reads them: the forms optimum-executorch's `--use_custom_kv_cache` builds on."""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn

import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401  (defines torch.ops.llama)
from executorch.examples.models.llama.attention import CachePositionsManager, _create_causal_mask_for_ring_buffer


class CustomKVCache(nn.Module):
    """A static cache of `max_context_length` positions; `update` takes key/value [batch, heads, seq, head_dim]
    and returns the whole caches in that layout (a transposed view of the storage)."""

    def __init__(self, max_batch_size: int, max_context_length: int, n_heads: int, head_dim: int,
                 dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.max_batch_size = max_batch_size
        self.max_context_length = max_context_length
        self.n_heads = n_heads
        self.head_dim = head_dim
        shape = (max_batch_size, max_context_length, n_heads, head_dim)
        self.register_buffer("k_cache", torch.zeros(shape, dtype=dtype, device="cpu"))
        self.register_buffer("v_cache", torch.zeros(shape, dtype=dtype, device="cpu"))

    def update(self, input_pos: torch.Tensor, k_val: torch.Tensor, v_val: torch.Tensor,
               indices: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Writes the new keys and values at `input_pos[0]` onwards (or at the slots `indices` [batch, seq]
        names) and returns the caches as [batch, heads, max_context_length, head_dim]."""
        k_val = k_val.transpose(1, 2)
        v_val = v_val.transpose(1, 2)
        start_pos = input_pos[0].item()
        if indices is None:
            torch.ops.llama.update_cache(k_val, self.k_cache, start_pos)
            torch.ops.llama.update_cache(v_val, self.v_cache, start_pos)
        else:
            torch.ops.llama.update_cache_with_indices(k_val, self.k_cache, start_pos, indices)
            torch.ops.llama.update_cache_with_indices(v_val, self.v_cache, start_pos, indices)
        return self.k_cache.transpose(1, 2), self.v_cache.transpose(1, 2)


class CustomRingKVCache(CustomKVCache):
    """A sliding-window cache of `max_context_length` (the window) tokens kept in twice as many slots, used
    as a ring: a prefill of up to a window's tokens never overwrites what its own first query still sees.
    `create_causal_mask_for_ring_buffer` gives the mask that goes with it."""

    def __init__(self, max_batch_size: int, max_context_length: int, n_heads: int, head_dim: int,
                 dtype: torch.dtype = torch.float32) -> None:
        super().__init__(max_batch_size, max_context_length * 2, n_heads, head_dim, dtype)
        self.window_size = max_context_length
        self.is_ring_buffer = True
        self.cache_positions_manager = CachePositionsManager(self.max_context_length)

    def create_causal_mask_for_ring_buffer(self, start_pos, seq_len: int) -> torch.Tensor:
        """The additive mask [seq_len, slots] for queries at `start_pos` onwards over this ring."""
        return _create_causal_mask_for_ring_buffer(self.cache_positions_manager.cache_positions,
                                                   self.window_size, start_pos, seq_len)

    def update(self, input_pos: torch.Tensor, k_val: torch.Tensor, v_val: torch.Tensor,
               indices: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Writes the new keys and values [batch, heads, seq, head_dim] at their ring slots."""
        seq_len = k_val.size(2)
        if seq_len > self.k_cache.size(1):
            raise ValueError(f"CustomRingKVCache: {seq_len} new positions do not fit its {self.k_cache.size(1)} "
                             "slots; prefill in chunks of at most the window size")
        slots = self.cache_positions_manager.calculate_positions_and_update_indices(input_pos, seq_len)
        return super().update(input_pos, k_val, v_val, slots.unsqueeze(0).expand(k_val.size(0), -1))

    @classmethod
    def from_custom_kv_cache(cls, kv_cache: nn.Module, sliding_window_size: int) -> "CustomRingKVCache":
        """A ring cache with `kv_cache`'s batch, heads, head_dim and dtype and a window of
        `sliding_window_size` tokens."""
        batch, _, heads, head_dim = kv_cache.k_cache.shape
        if not isinstance(kv_cache, CustomKVCache):
            batch, heads, _, head_dim = kv_cache.k_cache.shape  # a [batch, heads, seq, head_dim] cache
        return cls(batch, sliding_window_size, heads, head_dim, dtype=kv_cache.k_cache.dtype)


def replace_kv_cache_with_custom_kv_cache(module: nn.Module) -> nn.Module:
    """Replaces every `attention.KVCache` submodule with a `CustomKVCache` of the same size and dtype, in place
    (the cache is then written by `llama::update_cache`); returns the module."""
    from executorch.examples.models.llama.attention import KVCache

    for name, child in module.named_children():
        if isinstance(child, KVCache):
            batch, heads, positions, head_dim = child.k_cache.shape
            setattr(module, name, CustomKVCache(batch, positions, heads, head_dim, dtype=child.k_cache.dtype))
        else:
            replace_kv_cache_with_custom_kv_cache(child)
    return module
