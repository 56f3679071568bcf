"""The model zoo: name -> factory returning (model in eval mode, example inputs), seeded.

Each model lives in a self-contained file so tools can also load it by path as
`FILE.py:FACTORY`. A factory `make_x` may have a sibling `make_x_dynamic_shapes()` returning
the `dynamic_shapes` argument for `torch.export.export`; `DYNAMIC_SHAPES` collects those.
"""

from __future__ import annotations

from typing import Any, Callable

from torch import nn

from .llama_decoder import make_llama_decoder
from .mobilenet_v2 import make_mobilenet_v2
from .multi_io import make_multi_io
from .resnet import make_resnet18, make_resnet50
from .transformer_encoder import make_transformer_encoder, make_transformer_encoder_dynamic_shapes
from .vit_tiny import make_vit_tiny

Factory = Callable[[], "tuple[nn.Module, tuple[Any, ...]]"]

MODELS: dict[str, Factory] = {
    "mobilenet_v2": make_mobilenet_v2,
    "resnet18": make_resnet18,
    "resnet50": make_resnet50,
    "transformer_encoder": make_transformer_encoder,
    "multi_io": make_multi_io,
    "vit_tiny": make_vit_tiny,
    "llama_decoder": make_llama_decoder,
}

DYNAMIC_SHAPES: dict[str, Callable[[], Any]] = {
    "transformer_encoder": make_transformer_encoder_dynamic_shapes,
}

# Registry name -> (module, EagerModelBase class), for EagerModelFactory.create_model (names as
# ExecuTorch's examples where the model is the same kind).
MODEL_NAME_TO_MODEL: dict[str, tuple[str, str]] = {
    "mv2": ("zoo_models", "MV2Model"),
    "resnet18": ("zoo_models", "ResNet18Model"),
    "resnet50": ("zoo_models", "ResNet50Model"),
    "vit_tiny": ("zoo_models", "ViTTinyModel"),
    "transformer_encoder": ("zoo_models", "TransformerEncoderModel"),
    "multi_io": ("zoo_models", "MultiIOModel"),
    "llama_decoder": ("zoo_models", "LlamaDecoderModel"),
    # Registered for vendor scripts only, not in MODELS: a 26 M-parameter audio net our own tests
    # exercise through vendor flows (test_vendor_arm.py), not through every zoo test.
    "w2l": ("zoo_models", "Wav2LetterModel"),
}

__all__ = ["DYNAMIC_SHAPES", "MODELS", "MODEL_NAME_TO_MODEL"]
