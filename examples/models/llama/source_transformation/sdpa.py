"""Swaps a Llama model's attention core for ExecuTorch's fused `llama::custom_sdpa` op."""

from __future__ import annotations

import torch
from torch import nn

import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401  (defines torch.ops.llama)
from executorch.examples.models.llama.attention import SDPA


class SDPACustom(nn.Module):
    """Causal attention of q over the caches up to `input_pos[0] + seq` through `llama::custom_sdpa`, which takes
    [batch, seq, heads, head_dim] and shares each key/value head among its query heads itself."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input_pos: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bsz: int,
                seqlen: int, mask: torch.Tensor) -> torch.Tensor:
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        dtype = q.dtype
        if dtype not in (torch.float32, torch.bfloat16):
            q, k, v = q.float(), k.float(), v.float()
        y = torch.ops.llama.custom_sdpa(q, k, v, input_pos[0].item(), None, 0, True)
        return y.view(bsz, seqlen, self.dim).to(dtype)


def replace_sdpa_with_custom_op(module: nn.Module) -> nn.Module:
    """Replaces every `SDPA` submodule with `SDPACustom` in place; returns the module."""
    for name, child in module.named_children():
        if isinstance(child, SDPA):
            setattr(module, name, SDPACustom(child.dim))
        else:
            replace_sdpa_with_custom_op(child)
    return module
