"""Registers ExecuTorch's `llama::custom_sdpa`, `llama::update_cache` and `llama::update_cache_with_indices` (with
out variants) in torch.library."""

from __future__ import annotations

import math
from typing import Optional

import torch

_SCHEMAS = {
    "custom_sdpa": "custom_sdpa(Tensor query, Tensor key, Tensor value, SymInt start_pos, Tensor? attn_mask=None, "
                   "float drpout_p=0.0, bool is_causal=False, float? scale=None) -> Tensor",
    "custom_sdpa.out": "custom_sdpa.out(Tensor query, Tensor key, Tensor value, SymInt start_pos, "
                       "Tensor? attn_mask=None, float drpout_p=0.0, bool is_causal=False, float? scale=None, *, "
                       "Tensor(a!) out) -> Tensor(a!)",
    "update_cache": "update_cache(Tensor value, Tensor(a!) cache, SymInt start_pos) -> Tensor",
    "update_cache.out": "update_cache.out(Tensor value, Tensor(a!) cache, SymInt start_pos, *, Tensor(b!) out) "
                        "-> Tensor(b!)",
    "update_cache_with_indices": "update_cache_with_indices(Tensor value, Tensor(a!) cache, SymInt start_pos, "
                                 "Tensor indices) -> Tensor",
    "update_cache_with_indices.out": "update_cache_with_indices.out(Tensor value, Tensor(a!) cache, SymInt start_pos, "
                                     "Tensor indices, *, Tensor(b!) out) -> Tensor(b!)",
}
_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def _defined(name: str) -> bool:
    base, _, overload = name.partition(".")
    return hasattr(torch.ops.llama, base) and (overload or "default") in getattr(torch.ops.llama, base).overloads()


# Another library (ExecuTorch's compiled one) may have defined some of these in this process already:
# those stay as it registered them, since torch refuses a second definition of a schema.
_lib = torch.library.Library("llama", "FRAGMENT")
_NEW = [name for name in _SCHEMAS if not _defined(name)]
for _name in _NEW:
    _lib.define(_SCHEMAS[_name])


def _check_sdpa(query, key, value, start_pos, attn_mask, drpout_p, is_causal) -> None:
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        raise ValueError("custom_sdpa: query, key and value must be 4-D [batch, seq, heads, head_dim]; "
                         f"got {query.dim()}-D, {key.dim()}-D and {value.dim()}-D")
    if query.dtype not in _FLOATS or key.dtype != query.dtype or value.dtype != query.dtype:
        raise ValueError(f"custom_sdpa: query, key and value must share one float dtype; got {query.dtype}, "
                         f"{key.dtype}, {value.dtype}")
    if key.shape != value.shape or key.shape[0] != query.shape[0] or key.shape[3] != query.shape[3]:
        raise ValueError(f"custom_sdpa: key {tuple(key.shape)} and value {tuple(value.shape)} do not match "
                         f"query {tuple(query.shape)} in batch and head_dim")
    if key.shape[2] == 0 or query.shape[2] % key.shape[2]:
        raise ValueError(f"custom_sdpa: {key.shape[2]} key/value heads do not divide {query.shape[2]} query heads")
    if attn_mask is not None and is_causal:
        raise ValueError("custom_sdpa: pass attn_mask or is_causal=True, not both")
    if drpout_p != 0.0:
        raise ValueError(f"custom_sdpa: drpout_p={drpout_p} is not supported (inference only); pass 0.0")
    if isinstance(start_pos, int):
        if start_pos < 0 or start_pos + query.shape[1] > key.shape[1]:
            raise ValueError(f"custom_sdpa: start_pos {start_pos} + {query.shape[1]} positions run past the cache "
                             f"of {key.shape[1]}; keep start_pos + seq_len <= the cache length")
    else:
        torch._check(start_pos >= 0)
        torch._check(start_pos + query.shape[1] <= key.shape[1])


def _attend(query, key, value, start_pos: int, attn_mask, is_causal: bool, scale: Optional[float]) -> torch.Tensor:
    seq, heads, head_dim = query.shape[1], query.shape[2], query.shape[3]
    length = start_pos + seq
    groups = heads // key.shape[2]
    q = query.float().transpose(1, 2)
    k = key[:, :length].float().transpose(1, 2).repeat_interleave(groups, dim=1)
    v = value[:, :length].float().transpose(1, 2).repeat_interleave(groups, dim=1)
    scores = q @ k.transpose(-1, -2) * (scale if scale is not None else 1.0 / math.sqrt(head_dim))
    if is_causal:
        rows = torch.arange(seq).unsqueeze(1) + start_pos
        scores = scores.masked_fill(torch.arange(length).unsqueeze(0) > rows, float("-inf"))
    elif attn_mask is not None:
        scores = scores + attn_mask[:, :length].float()
    # Contiguous [batch, seq, heads, head_dim], as ExecuTorch's kernel returns: callers view it as [batch, seq, dim].
    return (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).contiguous().to(query.dtype)


def custom_sdpa(query, key, value, start_pos, attn_mask=None, drpout_p=0.0, is_causal=False, scale=None):
    """Attention of `query` [batch, seq, heads, head_dim] over the first `start_pos + seq` positions of the
    caches `key`/`value` [batch, max_seq, kv_heads, head_dim] (kv_heads divides heads). With `is_causal`, query
    row i sees cache positions up to `start_pos + i`; a float `attn_mask` [seq, >= start_pos + seq] is added to
    the scores instead. Computed in float32, returned in the query's dtype."""
    _check_sdpa(query, key, value, start_pos, attn_mask, drpout_p, is_causal)
    return _attend(query, key, value, int(start_pos), attn_mask, is_causal, scale)


