"""Models for the native thread-scaling table, at benchmark sizes: factories returning (model, inputs), seeded."""

from __future__ import annotations

import torch

from _zoo import zoo_file as _zoo_file  # this folder is on sys.path, here and in the XNNPACK venv


def make_mobilenet_v2():
    return _zoo_file("mobilenet_v2").make_mobilenet_v2()


def make_resnet18():
    return _zoo_file("resnet").make_resnet18()


def make_resnet50():
    return _zoo_file("resnet").make_resnet50()


def make_vit_small():
    """ViT-S/16 on one 224x224 image: dim 384, 12 blocks, 6 heads, MLP 4x."""
    vit = _zoo_file("vit_tiny")
    torch.manual_seed(0)
    model = vit.VisionTransformer(image=224, patch=16, dim=384, depth=12, heads=6, mlp_ratio=4)
    with torch.no_grad():
        model.cls_token.normal_(std=0.02)
        model.pos_embed.normal_(std=0.02)
    return model.eval(), (torch.randn(1, 3, 224, 224),)


def make_transformer_encoder():
    """The zoo's encoder at BERT-small width: 4 layers, d_model 512, 8 heads, FF 2048, 128 tokens."""
    enc = _zoo_file("transformer_encoder")
    torch.manual_seed(0)
    model = enc.TransformerEncoder(layers=4, d_model=512, heads=8, ff=2048).eval()
    return model, (torch.randn(1, 128, 512),)


class _Lstm(torch.nn.Module):
    """Two stacked LSTM layers and a linear head on the last step."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = torch.nn.LSTM(256, 512, num_layers=2, batch_first=True)
        self.head = torch.nn.Linear(512, 256)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.lstm(x)[0][:, -1])


def make_lstm():
    torch.manual_seed(0)
    return _Lstm().eval(), (torch.randn(1, 32, 256),)


def make_llama_100m_token():
    """A ~100 M-parameter Llama-style decoder (vocab 32000, width 768, 8 layers, 12 heads, 4 KV heads)
    on one token: the weight traffic of one decode step (this zoo decoder keeps no KV cache)."""
    llama = _zoo_file("llama_decoder")
    torch.manual_seed(0)
    model = llama.LlamaDecoder(vocab=32000, dim=768, layers=8, heads=12, kv_heads=4, hidden=2048, max_seq=64)
    return model.eval(), (torch.randint(0, 32000, (1, 1)),)


MODELS = {
    "mobilenet_v2": make_mobilenet_v2,
    "resnet18": make_resnet18,
    "resnet50": make_resnet50,
    "vit_small": make_vit_small,
    "transformer_encoder": make_transformer_encoder,
    "lstm": make_lstm,
    "llama_100m_token": make_llama_100m_token,
}
