"""export_llama: an LlmConfig to a .pte, the flow behind `python -m executorch.extension.llm.export.export_llm`.

Builds the Llama-family Transformer from params.json (and a checkpoint, or random weights), applies the source
transformations the config asks for (torchao 8da4w / 8da8w linears, `llama::custom_sdpa` with
`llama::update_cache`), exports `forward(tokens [1, seq], {"input_pos": [1]})` with a dynamic token count, lowers
(XNNPACK when enabled) and writes the program with the metadata methods ExecuTorch's LLM runner reads.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any, Optional

import torch

from executorch.examples.models.llama.llama_transformer import Transformer, construct_transformer
from executorch.examples.models.llama.model_args import ModelArgs
from executorch.extension.llm.export.config.llm_config import LlmConfig, ModelType

_LOG = logging.getLogger(__name__)
# The classes whose weights ExecuTorch fetches from the Hugging Face hub when no checkpoint is given.
_HUB_MODELS = {ModelType.qwen2_5_0_5b, ModelType.qwen2_5_1_5b, ModelType.qwen2_5_coder_32b}


def _load_checkpoint(path: str) -> dict[str, torch.Tensor]:
    state = torch.load(path, map_location="cpu", mmap=True, weights_only=True)
    return state.get("model", state) if isinstance(state, dict) else state


def build_model(llm_config: LlmConfig) -> Transformer:
    """The eager model the config describes, in eval mode, before any source transformation."""
    base, model_cfg, export_cfg = llm_config.base, llm_config.model, llm_config.export
    if base.model_class in _HUB_MODELS and not base.checkpoint:
        raise ValueError(f"base.model_class={base.model_class.value} needs base.checkpoint (a converted "
                         "checkpoint); its weights are not downloaded here")
    params: dict[str, Any] = {}
    if base.params:
        with open(base.params, encoding="utf-8") as f:
            params = json.load(f)
    args = ModelArgs.from_params(
        params, max_batch_size=1, max_seq_len=export_cfg.max_seq_length,
        max_context_len=export_cfg.max_context_length, use_kv_cache=model_cfg.use_kv_cache,
        use_sdpa_with_kv_cache_op=model_cfg.use_sdpa_with_kv_cache,
        enable_dynamic_shape=model_cfg.enable_dynamic_shape,
        generate_full_logits=llm_config.debug.generate_full_logits)
    if args.use_scaled_rope:
        if base.model_class in (ModelType.llama2, ModelType.stories110m):
            raise ValueError(f"params.json: use_scaled_rope is Llama 3's; base.model_class={base.model_class.value}")
        if base.model_class not in (ModelType.llama3, ModelType.llama3_1):
            args.rope_scale_factor = 32  # Llama 3.2's factor
    model = construct_transformer(args)
    if base.checkpoint:
        missing, _ = model.load_state_dict(_load_checkpoint(base.checkpoint), strict=False, assign=True)
        missing_weights = [name for name in missing if name.endswith(".weight")]
        if missing_weights:
            raise ValueError(f"checkpoint {base.checkpoint}: no {', '.join(missing_weights)}; its keys must be "
                             "ExecuTorch's Llama names (tok_embeddings, layers.N.attention.wq, ..., output)")
    else:
        _LOG.info("no checkpoint given: random weights")
    return model.eval()


def _quantize_linears(model: torch.nn.Module, qmode: str, group_size: Optional[int], use_hqq: bool) -> None:
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig, quantize_
    from torchao.quantization.granularity import PerAxis, PerGroup

    group = 128 if group_size is None else group_size

    def divisible(module: torch.nn.Module, fqn: str) -> bool:
        # A linear whose input size the group does not divide stays float, as in ExecuTorch's flow.
        return isinstance(module, torch.nn.Linear) and (group == 0 or module.weight.shape[1] % group == 0)

    quantize_(model, Int8DynamicActivationIntxWeightConfig(
        weight_dtype=torch.int4 if qmode == "8da4w" else torch.int8,
        weight_granularity=PerAxis(0) if group == 0 else PerGroup(group),
        intx_choose_qparams_algorithm="hqq_scale_only" if use_hqq else "affine"), filter_fn=divisible)


def apply_source_transforms(model: Transformer, llm_config: LlmConfig) -> Transformer:
    """Quantization, then the custom-op attention, as the config asks; in place, returns the model."""
    if llm_config.quantization.qmode:
        _quantize_linears(model, llm_config.quantization.qmode, llm_config.quantization.group_size,
                          llm_config.quantization.use_hqq)
    if llm_config.model.use_sdpa_with_kv_cache:
        from executorch.examples.models.llama.source_transformation.custom_kv_cache import (
            replace_kv_cache_with_custom_kv_cache)
        from executorch.examples.models.llama.source_transformation.sdpa import replace_sdpa_with_custom_op

        replace_sdpa_with_custom_op(model)
        replace_kv_cache_with_custom_kv_cache(model)
    return model


def example_inputs(llm_config: LlmConfig) -> tuple[tuple, Any]:
    """(args, dynamic_shapes) for export: tokens and, with a KV cache, {"input_pos": [start]}."""
    max_seq = llm_config.export.max_seq_length
    dynamic = llm_config.model.enable_dynamic_shape
    # The token count's bound is one below max_seq_length, as ExecuTorch's exporter sets it.
    token_dim = torch.export.Dim("token_dim", max=max_seq - 1) if dynamic else None
    if llm_config.model.use_kv_cache:
        tokens = torch.tensor([[2, 3, 4]] if dynamic else [[1]], dtype=torch.long)
        args = (tokens, {"input_pos": torch.tensor([0], dtype=torch.long)})
        return args, (({1: token_dim}, {"input_pos": {0: 1}}) if dynamic else None)
    length = max(3, max_seq) - 1 if dynamic else max(3, max_seq)
    return (torch.arange(length).unsqueeze(0),), (({1: token_dim},) if dynamic else None)


def model_metadata(llm_config: LlmConfig, model: Transformer) -> dict[str, Any]:
    """The constant methods ExecuTorch's LLM runner reads, with base.metadata's entries on top."""
    metadata: dict[str, Any] = {
        "get_max_seq_len": llm_config.export.max_seq_length,
        "get_max_context_len": llm_config.export.max_context_length,
        "get_n_layers": model.n_layers,
        "get_vocab_size": model.vocab_size,
        "use_kv_cache": llm_config.model.use_kv_cache,
        "use_sdpa_with_kv_cache": llm_config.model.use_sdpa_with_kv_cache,
        "enable_dynamic_shape": llm_config.model.enable_dynamic_shape,
    }
    if llm_config.base.metadata:
        try:
            extra = json.loads(llm_config.base.metadata)
        except json.JSONDecodeError as e:
            raise ValueError(f"base.metadata is not a JSON object ({e}): {llm_config.base.metadata!r}") from None
        if not isinstance(extra, dict):
            raise ValueError(f"base.metadata must be a JSON object, not {llm_config.base.metadata!r}")
        metadata.update(extra)
    return metadata


def output_filename(llm_config: LlmConfig) -> str:
    """`export.output_name` (as given when it ends in .pte), else `<output_dir>/<model name>.pte`, the name
    carrying the XNNPACK partitioners as ExecuTorch's does (xnnpack_dq_llama3, xnnpack_xnnpack_dq_llama3)."""
    output_dir = os.path.abspath(llm_config.export.output_dir)
    name = llm_config.export.output_name
    if name:
        return name if name.endswith(".pte") else os.path.join(output_dir, f"{name}.pte")
    name = llm_config.base.model_class.value
    if llm_config.backend.xnnpack.enabled:
        name = f"xnnpack_dq_{name}"
        if llm_config.backend.xnnpack.extended_ops:
            name = f"xnnpack_{name}"
    return os.path.join(output_dir, f"{name}.pte")


