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


class NarrowKVCache(torch.nn.Module):
    """A cache written as `cache.narrow(2, start, n).copy_(k)` (v through a slice when `slice_v`) at a symbolic
    start (the input position), the written views then read by composite ops (attention, softmax),
    beside attention over the whole cache."""

    def __init__(self, max_len: int = 8, heads: int = 2, dim: int = 4, slice_v: bool = False):
        super().__init__()
        self.slice_v = slice_v
        self.register_buffer("k_cache", torch.zeros(1, heads, max_len, dim))
        self.register_buffer("v_cache", torch.zeros(1, heads, max_len, dim))
        self.proj = torch.nn.Linear(dim, 3 * dim)
        self.max_len = max_len

    def forward(self, x, input_pos):
        q, k, v = self.proj(x).chunk(3, dim=-1)
        start = input_pos[0].item()
        n = k.shape[2]
        torch._check(start >= 0)
        torch._check(start + n <= self.max_len)
        k_new = self.k_cache.narrow(2, start, n)
        k_new.copy_(k)
        v_new = self.v_cache[:, :, start:start + n] if self.slice_v else self.v_cache.narrow(2, start, n)
        v_new.copy_(v)
        local = torch.nn.functional.scaled_dot_product_attention(q, k_new, v_new)
        future = torch.arange(self.max_len) >= start + n
        scores = (q @ self.k_cache.transpose(-1, -2)).masked_fill(future, float("-inf"))
        return local + scores.softmax(-1) @ self.v_cache, k_new.softmax(-1)


def make_narrow_kv_cache(slice_v: bool = False):
    torch.manual_seed(0)
    return NarrowKVCache(slice_v=slice_v), (torch.randn(1, 2, 3, 4), torch.tensor([0]))
