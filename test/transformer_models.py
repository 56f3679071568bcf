"""Standard transformer blocks for the runtime tests, and a script that exports them with the
published exporter.

Imports only torch, so the reference environment (named by ET_REFERENCE_PYTHON) can run it:
    $ET_REFERENCE_PYTHON test/transformer_models.py OUT_DIR NAME [NAME ...]
writes OUT_DIR/NAME.pte for each named model. Weights are seeded and outputs are of order one.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

_ZOO = Path(__file__).resolve().parents[1] / "examples" / "models"


def _zoo(name: str):
    spec = importlib.util.spec_from_file_location(f"zoo_{name}", _ZOO / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class MultiheadSelfAttention(nn.Module):
    """`nn.MultiheadAttention` (batch first), returning the output and the head-averaged weights."""

    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(32, 4, batch_first=True)

    def forward(self, x):
        return self.attn(x, x, x)


class SdpaAttention(nn.Module):
    """Projections around `F.scaled_dot_product_attention`: causal, or with a boolean mask input."""

    def __init__(self, causal: bool) -> None:
        super().__init__()
        self.causal = causal
        self.qkv = nn.Linear(32, 96)
        self.out = nn.Linear(32, 32)

    def forward(self, x, mask=None):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, 4, d // 4).permute(2, 0, 3, 1, 4)
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=self.causal)
        return self.out(ctx.transpose(1, 2).reshape(b, s, d))


class Rotary(nn.Module):
    """Rotary position embeddings on per-head queries and keys, then their attention scores."""

    def __init__(self) -> None:
        super().__init__()
        cos, sin = _zoo("llama_decoder").rope_tables(16, 32)
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)

    def forward(self, q, k):
        rope = _zoo("llama_decoder").apply_rope
        s = q.shape[2]
        q, k = rope(q, self.cos[:s], self.sin[:s]), rope(k, self.cos[:s], self.sin[:s])
        return q, k.transpose(-2, -1).contiguous(), torch.softmax(q @ k.transpose(-2, -1) / 4.0, dim=-1)


def _mha():
    torch.manual_seed(0)
    return MultiheadSelfAttention().eval(), (torch.randn(2, 8, 32),)


def _sdpa_causal():
    torch.manual_seed(0)
    return SdpaAttention(causal=True).eval(), (torch.randn(2, 8, 32),)


def _sdpa_mask():
    torch.manual_seed(0)
    mask = torch.rand(8, 8) > 0.3
    mask.fill_diagonal_(True)  # every query sees at least itself
    return SdpaAttention(causal=False).eval(), (torch.randn(2, 8, 32), mask)


def _rope():
    torch.manual_seed(0)
    return Rotary().eval(), (torch.randn(2, 4, 12, 16), torch.randn(2, 4, 12, 16))


def _torch_transformer_encoder():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, dropout=0.0, activation="gelu", batch_first=True)
    model = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
    return model.eval(), (torch.randn(2, 16, 64),)


def _vit_tiny():
    return _zoo("vit_tiny").make_vit_tiny()


def _llama_decoder():
    return _zoo("llama_decoder").make_llama_decoder()


# name -> factory() -> (model, example inputs)
FACTORIES = {
    "mha": _mha,
    "sdpa_causal": _sdpa_causal,
    "sdpa_mask": _sdpa_mask,
    "rope": _rope,
    "torch_transformer_encoder": _torch_transformer_encoder,
    "vit_tiny": _vit_tiny,
    "llama_decoder": _llama_decoder,
}


def _export_with_published_exporter(out_dir: Path, names: list[str]) -> None:
    from executorch.exir import to_edge_transform_and_lower

    for name in names:
        model, inputs = FACTORIES[name]()
        program = to_edge_transform_and_lower(torch.export.export(model, inputs)).to_executorch()
        (out_dir / f"{name}.pte").write_bytes(program.buffer)


if __name__ == "__main__":
    _export_with_published_exporter(Path(sys.argv[1]), sys.argv[2:])
