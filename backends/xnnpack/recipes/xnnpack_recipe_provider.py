"""`XNNPACKRecipeProvider`: builds the `ExportRecipe` of each `XNNPackRecipeType`.

Every recipe lowers with `XnnpackPartitioner()` (every precision it supports, as the published recipes
end up configuring it) and XNNPACK's edge and backend configs; the quantized ones quantize first, with
`XNNPACKQuantizer` (pt2e) or torchao's `quantize_` (8-bit dynamic activations, 4-bit weights). torchao
is needed only by the quantized recipes, and is imported when one is made.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from executorch.backends.xnnpack.recipes.xnnpack_recipe_types import XNNPackRecipeType
from executorch.export.recipe import AOQuantizationConfig, ExportRecipe, LoweringRecipe, QuantizationRecipe, RecipeType
from executorch.export.recipe_provider import BackendRecipeProvider

_R = XNNPackRecipeType
# pt2e recipe -> (per channel, dynamic activations)
_PT2E = {
    _R.PT2E_INT8_DYNAMIC_PER_CHANNEL: (True, True),
    _R.PT2E_INT8_STATIC_PER_CHANNEL: (True, False),
    _R.PT2E_INT8_STATIC_PER_TENSOR: (False, False),
}
_DEFAULT_GROUP_SIZE = 32


class XNNPACKRecipeProvider(BackendRecipeProvider):
    """The "xnnpack" backend's recipes; only the per-group 8da4w recipe takes an option, `group_size`."""

    @property
    def backend_name(self) -> str:
        return "xnnpack"

    def get_supported_recipes(self) -> Sequence[RecipeType]:
        return list(XNNPackRecipeType)

    def create_recipe(self, recipe_type: RecipeType, **kwargs: Any) -> Optional[ExportRecipe]:
        if recipe_type not in self.get_supported_recipes():
            return None
        _check_options(recipe_type, kwargs)
        if recipe_type is _R.FP32:
            return _recipe(recipe_type, None)
        from executorch.export._torchao import require_torchao

        require_torchao(f"recipe {recipe_type.value}")
        if recipe_type in _PT2E:
            return _pt2e_recipe(recipe_type, *_PT2E[recipe_type])
        return _torchao_8da4w_recipe(recipe_type, kwargs.get("group_size", _DEFAULT_GROUP_SIZE))


def _check_options(recipe_type: RecipeType, kwargs: dict) -> None:
    allowed = {"group_size"} if recipe_type is _R.TORCHAO_INT8_DYNAMIC_ACT_INT4_WEIGHT_PER_TENSOR else set()
    unknown = sorted(set(kwargs) - allowed)
    if unknown:
        takes = "only 'group_size'" if allowed else "no options"
        raise ValueError(f"recipe {recipe_type.value} takes {takes}; got {unknown}")
    group_size = kwargs.get("group_size", _DEFAULT_GROUP_SIZE)
    if not isinstance(group_size, int) or isinstance(group_size, bool) or group_size <= 0:
        raise ValueError(f"recipe {recipe_type.value}: group_size must be a positive int, got {group_size!r}")


def _recipe(recipe_type: RecipeType, quantization: Optional[QuantizationRecipe]) -> ExportRecipe:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.backends.xnnpack.utils.configs import (get_xnnpack_edge_compile_config,
                                                           get_xnnpack_executorch_backend_config)

    return ExportRecipe(
        name=recipe_type.value,
        quantization_recipe=quantization,
        lowering_recipe=LoweringRecipe(partitioners=[XnnpackPartitioner()],
                                       edge_compile_config=get_xnnpack_edge_compile_config()),
        executorch_backend_config=get_xnnpack_executorch_backend_config(),
    )


def _pt2e_recipe(recipe_type: RecipeType, per_channel: bool, dynamic: bool) -> ExportRecipe:
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (XNNPACKQuantizer,
                                                                         get_symmetric_quantization_config)

    quantizer = XNNPACKQuantizer().set_global(
        get_symmetric_quantization_config(is_per_channel=per_channel, is_dynamic=dynamic))
    return _recipe(recipe_type, QuantizationRecipe(quantizers=[quantizer]))


def _torchao_8da4w_recipe(recipe_type: RecipeType, group_size: int) -> ExportRecipe:
    import torch
    from torchao.quantization.granularity import PerAxis, PerGroup
    from torchao.quantization.quant_api import Int8DynamicActivationIntxWeightConfig

    per_channel = recipe_type is _R.TORCHAO_INT8_DYNAMIC_ACT_INT4_WEIGHT_PER_CHANNEL
    config = Int8DynamicActivationIntxWeightConfig(
        weight_dtype=torch.int4, weight_granularity=PerAxis(axis=0) if per_channel else PerGroup(group_size))
    return _recipe(recipe_type, QuantizationRecipe(ao_quantization_configs=[AOQuantizationConfig(config)]))
