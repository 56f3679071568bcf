"""pt2e post-training (or quantization-aware) quantization of one method, as `QuantizeStage` runs it."""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence

import torch

from executorch.export._torchao import require_torchao
from executorch.export.recipe import QuantizationRecipe


def _apply(method: str, step: str, model: Any, passes: Optional[List[Callable]]) -> Any:
    for p in passes or []:
        try:
            model = p(model)
        except Exception as e:
            raise RuntimeError(f"method '{method}': {step} pass {getattr(p, '__name__', p)!r} failed: {e}") from e
    return model


def _quantizer(quantizers: Sequence[Any]) -> Any:
    from torchao.quantization.pt2e.quantizer import ComposableQuantizer, Quantizer

    wrong = [q for q in quantizers if not isinstance(q, Quantizer)]
    if wrong:
        raise TypeError(f"quantizer {type(wrong[0]).__name__} is not a torchao pt2e Quantizer "
                        "(torchao.quantization.pt2e.quantizer.Quantizer); port it to torchao's interface")
    return quantizers[0] if len(quantizers) == 1 else ComposableQuantizer(list(quantizers))


def quantize_pt2e(method: str, model: Any, samples: Sequence[tuple],
                  recipe: QuantizationRecipe) -> torch.fx.GraphModule:
    """Capture `model`, prepare it with the recipe's quantizers, calibrate on every sample (or
    train with `train_fn`), and convert: a GraphModule with quantize/dequantize ops."""
    require_torchao("the quantize stage (QuantizationRecipe.quantizers)")
    from torchao.quantization.pt2e import (allow_exported_model_train_eval, move_exported_model_to_eval,
                                           move_exported_model_to_train)
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e, prepare_qat_pt2e

    first = samples[0]
    dynamic = None
    if recipe.dynamic_batch_size:
        batch = torch.export.Dim("batch", min=1)
        dynamic = tuple({0: batch} if isinstance(t, torch.Tensor) else None for t in first)
    if recipe.is_qat:
        if recipe.train_fn is None:
            raise ValueError(f"method '{method}': QuantizationRecipe.is_qat=True needs a train_fn")
        model.train()
    captured = torch.export.export(model, first, dynamic_shapes=dynamic, strict=True).module()
    captured = _apply(method, "pre_prepare", captured, recipe.pre_prepare_passes)
    quantizer = _quantizer(recipe.quantizers)
    if recipe.is_qat:
        prepared = prepare_qat_pt2e(captured, quantizer)
        prepared = _apply(method, "post_prepare", prepared, recipe.post_prepare_passes)
        allow_exported_model_train_eval(prepared)
        move_exported_model_to_train(prepared)
        recipe.train_fn(prepared)
        move_exported_model_to_eval(prepared)
    else:
        prepared = prepare_pt2e(captured, quantizer)
        prepared = _apply(method, "post_prepare", prepared, recipe.post_prepare_passes)
        calibration = recipe.calibration_inputs_fn() if recipe.calibration_inputs_fn else samples
        with torch.no_grad():
            for sample in calibration:
                prepared(*sample)
    prepared = _apply(method, "pre_convert", prepared, recipe.pre_convert_passes)
    converted = convert_pt2e(prepared)
    return _apply(method, "post_convert", converted, recipe.post_convert_passes)
