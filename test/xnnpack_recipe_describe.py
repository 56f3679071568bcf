"""Print, as JSON, what each `XNNPackRecipeType` recipe holds (whichever executorch this python imports):
quantizers and their configs, torchao configs, partitioners, edge and backend configs.

    python xnnpack_recipe_describe.py

Run by test/test_xnnpack_recipes.py here and, as a separate process, in the published ExecuTorch's environment.
"""

from __future__ import annotations

import json


def _spec(spec) -> object:
    if spec is None:
        return None
    return {"dtype": str(spec.dtype), "range": [spec.quant_min, spec.quant_max], "qscheme": str(spec.qscheme),
            "ch_axis": spec.ch_axis, "dynamic": spec.is_dynamic}


def _granularity(g) -> str:
    return f"{type(g).__name__}({', '.join(f'{k}={v}' for k, v in sorted(vars(g).items()))})"


def describe(recipe) -> dict:
    q = recipe.quantization_recipe
    lowering = recipe.lowering_recipe
    out = {"name": recipe.name, "quantizers": None, "ao": None}
    if q is not None and q.quantizers:
        out["quantizers"] = [{"type": type(z).__name__, "qat": z.global_config.is_qat,
                              **{k: _spec(getattr(z.global_config, k))
                                 for k in ("input_activation", "output_activation", "weight", "bias")}}
                             for z in q.quantizers]
    if q is not None and q.ao_quantization_configs:
        out["ao"] = [{"type": type(c.ao_base_config).__name__, "weight_dtype": str(c.ao_base_config.weight_dtype),
                      "granularity": _granularity(c.ao_base_config.weight_granularity),
                      "filter": c.filter_fn is not None} for c in q.ao_quantization_configs]
    out["partitioners"] = [type(p).__name__ for p in lowering.partitioners]
    edge = lowering.edge_compile_config
    out["edge"] = [edge._check_ir_validity, edge._skip_dim_order]
    backend = recipe.executorch_backend_config
    out["backend"] = [backend.extract_delegate_segments, len(backend.passes)]
    return out


def main() -> None:
    from executorch.backends.xnnpack.recipes import XNNPackRecipeType
    from executorch.export import ExportRecipe

    described = {"members": {r.name: r.value for r in XNNPackRecipeType}, "recipes": {}}
    for r in XNNPackRecipeType:
        described["recipes"][r.name] = describe(ExportRecipe.get_recipe(r))
    described["recipes"]["group_size_16"] = describe(ExportRecipe.get_recipe(
        XNNPackRecipeType.TORCHAO_INT8_DYNAMIC_ACT_INT4_WEIGHT_PER_TENSOR, group_size=16))
    print(json.dumps(described, sort_keys=True))


if __name__ == "__main__":
    main()
