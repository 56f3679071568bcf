"""The zoo's factories as `EagerModelBase` classes, for tools that take a model by registry name
(`MODEL_NAME_TO_MODEL`, as vendor scripts such as Arm's `aot_arm_compiler -m mv2` do)."""

from __future__ import annotations

from typing import Callable

from .model_base import EagerModelBase


class _Zoo(EagerModelBase):
    factory: Callable = staticmethod(lambda: (None, ()))

    def __init__(self, **_kwargs) -> None:
        self._model, self._inputs = type(self).factory()

    def get_eager_model(self):
        return self._model

    def get_example_inputs(self) -> tuple:
        return self._inputs


def _zoo(name: str, factory_name: str, module: str) -> type:
    def factory():
        import importlib

        return getattr(importlib.import_module(f"{__package__}.{module}"), factory_name)()

    return type(name, (_Zoo,), {"factory": staticmethod(factory), "__doc__": f"{factory_name}() as a model class."})


MV2Model = _zoo("MV2Model", "make_mobilenet_v2", "mobilenet_v2")
ResNet18Model = _zoo("ResNet18Model", "make_resnet18", "resnet")
ResNet50Model = _zoo("ResNet50Model", "make_resnet50", "resnet")
ViTTinyModel = _zoo("ViTTinyModel", "make_vit_tiny", "vit_tiny")
TransformerEncoderModel = _zoo("TransformerEncoderModel", "make_transformer_encoder", "transformer_encoder")
MultiIOModel = _zoo("MultiIOModel", "make_multi_io", "multi_io")
LlamaDecoderModel = _zoo("LlamaDecoderModel", "make_llama_decoder", "llama_decoder")
Wav2LetterModel = _zoo("Wav2LetterModel", "make_wav2letter", "wav2letter")