def export_llama(llm_config: LlmConfig) -> str:
    """Exports the model the config describes and writes the .pte; returns its path."""
    from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge_transform_and_lower
    from executorch.exir.passes import MemoryPlanningPass

    if llm_config.debug.verbose:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    model = build_model(llm_config)
    metadata = model_metadata(llm_config, model)
    apply_source_transforms(model, llm_config)
    args, dynamic_shapes = example_inputs(llm_config)
    _LOG.info("exporting %s with dynamic shapes %s", llm_config.base.model_class.value, dynamic_shapes)
    with torch.nn.attention.sdpa_kernel([torch.nn.attention.SDPBackend.MATH]), torch.no_grad():
        ep = torch.export.export(model, args, dynamic_shapes=dynamic_shapes, strict=False)
        ep = ep.run_decompositions({})

    partitioners = []
    if llm_config.backend.xnnpack.enabled:
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import (
            XnnpackDynamicallyQuantizedPartitioner, XnnpackPartitioner)

        # Dynamically quantized linears first, so the general partitioner cannot split their patterns.
        partitioners.append(XnnpackDynamicallyQuantizedPartitioner())
        if llm_config.backend.xnnpack.extended_ops:
            partitioners.append(XnnpackPartitioner())
    edge = to_edge_transform_and_lower(
        ep, partitioner=partitioners or None, constant_methods=metadata,
        compile_config=EdgeCompileConfig(_check_ir_validity=False, _skip_dim_order=True))
    if llm_config.debug.verbose:
        from executorch.devtools.backend_debug import get_delegation_info

        print(get_delegation_info(edge.exported_program().graph_module).get_summary())
    program = edge.to_executorch(ExecutorchBackendConfig(
        extract_delegate_segments=True, do_quant_fusion_and_const_prop=True,
        memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False)))
    path = output_filename(llm_config)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    program.write_to_file(path)
    _LOG.info("wrote %s", path)
    return path
