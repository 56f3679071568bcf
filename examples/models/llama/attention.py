"""Ring-buffer bookkeeping for sliding-window attention: which absolute position each cache slot holds."""

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
