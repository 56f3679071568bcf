"""The Llama-family decoder export_llm exports: RMSNorm, rotary positions, grouped-query attention, SwiGLU.

Parameter names follow ExecuTorch's checkpoint layout (`tok_embeddings`, `layers.N.attention.wq`,
`layers.N.feed_forward.w1`, `norm`, `output`), so one state dict loads into this model and into the published one.
`forward(tokens [1, seq], attn_options={"input_pos": [1]})` returns the last token's logits [1, vocab] (every
position's, [1, seq, vocab], with `generate_full_logits`).
"""

from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from executorch.examples.models.llama.attention import AttentionMHA
from executorch.examples.models.llama.model_args import ModelArgs


class RMSNorm(nn.Module):
    """x / rms(x) * weight, computed in float32."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        normed = xf * torch.rsqrt((xf * xf).mean(-1, keepdim=True) + self.eps)
        return normed.type_as(x) * self.weight.type_as(x)


def _llama3_scaled(freqs: torch.Tensor, scale_factor: int, high_freq_factor: int) -> torch.Tensor:
    # Llama 3.1's context extension: long wavelengths divided by the scale factor, short ones kept, a smooth
    # blend between, relative to the 8192-token context the model was first trained on.
    original_context, low_freq_factor = 8192, 1
    wavelen = 2 * math.pi / freqs
    smooth = (original_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    blended = (1 - smooth) * freqs / scale_factor + smooth * freqs
    scaled = torch.where(wavelen > original_context / low_freq_factor, freqs / scale_factor, blended)
    return torch.where(wavelen < original_context / high_freq_factor, freqs, scaled)


class Rope(nn.Module):
    """Rotary position tables for every cache position, and their application to queries and keys: pairs of
    adjacent channels rotate together (Meta's layout), or the two halves (Hugging Face's, `use_hf_rope`)."""

    def __init__(self, params: ModelArgs) -> None:
        super().__init__()
        self.params = params
        dim = params.head_dim
        exponent = torch.arange(0, dim, 2)[: dim // 2]
        freqs = 1.0 / (params.rope_freq_base ** (exponent.float() / dim))
        if params.use_scaled_rope:
            freqs = _llama3_scaled(freqs, params.rope_scale_factor, params.high_freq_factor)
        # A sharded checkpoint (ffn_dim_multiplier set) carries a table twice the context, as upstream's does.
        end = params.max_context_len * (1 if params.ffn_dim_multiplier is None else 2)
        angles = torch.outer(torch.arange(end).float(), freqs).float()
        if params.use_hf_rope:
            angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("freqs_cos", torch.cos(angles), persistent=False)
        self.register_buffer("freqs_sin", torch.sin(angles), persistent=False)

    def get_freqs(self, input_pos: Optional[torch.Tensor], seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The table rows for `seq_len` positions from `input_pos[-1]` (from 0 without a KV cache)."""
        if not self.params.use_kv_cache:
            return self.freqs_cos[:seq_len], self.freqs_sin[:seq_len]
        if input_pos is None:
            raise ValueError("Rope: a KV-cache model needs attn_options['input_pos']")
        if not self.params.enable_dynamic_shape:
            return self.freqs_cos[input_pos], self.freqs_sin[input_pos]
        start = input_pos[-1].item()
        torch._check(start >= 0)
        torch._check(start < self.params.max_context_len)
        return self.freqs_cos.narrow(0, start, seq_len), self.freqs_sin.narrow(0, start, seq_len)

    def forward(self, q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotates q and k, both [batch, seq, heads, head_dim]; cos and sin are [seq, head_dim / 2] (Meta) or
        [seq, head_dim] (HF)."""
        if self.params.use_hf_rope:
            cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)

            def rotate(x):
                half = x.shape[-1] // 2
                return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin

            return rotate(q), rotate(k)
        cos, sin = cos.view(1, cos.shape[0], 1, cos.shape[1]), sin.view(1, sin.shape[0], 1, sin.shape[1])

        def rotate_pairs(x):
            real, imag = x.float().reshape(x.shape[:-1] + (-1, 2)).unbind(-1)
            out = torch.stack([real * cos - imag * sin, real * sin + imag * cos], dim=-1)
            return out.flatten(3).type_as(x)

        return rotate_pairs(q), rotate_pairs(k)


class FeedForward(nn.Module):
    """SwiGLU: w2(silu(w1 x) * w3 x)."""

    def __init__(self, dim: int, hidden_dim: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    """Pre-norm attention and feed-forward, each added to the residual stream."""

    def __init__(self, layer_id: int, args: ModelArgs, rope: Rope) -> None:
        super().__init__()
        self.attention = AttentionMHA(args, layer_id, rope)
        self.feed_forward = FeedForward(args.dim, args.hidden_dim)
        self.attention_norm = RMSNorm(args.dim, eps=args.norm_eps)
        self.ffn_norm = RMSNorm(args.dim, eps=args.norm_eps)

    def forward(self, x: torch.Tensor, freqs_cos: torch.Tensor, freqs_sin: torch.Tensor,
                attn_options: dict) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x), freqs_cos, freqs_sin, **attn_options)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    """Embedding, the blocks, a final norm and the output projection."""

    def __init__(self, params: ModelArgs) -> None:
        super().__init__()
        self.params = params
        self.vocab_size = params.vocab_size
        self.n_layers = params.n_layers
        self.max_seq_len = params.max_seq_len
        self.max_context_len = params.max_context_len
        self.tok_embeddings = nn.Embedding(params.vocab_size, params.dim)
        self.rope = Rope(params)
        self.layers = nn.ModuleList(TransformerBlock(i, params, self.rope) for i in range(params.n_layers))
        self.norm = RMSNorm(params.dim, eps=params.norm_eps)
        self.output = nn.Linear(params.dim, params.vocab_size, bias=False)

    def forward(self, tokens: torch.Tensor, attn_options: Optional[dict] = None) -> torch.Tensor:
        attn_options = dict(attn_options or {})
        h = self.tok_embeddings(tokens)
        freqs_cos, freqs_sin = self.rope.get_freqs(attn_options.get("input_pos"), h.shape[1])
        for layer in self.layers:
            h = layer(h, freqs_cos, freqs_sin, attn_options)
        if not self.params.generate_full_logits:
            h = h[:, -1, :]
        return self.output(self.norm(h))


def construct_transformer(model_args: ModelArgs) -> Transformer:
    """The decoder `model_args` describes, with PyTorch's default initialization."""
    return Transformer(model_args)
