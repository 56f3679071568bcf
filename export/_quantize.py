"""pt2e post-training (or quantization-aware) quantization of one method, as `QuantizeStage` runs it."""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence

import torch

from executorch.export.recipe import QuantizationRecipe


def _apply(method: str, step: str, model: Any, passes: Optional[List[Callable]]) -> Any:
    for p in passes or []:
        try:
            model = p(model)
        except Exception as e:
            raise RuntimeError(f"method '{method}': {step} pass {getattr(p, '__name__', p)!r} failed: {e}") from e
    return model


def quantize_pt2e(method: str, model: Any, samples: Sequence[tuple], recipe: QuantizationRecipe,
                  quantizer: Any, s: Any) -> torch.fx.GraphModule:
    """Capture `model`, prepare it with `quantizer`, calibrate on every sample (or train with
    `train_fn`), and convert: a GraphModule with quantize/dequantize ops. torchao's functions are
    attributes of `s` (executorch.export.stages, where upstream has them)."""

    first = samples[0]
    dynamic = None
    if recipe.dynamic_batch_size:
        batch = torch.export.Dim("batch", min=1)
        dynamic = tuple({0: batch} if isinstance(t, torch.Tensor) else None for t in first)
    if recipe.is_qat:
        if recipe.train_fn is None:
            raise ValueError(f"method '{method}': train_fn must be provided when is_qat=True (QuantizationRecipe"
                             ".train_fn trains the prepared model)")
        model.train()
    captured = torch.export.export(model, first, dynamic_shapes=dynamic, strict=True).module()
    captured = _apply(method, "pre_prepare", captured, recipe.pre_prepare_passes)
    if recipe.is_qat:
        prepared = s.prepare_qat_pt2e(captured, quantizer)
        prepared = _apply(method, "post_prepare", prepared, recipe.post_prepare_passes)
        s.allow_exported_model_train_eval(prepared)
        s.move_exported_model_to_train(prepared)
        recipe.train_fn(prepared)
        s.move_exported_model_to_eval(prepared)
    else:
        prepared = s.prepare_pt2e(captured, quantizer)
        prepared = _apply(method, "post_prepare", prepared, recipe.post_prepare_passes)
        calibration = recipe.calibration_inputs_fn() if recipe.calibration_inputs_fn else samples
        with torch.no_grad():
            for sample in calibration:
                prepared(*sample)
    prepared = _apply(method, "pre_convert", prepared, recipe.pre_convert_passes)
    converted = s.convert_pt2e(prepared)
    return _apply(method, "post_convert", converted, recipe.post_convert_passes)