def custom_sdpa_meta(query, key, value, start_pos, attn_mask=None, drpout_p=0.0, is_causal=False, scale=None):
    _check_sdpa(query, key, value, start_pos, attn_mask, drpout_p, is_causal)
    return torch.empty_like(query)


def custom_sdpa_out(query, key, value, start_pos, attn_mask=None, drpout_p=0.0, is_causal=False, scale=None, *, out):
    result = custom_sdpa(query, key, value, start_pos, attn_mask, drpout_p, is_causal, scale)
    return out.resize_(result.shape).copy_(result)  # sized like ATen's out variants: the token count is dynamic


def _check_update(value, cache, start_pos) -> None:
    if value.dim() != 4 or cache.dim() != 4:
        raise ValueError(f"update_cache: value and cache must be 4-D; got {value.dim()}-D and {cache.dim()}-D")
    if value.dtype != cache.dtype:
        raise ValueError(f"update_cache: value is {value.dtype} but the cache is {cache.dtype}; cast one")
    if any(value.shape[i] != cache.shape[i] for i in (0, 2, 3)):
        raise ValueError(f"update_cache: value {tuple(value.shape)} does not fit cache {tuple(cache.shape)} "
                         "in batch, heads or head_dim")
    if isinstance(start_pos, int):
        if start_pos < 0 or start_pos + value.shape[1] > cache.shape[1]:
            raise ValueError(f"update_cache: start_pos {start_pos} + {value.shape[1]} positions run past the cache "
                             f"of {cache.shape[1]}; keep start_pos + seq_len <= the cache length")
    else:
        torch._check(start_pos >= 0)
        torch._check(start_pos + value.shape[1] <= cache.shape[1])


def update_cache(value, cache, start_pos):
    """Writes `value` [batch, seq, heads, head_dim] into `cache[:, start_pos:start_pos + seq]` in place;
    returns a one-element placeholder, as ExecuTorch's op does."""
    _check_update(value, cache, start_pos)
    cache[:, int(start_pos):int(start_pos) + value.shape[1]].copy_(value)
    return torch.empty((1,), dtype=value.dtype)


def update_cache_meta(value, cache, start_pos):
    _check_update(value, cache, start_pos)
    return torch.empty((1,), dtype=value.dtype, device="meta")


def update_cache_out(value, cache, start_pos, *, out):
    update_cache(value, cache, start_pos)
    return out


def _check_indices(value, cache, indices) -> None:
    if value.dim() != 4 or cache.dim() != 4:
        raise ValueError("update_cache_with_indices: value and cache must be 4-D; "
                         f"got {value.dim()}-D and {cache.dim()}-D")
    if value.dtype != cache.dtype:
        raise ValueError(f"update_cache_with_indices: value is {value.dtype} but the cache is {cache.dtype}; cast one")
    if value.shape[0] != cache.shape[0] or value.shape[2:] != cache.shape[2:]:
        raise ValueError(f"update_cache_with_indices: value {tuple(value.shape)} does not fit cache "
                         f"{tuple(cache.shape)} in batch, heads or head_dim")
    if indices.dtype != torch.int64 or indices.dim() != 2 or tuple(indices.shape) != tuple(value.shape[:2]):
        raise ValueError("update_cache_with_indices: indices must be int64 [batch, seq] matching value's first two "
                         f"dims {tuple(value.shape[:2])}; got {indices.dtype} {tuple(indices.shape)}")


def update_cache_with_indices(value, cache, start_pos, indices):
    """Writes `value[b, s]` into `cache[b, indices[b, s]]` for every batch row b and position s (a later
    position wins where indices repeat); `start_pos` is where the sequence starts, for the caller's
    bookkeeping. Returns a one-element placeholder, as ExecuTorch's op does."""
    _check_indices(value, cache, indices)
    if indices.numel() and (int(indices.min()) < 0 or int(indices.max()) >= cache.shape[1]):
        raise ValueError(f"update_cache_with_indices: indices {indices.tolist()} fall outside the cache's "
                         f"{cache.shape[1]} positions")
    for b in range(value.shape[0]):
        for s, slot in enumerate(indices[b].tolist()):
            cache[b, slot].copy_(value[b, s])
    return torch.empty((1,), dtype=value.dtype)


def update_cache_with_indices_meta(value, cache, start_pos, indices):
    _check_indices(value, cache, indices)
    return torch.empty((1,), dtype=value.dtype, device="meta")


def update_cache_with_indices_out(value, cache, start_pos, indices, *, out):
    update_cache_with_indices(value, cache, start_pos, indices)
    return out


_IMPLS = {
    "custom_sdpa": {"CompositeExplicitAutograd": custom_sdpa, "Meta": custom_sdpa_meta},
    "custom_sdpa.out": {"CompositeExplicitAutograd": custom_sdpa_out},
    "update_cache": {"CompositeExplicitAutograd": update_cache, "Meta": update_cache_meta},
    "update_cache.out": {"CompositeExplicitAutograd": update_cache_out},
    "update_cache_with_indices": {"CompositeExplicitAutograd": update_cache_with_indices,
                                  "Meta": update_cache_with_indices_meta},
    "update_cache_with_indices.out": {"CompositeExplicitAutograd": update_cache_with_indices_out},
}
for _name in _NEW:
    for _key, _fn in _IMPLS[_name].items():
        _lib.impl(_name, _fn, _key)
