"""`XNNPackRecipeType`: the names of XNNPACK's export recipes."""

from executorch.export.recipe import RecipeType


class XNNPackRecipeType(RecipeType):
    """Recipes that delegate to XNNPACK: fp32, pt2e int8 (static or dynamic activations), torchao 8da4w."""

    FP32 = "xnnpack_fp32"
    # pt2e: int8 weights; activations int8 from calibration (static) or computed per call (dynamic).
    PT2E_INT8_DYNAMIC_PER_CHANNEL = "xnnpack_pt2e_int8_dynamic_per_channel"
    PT2E_INT8_STATIC_PER_CHANNEL = "xnnpack_pt2e_int8_static_per_channel"
    PT2E_INT8_STATIC_PER_TENSOR = "xnnpack_pt2e_int8_static_per_tensor"
    # torchao source transform: int8 dynamic activations, int4 weights, one scale per output channel ...
    TORCHAO_INT8_DYNAMIC_ACT_INT4_WEIGHT_PER_CHANNEL = "xnnpack_torchao_int8da_int4w_per_channel"
    # ... or per group of `group_size` input channels (32 unless the recipe is given group_size=N).
    TORCHAO_INT8_DYNAMIC_ACT_INT4_WEIGHT_PER_TENSOR = "xnnpack_torchao_int8da_int4w_per_tensor"

    @classmethod
    def get_backend_name(cls) -> str:
        return "xnnpack"
