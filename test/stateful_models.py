"""Small stateful models: buffers and inputs the forward updates in place, and the ops that do it."""

from __future__ import annotations

import torch


class Accumulate(torch.nn.Module):
    """A running sum in a buffer; returns twice the new sum."""

    def __init__(self):
        super().__init__()
        self.register_buffer("acc", torch.zeros(2, 3))

    def forward(self, x):
        self.acc.add_(x)
        return self.acc * 2


class Counter(torch.nn.Module):
    """A buffer with a nonzero start (kept only when asked for) bumped each call; returns the old
    value through a view taken before the update, and the new one."""

    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.arange(4, dtype=torch.float32) + 10)

    def forward(self, x):
        before = self.count.view(2, 2) * 1
        old = self.count.view(2, 2)
        self.count.add_(x)
        return before + old, self.count + 0


class KVCache(torch.nn.Module):
    """One attention head over a static cache: the new key/value go in at `input_pos`."""

    def __init__(self, max_len: int = 8, dim: int = 4):
        super().__init__()
        self.register_buffer("k", torch.zeros(1, max_len, dim))
        self.register_buffer("v", torch.zeros(1, max_len, dim))
        self.proj = torch.nn.Linear(dim, 3 * dim)
        self.max_len = max_len

    def forward(self, x, input_pos):
        q, k, v = self.proj(x).chunk(3, dim=-1)
        self.k.index_copy_(1, input_pos, k)
        self.v.index_copy_(1, input_pos, v)
        future = torch.arange(self.max_len) > input_pos[-1]
        scores = (q @ self.k.transpose(1, 2)).masked_fill(future, float("-inf"))
        return scores.softmax(-1) @ self.v


class MutateInput(torch.nn.Module):
    def forward(self, x, y):
        x.mul_(2)
        return x + y


def make_kv_cache():
    torch.manual_seed(0)
    return KVCache(), (torch.randn(1, 1, 4), torch.tensor([0]))
